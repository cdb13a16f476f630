"""The nl implementations behind every ``alu`` operator (elementwise, compare, unary, reduce)."""

import numbers

import torch

from .. import alu, buffers, checks, dtypes
from ..argtypes import DTypeLike, Operand
from ..errors import fail, require
from ..tensor import NkiTensor
from ..tiles import read, write
from ..trace import issue


def _value(v, compute):
    """A tile's values, or a scalar, as a host tensor in the compute dtype."""
    if isinstance(v, NkiTensor):
        return read(v, compute)
    require(
        isinstance(v, numbers.Number),
        "operand",
        f"expected a tile or a scalar, got {type(v).__name__}",
    )
    return torch.tensor(v, dtype=compute)


def _elementwise(op, args, dtype, dst, fn):
    """Compute ``fn`` over tiles/scalars with broadcasting into a new SBUF tile (or ``dst``)."""
    where = f"nl.{op.name}"
    tiles = [a for a in args if isinstance(a, NkiTensor)]
    require(tiles, where, "needs at least one tile operand")
    for i, t in enumerate(tiles):
        checks.on_chip(where, f"operand {i}", t)
    compute = torch.int64 if op.bitvec else torch.float32
    if op.bitvec:
        require(not any(t.dtype.is_floating_point for t in tiles), where, "needs integer tiles")
    try:
        result = fn(*(_value(a, compute) for a in args))
    except RuntimeError:
        fail(where, f"shapes {' and '.join(str(t.shape) for t in tiles)} are not broadcastable")
    if result.dim() < 2:
        result = result.reshape(result.shape[0] if result.dim() else 1, 1)
    if dst is None:
        out_dtype = dtypes.promote(*(t.dtype for t in tiles)) if dtype is None else dtype
        dst = NkiTensor.allocate(result.shape, out_dtype, buffers.sbuf, op=where)
    write(dst, result)
    issue(where, op.engine, [dst], tiles)
    return dst


@alu.implement("binary")
def _binary(op, x, y, dtype=None, *, dst=None):
    return _elementwise(op, (x, y), dtype, dst, op.binary)


@alu.implement("compare")
def _compare(op, x, y, dtype=dtypes.bool_, *, dst=None):
    return _elementwise(op, (x, y), dtype, dst, op.binary)


@alu.implement("unary")
def _unary(op, x, dtype=None, *, dst=None):
    return _elementwise(op, (x,), dtype, dst, op.unary)


@alu.implement("reduce")
def _reduce(op, x, axis, dtype=None, keepdims=False, *, dst=None):
    where = f"nl.{op.name}"
    checks.on_chip(where, "x", x)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(sorted(a % x.ndim for a in axes))
    if 0 in axes:
        fail(where, "cannot reduce along the partition axis 0; reductions run only over free axes")
    result = op.reduce(read(x), axes, keepdims)
    if result.dim() < 2:
        result = result.reshape(x.shape[0], 1)
    if dst is None:
        dst = NkiTensor.allocate(
            result.shape, x.dtype if dtype is None else dtype, buffers.sbuf, op=where
        )
    write(dst, result)
    issue(where, "vector", [dst], [x], free=x.free_size)
    return dst


def where(condition: Operand, x: Operand, y: Operand, dtype: DTypeLike | None = None) -> NkiTensor:
    """Select ``x`` where ``condition`` is non-zero, else ``y`` (tiles or scalars, broadcasting)."""
    values = [v for v in (x, y) if isinstance(v, NkiTensor)]
    if dtype is None:
        dtype = dtypes.promote(*(v.dtype for v in values)) if values else dtypes.float32
    return _elementwise(
        _WHERE, (condition, x, y), dtype, None, lambda c, a, b: torch.where(c != 0, a, b)
    )


_WHERE = alu.Op("where", "binary")
