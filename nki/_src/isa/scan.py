"""Per-partition recurrences along the free axis: tensor_tensor_scan (as a parallel scan) and
tensor_scalar_cumulative (a running reduction in the Vector engine's accumulator registers)."""

import torch

from .. import alu, checks, dtypes, runtime
from ..argtypes import Operand, Operator
from ..enums import reduce_cmd as Cmd
from ..errors import fail, require
from ..tensor import NkiTensor
from ..tiles import read_pf, write
from ..trace import issue
from .elementwise import apply, operand_value


def _affine(op, data, first, reverse, where, label):
    """Coefficients (a, b) with ``op`` applied to the running value r written as ``a*r + b``.

    ``first`` is True for op0, whose data operand is the lhs unless reversed; for op1 the
    data operand is the rhs unless reversed.
    """
    data_lhs = first != reverse
    one = torch.ones_like(data)
    if op is alu.add:
        return one, data
    if op is alu.multiply:
        return data, torch.zeros_like(data)
    if op is alu.subtract:
        return (-one, data) if data_lhs else (one, -data)
    fail(where, f"{label} {op!r} is not supported; use nl.add, nl.subtract or nl.multiply")


def tensor_tensor_scan(
    dst: NkiTensor,
    data0: NkiTensor,
    data1: NkiTensor,
    initial: Operand,
    op0: Operator,
    op1: Operator,
    reverse0: bool = False,
    reverse1: bool = False,
    name: str | None = None,
) -> None:
    """``r[i] = op1(op0(data0[i], r[i-1]), data1[i])`` along the free axis, starting at initial."""
    where = "tensor_tensor_scan"
    parts = checks.tile_pair(where, dst, ("data0", data0), ("data1", data1), ("initial", initial))
    f0 = alu.resolve(op0, where, "binary")
    f1 = alu.resolve(op1, where, "binary")
    a0, b0 = _affine(f0, read_pf(data0), True, reverse0, where, "op0")
    a1, b1 = _affine(f1, read_pf(data1), False, reverse1, where, "op1")
    # Each step is the affine map r -> a*r + b; compose prefixes in log2(F) doubling rounds.
    a, b = a1 * a0, a1 * b0 + b1
    shift = 1
    while shift < a.shape[1]:
        a_next, b_next = a.clone(), b.clone()
        b_next[:, shift:] = a[:, shift:] * b[:, :-shift] + b[:, shift:]
        a_next[:, shift:] = a[:, shift:] * a[:, :-shift]
        a, b = a_next, b_next
        shift *= 2
    write(dst, a * operand_value(initial, parts) + b)
    issue(where, "vector", [dst], [data0, data1], reads=(initial,))


_SCAN_OPS = ("add", "subtract", "multiply", "maximum", "minimum", "max", "min")
_START = {"add": 0.0, "subtract": 0.0, "multiply": 1.0}


def _scan(op, x, start):
    """``r[i] = op(x[i], r[i-1])`` along the free axis of ``[P, F]`` ``x``, ``r[-1] = start``."""
    if op.name == "add":
        return start + torch.cumsum(x, 1)
    if op.name == "multiply":
        return start * torch.cumprod(x, 1)
    if op.name in ("maximum", "max", "minimum", "min"):
        lead = torch.cat([start.expand(x.shape[0], 1), x], 1)
        best = torch.cummax(lead, 1) if op.name in ("maximum", "max") else torch.cummin(lead, 1)
        return best.values[:, 1:]
    out, r = torch.empty_like(x), start.expand(x.shape[0], 1).reshape(-1)
    for i in range(x.shape[1]):
        r = op.binary(x[:, i], r)
        out[:, i] = r
    return out


def tensor_scalar_cumulative(
    dst: NkiTensor,
    src: NkiTensor,
    op0: Operator,
    op1: Operator,
    imm0: Operand,
    imm1: Operand | None = None,
    reduce_cmd: Cmd = Cmd.reset_reduce,
    name: str | None = None,
) -> None:
    """``reg = op1(op0(src[i], imm0), reg)``, ``dst[i] = reg`` along the free axis (Vector)."""
    where = "tensor_scalar_cumulative"
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "src", src)
    checks.same_tile(where, "dst", dst, "src", src)
    for t in (dst, src):
        require(
            t.dtype not in (torch.int32, torch.uint32),
            where,
            f"int32/uint32 tiles are not supported, got {dtypes.name(t.dtype)}",
        )
    parts = src.shape[0]
    f0 = alu.resolve(op0, where, "binary")
    f1 = alu.resolve(op1, where, "binary")
    require(f1.name in _SCAN_OPS, where, f"op1 {f1!r} must be add, subtract, multiply, max or min")
    checks.operand(where, "imm0", imm0, parts)
    lanes = runtime.current().vector_regs[:parts]
    if reduce_cmd is Cmd.reset_reduce:
        lanes.fill_(_START.get(f1.name, float("-inf") if "max" in f1.name else float("inf")))
    elif reduce_cmd is Cmd.load_reduce:
        require(imm1 is not None, where, "load_reduce needs imm1, the accumulator's start value")
        checks.operand(where, "imm1", imm1, parts)
        lanes.copy_(torch.as_tensor(operand_value(imm1, parts)).reshape(-1).expand(parts))
    else:
        require(reduce_cmd is Cmd.reduce, where, f"reduce_cmd {reduce_cmd} is not supported")
    x = apply(f0, read_pf(src), operand_value(imm0, parts), False)
    out = _scan(f1, x, lanes.clone().reshape(parts, 1))
    lanes.copy_(out[:, -1])
    write(dst, out)
    issue(where, "vector", [dst], [src], reads=(imm0, imm1))
