"""Reductions: along free axes (Vector engine) and across partitions (GpSimd)."""

import operator
from collections.abc import Sequence

import torch

from .. import alu, buffers, checks, runtime
from ..argtypes import Operand, Operator
from ..enums import reduce_cmd as Cmd
from ..errors import fail, require
from ..tensor import NkiTensor
from ..tiles import read, read_pf, write
from ..trace import issue
from .accumulators import accumulate
from .elementwise import apply, operand_value


def free_axes(where, t, axis):
    """Normalize ``axis``; only free axes may be reduced, and they must end at the last dim."""
    axes = (axis,) if isinstance(axis, int) or hasattr(axis, "__index__") else tuple(axis)
    axes = tuple(sorted(operator.index(a) % t.ndim for a in axes))
    if 0 in axes:
        fail(where, "cannot reduce along the partition axis 0; reductions run only over free axes")
    expected = tuple(range(t.ndim - len(axes), t.ndim))
    if axes != expected:
        fail(
            where,
            f"axis {axes} must be the last contiguous free axes {expected} of a {t.ndim}-D tile",
        )
    return axes


def tensor_reduce(
    dst: NkiTensor,
    op: Operator,
    data: NkiTensor,
    axis: int | Sequence[int],
    negate: bool = False,
    keepdims: bool = False,
    name: str | None = None,
) -> None:
    """Reduce ``data`` along its trailing free ``axis`` into ``dst``."""
    where = "tensor_reduce"
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "data", data)
    axes = free_axes(where, data, axis)
    checks.same_partitions(where, "dst", dst, "data", data)
    fn = alu.resolve(op, where, "reduce")
    result = fn.reduce(read(data), axes, keepdims)
    if negate:
        result = -result
    produced = result.numel() // data.shape[0]
    if dst.free_size != produced:
        fail(
            where,
            f"dst has {dst.free_size} elements per partition, the reduction produces {produced}",
        )
    write(dst, result)
    issue(where, "vector", [dst], [data], free=data.free_size)


def tensor_partition_reduce(
    dst: NkiTensor, op: Operator, data: NkiTensor, name: str | None = None
) -> None:
    """Reduce ``data`` across its partitions into a single-partition ``dst`` (GpSimd)."""
    where = "tensor_partition_reduce"
    checks.on_chip(where, "dst", dst, buffers.sbuf)
    checks.on_chip(where, "data", data, buffers.sbuf)
    checks.same_free(where, "dst", dst, "data", data)
    if dst.shape[0] != 1:
        fail(where, f"dst must have 1 partition, has {dst.shape[0]}")
    fn = alu.resolve(op, where, "reduce")
    write(dst, fn.reduce(read_pf(data).T, (1,), False))
    issue(where, "gpsimd", [dst], [data])


def tensor_scalar_reduce(
    dst: NkiTensor,
    data: NkiTensor,
    op0: Operator,
    operand0: Operand,
    reduce_op: Operator,
    reduce_res: NkiTensor | None = None,
    reverse0: bool = False,
    reduce_cmd: Cmd = Cmd.reset_reduce,
    reduce_init: float | None = None,
    reduce_res_negate: bool = False,
    name: str | None = None,
) -> None:
    """``dst = data <op0> operand0`` (or ``op0(data)`` for a unary operator such as ``nl.abs``),
    reduced along the free axes into the Vector accumulators and, if given, ``reduce_res``."""
    where = "tensor_scalar_reduce"
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "data", data)
    checks.same_tile(where, "dst", dst, "data", data)
    parts = data.shape[0]
    f0 = alu.resolve(op0, where)
    if f0.bitvec:
        fail(where, f"op0 {f0!r} is a bit-vector operator; use an arithmetic one")
    require(not reverse0, where, "reverse0=True is not supported by tensor_scalar_reduce")
    if f0.binary is None:
        if not (operand0 is None or (not isinstance(operand0, NkiTensor) and operand0 == 0)):
            fail(
                where,
                f"operand0 must be None or 0 with the unary operator {f0!r}, got {operand0!r}",
            )
        value = None
    else:
        checks.operand(where, "operand0", operand0, parts)
        value = operand_value(operand0, parts)
    if reduce_res is not None:
        checks.operand(where, "reduce_res", reduce_res, parts)
    red = alu.resolve(reduce_op, where, "reduce")
    require(
        reduce_init is None or reduce_cmd is Cmd.load_reduce,
        where,
        "reduce_init is only used with reduce_cmd=load_reduce",
    )
    out = apply(f0, read_pf(data), value, False)
    write(dst, out)
    regs = accumulate(
        runtime.current().vector_regs, reduce_cmd, red.reduce(out, (1,)), red, reduce_init, where
    )
    dsts = [dst]
    if reduce_res is not None:
        write(reduce_res, -regs if reduce_res_negate else regs)
        dsts.append(reduce_res)
    issue(where, "vector", dsts, [data], reads=(operand0,))


def max8(dst: NkiTensor, src: NkiTensor, name: str | None = None) -> None:
    """The 8 largest values of each partition, in descending order."""
    where = "max8"
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "src", src)
    checks.same_partitions(where, "dst", dst, "src", src)
    if not (8 <= src.free_size <= 16384):
        fail(where, f"src must have 8 to 16384 elements per partition, has {src.free_size}")
    if dst.free_size != 8:
        fail(where, f"dst must have 8 elements per partition, has {dst.free_size}")
    write(dst, torch.topk(read_pf(src), 8, dim=1).values)
    issue(where, "vector", [dst], [src])
