"""tensor_tensor_scan: a per-partition recurrence along the free axis, as a parallel scan."""

import torch

from .. import alu, checks
from ..errors import fail
from ..tiles import read_pf, write
from ..trace import issue
from .elementwise import operand_value


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
    dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, name=None
):
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
