"""Scalar-engine activation: ``op(data * scale + bias)`` with an optional free-axis sum."""

from .. import alu, checks, runtime
from ..argtypes import Operand, Operator
from ..enums import reduce_cmd as Cmd
from ..errors import fail, require
from ..tensor import NkiTensor
from ..tiles import read_pf, write
from ..trace import issue
from .accumulators import accumulate
from .elementwise import operand_value


def activation(
    dst: NkiTensor,
    op: Operator,
    data: NkiTensor,
    bias: Operand | None = None,
    scale: Operand = 1.0,
    reduce_op: Operator | None = None,
    reduce_res: NkiTensor | None = None,
    reduce_cmd: Cmd = Cmd.idle,
    name: str | None = None,
) -> None:
    """Apply an activation function; optionally add-reduce the result along the free axes.

    With ``reduce_res`` given and ``reduce_cmd`` left at ``idle`` the instruction behaves like
    ``activation_reduce`` (reset, reduce, read out), which is what kernels written for the
    older API expect.
    """
    where = "activation"
    ctx = runtime.current()
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "data", data)
    checks.same_tile(where, "dst", dst, "data", data)
    fn = alu.resolve(op, where, "unary")
    parts = data.shape[0]
    checks.operand(where, "scale", scale, parts)
    if bias is not None:
        checks.operand(where, "bias", bias, parts)
        require(
            isinstance(bias, NkiTensor) or ctx.target.generation >= 3,
            where,
            "bias must be a (P, 1) tile on NeuronCore-v2 (trn1)",
        )
    x = read_pf(data) * operand_value(scale, parts)
    if bias is not None:
        x = x + operand_value(bias, parts)
    out = fn.unary(x)
    write(dst, out)
    dsts = [dst]
    cmd = Cmd.reset_reduce if reduce_cmd is Cmd.idle and reduce_res is not None else reduce_cmd
    if cmd is not Cmd.idle:
        red = alu.resolve(reduce_op if reduce_op is not None else alu.add, where, "reduce")
        if red is not alu.add:
            fail(where, f"reduce_op must be nl.add, got {red!r}")
        regs = accumulate(ctx.scalar_regs, cmd, out.sum(1), red, where=where)
        if reduce_res is not None:
            checks.operand(where, "reduce_res", reduce_res, parts)
            write(reduce_res, regs)
            dsts.append(reduce_res)
    issue(where, "scalar", dsts, [data], reads=(bias, scale))


def activation_reduce(
    dst: NkiTensor,
    op: Operator,
    data: NkiTensor,
    reduce_op: Operator,
    reduce_res: NkiTensor,
    bias: Operand | None = None,
    scale: Operand = 1.0,
    name: str | None = None,
) -> None:
    """``activation`` plus a free-axis reduction of the result into ``reduce_res``."""
    activation(
        dst,
        op,
        data,
        bias=bias,
        scale=scale,
        reduce_op=reduce_op,
        reduce_res=reduce_res,
        reduce_cmd=Cmd.reset_reduce,
    )
