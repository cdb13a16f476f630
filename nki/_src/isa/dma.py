"""DMA instructions: copies between HBM and SBUF (no PSUM), with casts via fp32."""

from collections.abc import Sequence

import torch

from .. import alu, buffers, checks, dtypes
from ..argtypes import Operator
from ..enums import dge_mode as Dge
from ..enums import engine as E
from ..enums import oob_mode as Oob
from ..errors import fail, require
from ..tensor import NkiTensor
from ..tiles import write
from ..trace import contiguous_run, issue

_DMA_SPACES = (buffers.sbuf, buffers.private_hbm, buffers.shared_hbm)


def _endpoint(where, label, t):
    checks.tensor(where, label, t)
    checks.buffer(where, label, t, *_DMA_SPACES)
    if t.buffer.on_chip:
        checks.partitions(where, label, t)


def _issue(where, dst, src):
    issue(
        where,
        "dma",
        [dst],
        [src],
        nbytes=dst.size * max(dst.itemsize, src.itemsize),
        chunk=min(contiguous_run(dst), contiguous_run(src)),
    )


def _mode(where, enum, value):
    """An ``enum`` member given as itself or as its documented integer value."""
    if isinstance(value, enum):
        return value
    try:
        return enum(value)
    except ValueError:
        fail(where, f"{value!r} is not an nki.isa.{enum.__name__} member or value")


def dma_copy(
    dst: NkiTensor,
    src: NkiTensor,
    priority: int | None = None,
    oob_mode: Oob = Oob.error,
    dge_mode: Dge = Dge.unknown,
    engine: E = E.unknown,
    name: str | None = None,
) -> None:
    """``dst = src`` element by element in row-major order (element counts must match)."""
    where = "dma_copy"
    _endpoint(where, "dst", dst)
    _endpoint(where, "src", src)
    dge_mode, oob_mode = _mode(where, Dge, dge_mode), _mode(where, Oob, oob_mode)
    checks.engine(where, engine, E.sync, E.scalar)
    if dst.size != src.size:
        fail(where, f"element count mismatch: dst has {dst.size}, src has {src.size}")
    values, valid = src.gather()
    if dst.dtype != src.dtype:
        dtypes.require_unpacked(src, where, "src")
        dtypes.require_unpacked(dst, where, "dst")
        values = dtypes.stored_values(values, src.dtype)
    values = values.reshape(dst.shape)
    mask = None if valid is None else valid.reshape(dst.shape)
    if dst.is_indirect():
        dst_valid = dst._in_bounds()
        mask = dst_valid if mask is None else mask & dst_valid
    if mask is not None and not bool(mask.all()):
        if oob_mode is not Oob.skip:
            fail(
                where,
                f"indirect index out of bounds for {int((~mask).sum())} elements "
                "(use oob_mode=nisa.oob_mode.skip to skip them)",
            )
    if dst.is_indirect() or mask is not None:
        dst.scatter(_cast_like(values, dst), mask)
    else:
        write(dst, values)
    _issue(where, dst, src)


def _cast_like(values, dst):
    """``values`` converted to dst's storage type as the DMA engine stores them."""
    if values.is_floating_point() and not dst.dtype.is_floating_point:
        info = torch.iinfo(dst.dtype.torch)
        return values.double().round().clamp(info.min, info.max).to(dst.dtype.torch)
    return dtypes.stored(values, dst.dtype)


_PERMUTATIONS = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def dma_transpose(
    dst: NkiTensor,
    src: NkiTensor,
    axes: Sequence[int] | None = None,
    priority: int | None = None,
    dge_mode: Dge = Dge.unknown,
    oob_mode: Oob = Oob.error,
    name: str | None = None,
) -> None:
    """Transpose ``src`` (HBM or SBUF; a ``vector_offset`` view gathers its rows) into an SBUF
    ``dst`` with the DMA engines."""
    where = "dma_transpose"
    oob_mode = _mode(where, Oob, oob_mode)
    _endpoint(where, "src", src)
    checks.tensor(where, "dst", dst)
    require(not dst.is_indirect(), where, "dst cannot be a vector_offset (scatter) view")
    checks.buffer(where, "dst", dst, buffers.sbuf)
    checks.partitions(where, "dst", dst)
    if src.ndim not in _PERMUTATIONS:
        fail(where, f"src must be 2-D to 4-D, is {src.ndim}-D")
    perm = tuple(axes) if axes is not None else _PERMUTATIONS[src.ndim]
    if perm != _PERMUTATIONS[src.ndim]:
        fail(
            where,
            f"axes {perm} not supported for a {src.ndim}-D tile; use {_PERMUTATIONS[src.ndim]}",
        )
    checks.same_dtype(where, "dst", dst, "src", src)
    expected = tuple(src.shape[p] for p in perm)
    if dst.shape != expected:
        fail(where, f"dst shape {dst.shape} must be {expected}")
    values, valid = src.gather()
    values = values.reshape(src.shape).permute(perm)
    if valid is None or bool(valid.all()):
        write(dst, values)
    else:
        if oob_mode is not Oob.skip:
            fail(
                where,
                f"indirect index out of bounds for {int((~valid).sum())} elements "
                "(use oob_mode=nisa.oob_mode.skip to skip them)",
            )
        dst.scatter(values.to(dst.dtype.torch), valid.reshape(src.shape).permute(perm))
    issue(where, "dma", [dst], [src], nbytes=dst.size * dst.itemsize, chunk=dst.itemsize)


MAX_COMPUTE_SOURCES = 16


def dma_compute(
    dst: NkiTensor,
    srcs: Sequence[NkiTensor],
    reduce_op: Operator,
    scales: Sequence[float] | None = None,
    unique_indices: bool = True,
    oob_mode: Oob = Oob.error,
    name: str | None = None,
) -> None:
    """``dst = srcs[0] + srcs[1] + ...`` computed in fp32 by the DMA engines; with a
    ``vector_offset`` operand, a read-modify-write scatter (dst in HBM) or gather (dst in SBUF)."""
    where = "dma_compute"
    oob_mode = _mode(where, Oob, oob_mode)
    _endpoint(where, "dst", dst)
    if not (isinstance(srcs, (list, tuple)) and 1 <= len(srcs) <= MAX_COMPUTE_SOURCES):
        fail(where, f"srcs must be a list of 1 to {MAX_COMPUTE_SOURCES} tensors")
    for s in srcs:
        _endpoint(where, "srcs", s)
        if s.size != dst.size:
            fail(where, f"element count mismatch: dst has {dst.size}, a source has {s.size}")
        dtypes.require_unpacked(s, where, "srcs")
    fn = alu.resolve(reduce_op, where, "binary")
    if fn is not alu.add:
        fail(where, f"reduce_op must be nl.add, got {fn!r}")
    if not (scales is None or all(float(v) == 1.0 for v in scales)):
        fail(where, f"scales must all be 1.0 (or None), got {scales!r}")
    indirect = [s for s in srcs if s.is_indirect()] + ([dst] if dst.is_indirect() else [])
    if indirect:
        require(len(srcs) == 2, where, "read-modify-write with vector_offset takes exactly 2 srcs")
        require(unique_indices, where, "unique_indices=False is not supported")
    total, valid = None, None
    for s in srcs:
        values, ok = s.gather()
        values = values.float().reshape(dst.shape)
        total = values if total is None else total + values
        if ok is not None:
            ok = ok.reshape(dst.shape)
            valid = ok if valid is None else valid & ok
    if dst.is_indirect():
        ok = dst._in_bounds()
        valid = ok if valid is None else valid & ok
    if valid is not None and not bool(valid.all()):
        if oob_mode is not Oob.skip:
            fail(
                where,
                f"indirect index out of bounds for {int((~valid).sum())} elements "
                "(use oob_mode=nisa.oob_mode.skip to skip them)",
            )
    if valid is None and not dst.is_indirect():
        write(dst, total)
    else:
        dst.scatter(_cast_like(total, dst), valid)
    issue(
        where,
        "dma",
        [dst],
        list(srcs),
        nbytes=dst.size * dst.itemsize * (len(srcs) + 1),
        chunk=contiguous_run(dst) if not dst.is_indirect() else dst.itemsize,
    )
