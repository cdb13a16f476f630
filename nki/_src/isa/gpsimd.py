"""Affine index patterns on the GpSimd engine: iota and affine_select (e.g. causal masks)."""

import math

import torch

from .. import alu, buffers, checks
from ..errors import require
from ..tiles import as_float32, read_pf, write
from ..trace import issue


def affine_values(where, dst, pattern, offset, channel_multiplier):
    """int64 ``[P, F]`` of ``offset + p*channel_multiplier + sum_k i_k*step_k``."""
    pattern = [(int(step), int(num)) for step, num in pattern]
    require(
        1 <= len(pattern) <= 4,
        where,
        f"pattern must have 1 to 4 [step, num] entries, has {len(pattern)}",
    )
    count = math.prod(num for _, num in pattern)
    require(
        count == dst.free_size,
        where,
        f"pattern covers {count} elements per partition, dst has {dst.free_size}",
    )
    free = torch.zeros((), dtype=torch.int64)
    for step, num in pattern:
        free = free.unsqueeze(-1) + step * torch.arange(num)
    parts = torch.arange(dst.shape[0]).unsqueeze(1) * int(channel_multiplier)
    return int(offset) + parts + free.reshape(1, -1)


def iota(dst, pattern, offset=0, channel_multiplier=0, name=None):
    """Fill ``dst`` with the affine pattern (computed in int32, cast to dst's dtype)."""
    where = "iota"
    checks.on_chip(where, "dst", dst, buffers.sbuf)
    write(dst, affine_values(where, dst, pattern, offset, channel_multiplier).to(torch.int32))
    issue(where, "gpsimd", [dst], [])


def affine_select(
    dst,
    pattern,
    channel_multiplier,
    on_true_tile,
    on_false_value,
    cmp_op=alu.equal,
    offset=0,
    name=None,
):
    """``dst = on_true_tile`` where ``cmp_op(affine value, 0)`` holds, else ``on_false_value``."""
    where = "affine_select"
    checks.on_chip(where, "dst", dst, buffers.sbuf)
    checks.on_chip(where, "on_true_tile", on_true_tile, buffers.sbuf)
    checks.same_tile(where, "dst", dst, "on_true_tile", on_true_tile)
    cmp = alu.resolve(cmp_op, where, "binary")
    values = affine_values(where, dst, pattern, offset, channel_multiplier).to(torch.float32)
    keep = cmp.binary(values, torch.zeros(())) != 0
    write(dst, torch.where(keep, read_pf(on_true_tile), torch.tensor(as_float32(on_false_value))))
    issue(where, "gpsimd", [dst], [on_true_tile])
