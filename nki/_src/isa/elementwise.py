"""Elementwise instructions on SBUF/PSUM tiles (Vector, Scalar and GpSimd engines)."""

import torch

from .. import alu, buffers, checks, dtypes, runtime
from ..argtypes import Operand, Operator
from ..enums import engine as E
from ..enums import reduce_cmd as Cmd
from ..errors import fail, require
from ..tensor import NkiTensor
from ..tiles import as_float32, fill, read, read_pf, write
from ..trace import issue
from .accumulators import accumulate

_INT32 = (dtypes.int32, dtypes.uint32)


def engine_name(eng, default):
    """Engine that executes an instruction: the requested one, else ``default``."""
    return default if eng is E.unknown else eng.name


def operand_value(v, parts):
    """A scalar or ``(parts, 1)`` tile operand as something broadcastable over ``[P, F]``."""
    if isinstance(v, NkiTensor):
        return read(v).reshape(parts, 1)
    return as_float32(v)


def apply(op, data, value, reverse):
    """``data <op> value`` (or ``value <op> data`` when reversed); unary ops ignore ``value``."""
    if op.binary is None:
        return op.unary(data)
    value = torch.as_tensor(value, dtype=data.dtype)
    return op.binary(value, data) if reverse else op.binary(data, value)


def tensor_copy(
    dst: NkiTensor, src: NkiTensor, engine: E = E.unknown, name: str | None = None
) -> None:
    """Copy ``src`` into ``dst`` on chip (PSUM eviction, casts)."""
    op = "tensor_copy"
    checks.on_chip(op, "dst", dst)
    checks.on_chip(op, "src", src)
    checks.same_tile(op, "dst", dst, "src", src)
    eng = checks.engine(op, engine, E.vector, E.scalar, E.gpsimd)
    checks.gpsimd_no_psum(op, eng, dst, src)
    # Same dtype: bit-accurate; otherwise through fp32.
    write(dst, src.host if dst.dtype == src.dtype else read(src))
    issue(op, engine_name(eng, "vector"), [dst], [src])


def memset(dst: NkiTensor, value: float, engine: E = E.unknown, name: str | None = None) -> None:
    """Fill ``dst`` with the compile-time constant ``value``."""
    op = "memset"
    checks.on_chip(op, "dst", dst)
    eng = checks.engine(op, engine, E.vector, E.gpsimd)
    checks.gpsimd_no_psum(op, eng, dst)
    if not (dst.dtype.is_floating_point or float(value).is_integer()):
        fail(op, f"value {value} does not match integer dtype {dst.dtype}")
    fill(dst, value)
    issue(op, engine_name(eng, "vector"), [dst], [], free=dst.free_size)


def tensor_tensor(
    dst: NkiTensor,
    data1: NkiTensor,
    data2: NkiTensor,
    op: Operator,
    engine: E = E.unknown,
    name: str | None = None,
) -> None:
    """``dst = data1 <op> data2`` elementwise (same partitions and elements per partition)."""
    where = "tensor_tensor"
    for label, t in (("dst", dst), ("data1", data1), ("data2", data2)):
        checks.on_chip(where, label, t)
    checks.same_tile(where, "dst", dst, "data1", data1)
    checks.same_tile(where, "dst", dst, "data2", data2)
    checks.not_both_psum(where, "data1", data1, "data2", data2)
    fn = alu.resolve(op, where, "binary")
    eng = checks.engine(where, engine, E.vector, E.gpsimd)
    tiles = (dst, data1, data2)
    if eng is E.unknown:
        all_int32 = all(t.dtype in _INT32 for t in tiles)
        on_psum = any(t.buffer is buffers.psum for t in tiles)
        eng = E.gpsimd if fn.engine == "gpsimd" or (all_int32 and not on_psum) else E.vector
    checks.gpsimd_no_psum(where, eng, *tiles)
    exact_int = fn.bitvec or (eng is E.gpsimd and dst.dtype in _INT32)
    dtype = torch.int64 if exact_int else torch.float32
    if fn.bitvec:
        if any(t.dtype.is_floating_point for t in tiles):
            fail(where, f"{fn!r} needs integer tiles")
    write(dst, fn.binary(read_pf(data1, dtype), read_pf(data2, dtype)))
    issue(where, eng.name, [dst], [data1, data2])


def tensor_scalar(
    dst: NkiTensor,
    data: NkiTensor,
    op0: Operator,
    operand0: Operand,
    reverse0: bool = False,
    op1: Operator | None = None,
    operand1: Operand | None = None,
    reverse1: bool = False,
    engine: E = E.unknown,
    name: str | None = None,
) -> None:
    """``(data <op0> operand0) <op1> operand1`` with scalar or per-partition operands."""
    where = "tensor_scalar"
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "data", data)
    checks.same_tile(where, "dst", dst, "data", data)
    eng = checks.engine(where, engine, E.vector, E.scalar, E.gpsimd)
    checks.gpsimd_no_psum(where, eng, dst, data)
    parts = data.shape[0]
    steps: list[tuple[Operator, Operand | None, bool, str, str]] = [
        (op0, operand0, reverse0, "op0", "operand0")
    ]
    if op1 is not None:
        steps.append((op1, operand1, reverse1, "op1", "operand1"))
    else:
        require(operand1 is None, where, "operand1 must be None when op1 is None")
    ops = [alu.resolve(o, where) for o, *_ in steps]
    require(
        len({o.bitvec for o in ops}) == 1,
        where,
        "op0 and op1 must both be arithmetic or both be bit-vector operators",
    )
    dtype = torch.int64 if ops[0].bitvec else torch.float32
    x = read_pf(data, dtype)
    for fn, (_, v, rev, _, label) in zip(ops, steps):
        if fn.binary is not None:
            checks.operand(where, label, v, parts)
        x = apply(fn, x, operand_value(v, parts) if fn.binary is not None else None, rev)
    write(dst, x)
    issue(where, engine_name(eng, "vector"), [dst], [data], reads=(operand0, operand1))


def scalar_tensor_tensor(
    dst: NkiTensor,
    data: NkiTensor,
    op0: Operator,
    operand0: Operand,
    op1: Operator,
    operand1: NkiTensor,
    reverse0: bool = False,
    reverse1: bool = False,
    name: str | None = None,
) -> None:
    """``(data <op0> operand0) <op1> operand1``: operand0 per partition, operand1 a full tile."""
    where = "scalar_tensor_tensor"
    parts = checks.tile_pair(
        where, dst, ("data", data), ("operand1", operand1), ("operand0", operand0)
    )
    f0 = alu.resolve(op0, where, "binary")
    f1 = alu.resolve(op1, where, "binary")
    x = apply(f0, read_pf(data), operand_value(operand0, parts), reverse0)
    y = read_pf(operand1)
    write(dst, f1.binary(y, x) if reverse1 else f1.binary(x, y))
    issue(where, "vector", [dst], [data, operand1], reads=(operand0,))


def reciprocal(dst: NkiTensor, data: NkiTensor, name: str | None = None) -> None:
    """``dst = 1 / data`` elementwise."""
    where = "reciprocal"
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "data", data)
    checks.same_tile(where, "dst", dst, "data", data)
    write(dst, torch.reciprocal(read_pf(data)))
    issue(where, "vector", [dst], [data])


def tensor_copy_predicated(
    dst: NkiTensor,
    src: Operand,
    predicate: NkiTensor,
    reverse_pred: bool = False,
    name: str | None = None,
) -> None:
    """Copy ``src`` into ``dst`` where ``predicate`` is non-zero (inverted by ``reverse_pred``)."""
    where = "tensor_copy_predicated"
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "predicate", predicate)
    checks.same_tile(where, "dst", dst, "predicate", predicate)
    if predicate.dtype not in (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.bool_):
        fail(where, f"predicate must be uint8, uint16 or uint32, got {predicate.dtype}")
    mask = read_pf(predicate) != 0
    if reverse_pred:
        mask = ~mask
    if isinstance(src, NkiTensor):
        checks.on_chip(where, "src", src)
        checks.same_tile(where, "dst", dst, "src", src)
        checks.not_both_psum(where, "src", src, "predicate", predicate)
        checks.same_dtype(where, "src", src, "dst", dst)
        value = read_pf(src)
    else:
        value = torch.full(mask.shape, as_float32(src))
    write(dst, torch.where(mask, value, read_pf(dst)))
    issue(where, "vector", [dst], [predicate] + ([src] if isinstance(src, NkiTensor) else []))


def exponential(
    dst: NkiTensor,
    src: NkiTensor,
    max_value: Operand = 0.0,
    reduce_res: NkiTensor | None = None,
    reduce_cmd: Cmd = Cmd.idle,
    reduce_init: float = 0.0,
    name: str | None = None,
) -> None:
    """``dst = exp(src - max_value)`` on the Vector engine, optionally summing (NeuronCore-v4)."""
    where = "exponential"
    ctx = runtime.current()
    tgt = ctx.target
    if tgt.generation < 4:
        fail(
            where,
            f"requires NeuronCore-v4 (trn3); target {tgt.name} is NeuronCore-v{tgt.generation}",
        )
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "src", src)
    checks.same_tile(where, "dst", dst, "src", src)
    parts = src.shape[0]
    checks.operand(where, "max_value", max_value, parts)
    out = torch.exp(read_pf(src) - operand_value(max_value, parts))
    write(dst, out)
    if reduce_cmd is not Cmd.idle:
        regs = accumulate(ctx.vector_regs, reduce_cmd, out.sum(1), alu.add, reduce_init, where)
        if reduce_res is not None:
            checks.operand(where, "reduce_res", reduce_res, parts)
            write(reduce_res, regs)
    elif reduce_res is not None:
        fail(where, "reduce_res needs a reduce_cmd other than idle")
    issue(
        where,
        "vector",
        [dst] + ([reduce_res] if reduce_res is not None else []),
        [src],
        reads=(max_value,),
    )
