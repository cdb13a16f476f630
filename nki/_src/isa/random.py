"""Random-number instructions: dropout."""

import torch

from .. import checks
from ..argtypes import Operand
from ..tensor import NkiTensor
from ..tiles import read_pf, write
from ..trace import issue
from .elementwise import operand_value


def dropout(dst: NkiTensor, data: NkiTensor, prob: Operand, name: str | None = None) -> None:
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
