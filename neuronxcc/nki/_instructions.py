"""NKI 0.7 instructions that ``nki.isa`` does not provide yet, in its destination-first form.

They follow the NKI 0.7 signatures and are built from the simulator's own pieces (operand
checks, fp32 engine math, the accumulator registers and the trace), so they can move into
``nki._src.isa`` unchanged.  The pre-0.2 ``neuronxcc.nki.isa`` functions call them.
"""

import torch

from nki._src import alu, checks, dtypes, runtime
from nki._src.enums import reduce_cmd as Cmd
from nki._src.errors import require
from nki._src.isa.elementwise import apply, operand_value
from nki._src.tiles import read_pf, write
from nki._src.trace import issue

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
    dst, src, op0, op1, imm0, imm1=None, reduce_cmd=Cmd.reset_reduce, name=None
):
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


def dropout(dst, data, prob, name=None):
    """Zero each element of ``data`` with probability ``prob`` (a scalar or per partition)."""
    where = "dropout"
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "data", data)
    checks.same_tile(where, "dst", dst, "data", data)
    parts = data.shape[0]
    checks.operand(where, "prob", prob, parts)
    x = read_pf(data)
    keep = torch.rand(x.shape) >= torch.as_tensor(operand_value(prob, parts))
    write(dst, torch.where(keep, x, torch.zeros(())))
    issue(where, "vector", [dst], [data], reads=(prob,))


def sequence_bounds(dst, segment_ids, name=None):
    """``[start, end)`` of the run of equal segment ids around each element (id 0 is padding:
    start n, end -1), as ``dst[:, 0, :]`` and ``dst[:, 1, :]`` (GpSimd)."""
    where = "sequence_bounds"
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "segment_ids", segment_ids)
    require(
        segment_ids.dtype in (torch.float32, torch.int32),
        where,
        f"segment_ids must be float32 or int32, got {dtypes.name(segment_ids.dtype)}",
    )
    ids = read_pf(segment_ids)
    parts, n = ids.shape
    require(
        dst.shape[0] == parts and dst.free_size == 2 * n,
        where,
        f"dst must be ({parts}, 2, {n}), got {dst.shape}",
    )
    starts = torch.empty_like(ids)
    ends = torch.empty_like(ids)
    for p in range(parts):
        row = ids[p]
        for i in range(n):
            if row[i] == 0:
                starts[p, i], ends[p, i] = n, -1
                continue
            lo, hi = i, i + 1
            while lo > 0 and row[lo - 1] == row[i]:
                lo -= 1
            while hi < n and row[hi] == row[i]:
                hi += 1
            starts[p, i], ends[p, i] = lo, hi
    write(dst, torch.stack([starts, ends], 1))
    issue(where, "gpsimd", [dst], [segment_ids])
