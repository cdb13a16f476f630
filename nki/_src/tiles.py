"""Host data access for instructions: read views as fp32, write results with a cast."""

import math
import struct

import torch

from . import dtypes


def read(t, dtype=torch.float32):
    """Values of view ``t`` as a new torch tensor (engines compute in fp32)."""
    if t.dtype.packed:
        dtypes.require_unpacked(t, "read")
    return dtypes.stored_values(t.host, t.dtype, dtype)


def read_pf(t, dtype=torch.float32):
    """Values of ``t`` as ``[partitions, elements per partition]``."""
    values = read(t, dtype)
    return values if len(t.shape) == 2 else values.reshape(t.shape[0], -1)


def rows(t, where):
    """A writable ``[partitions, elements per partition]`` view of ``t``'s storage."""
    try:
        return t.host.view(t.shape[0], -1)
    except RuntimeError:
        from .errors import fail

        fail(where, f"tile {t.shape} must be contiguous within each partition")


def as_float32(value):
    """A Python number as the float32 the engines hold it in, as a Python float: rounded to
    nearest even, so AWS's documented literal -3.4028235e+38 is float32's minimum (torch
    refuses such a Python float in float32 arithmetic as an overflow)."""
    x = float(value)
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        # struct refuses what rounds to infinity; the engines hold it as infinity.
        return math.copysign(math.inf, x)


def fill(dst, value):
    """Fill tile ``dst`` with the scalar ``value`` as the engines store it: integers exactly,
    floats through float32 (rounded to nearest even, then to ``dst``'s type)."""
    t = dst.host
    if t.is_floating_point() and t.dtype != torch.float64:
        t.copy_(dtypes.stored(torch.tensor(as_float32(value)), dst.dtype).expand(t.shape))
    else:
        t.fill_(value)


def write(dst, value):
    """Store ``value`` (any shape with dst's element count, or broadcastable) into view ``dst``.

    Float values stored into integer tiles round to nearest (ties to even) and saturate to the
    destination's range, as the engines' output converters do."""
    view = dst.host
    if dst.dtype.packed and value.dtype != view.dtype:
        dtypes.require_unpacked(dst, "write", "dst")
    if not view.dtype.is_floating_point and view.dtype != torch.bool and value.is_floating_point():
        info = torch.iinfo(view.dtype)
        value = value.double().round().clamp(info.min, info.max)
    elif dst.dtype is dtypes.float8_e4m3:
        value = dtypes.stored(value, dst.dtype)
    if value.shape != view.shape and value.numel() == view.numel():
        value = value.reshape(view.shape)
    if 0 in dst._strides and any(st == 0 and n > 1 for n, st in zip(dst.shape, dst._strides)):
        _write_overlapping(dst, value.expand(view.shape))
        return
    view.copy_(value)


def _write_overlapping(dst, value):
    """Store into a view that reaches some elements more than once (a stride-0 access pattern):
    elements are written in row-major order, so the last write to each location wins."""
    offsets = torch.tensor(dst._offset)
    for n, st in zip(dst.shape, dst._strides):
        offsets = offsets.unsqueeze(-1) + torch.arange(n) * st
    offsets, values = offsets.reshape(-1).flip(0), value.reshape(-1).flip(0)
    unique, inverse = torch.unique(offsets, return_inverse=True)
    first = torch.full_like(unique, offsets.numel()).scatter_reduce(
        0, inverse, torch.arange(offsets.numel()), reduce="amin"
    )
    dst._flat_storage()[unique] = values[first].to(dst._base.dtype)
