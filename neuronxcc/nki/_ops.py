"""Operators of the pre-0.2 API: the ``op=`` arguments (NumPy functions or ``nl`` functions)
and the elementwise functions the old ``nl`` had beyond ``nki.language``."""

import math

import numpy as np
import torch

import nki.language as nl
from nki._src.legacy_api import AluOp, resolve_alu_op

tan = AluOp("tan", "unary", unary=torch.tan)
trunc = AluOp("trunc", "unary", unary=torch.trunc)
fmod = AluOp("fmod", "binary", binary=torch.fmod)
mod = AluOp("mod", "binary", binary=torch.remainder)
erf_dx = AluOp(
    "erf_dx", "unary", unary=lambda a: 2.0 / math.sqrt(math.pi) * torch.exp(-torch.square(a))
)


def _gelu_dx(a):
    cdf = 0.5 * (1.0 + torch.erf(a / math.sqrt(2.0)))
    return cdf + a * torch.exp(-0.5 * torch.square(a)) / math.sqrt(2.0 * math.pi)


def _silu_dx(a):
    s = torch.sigmoid(a)
    return s * (1.0 + a * (1.0 - s))


gelu_dx = AluOp("gelu_dx", "unary", unary=_gelu_dx)
silu_dx = AluOp("silu_dx", "unary", unary=_silu_dx)

# NumPy functions old kernels pass as operators, beyond those nki.language already maps.
_NUMPY = {
    np.amax: nl.max,
    np.amin: nl.min,
    np.prod: nl.prod,
    np.mean: nl.mean,
    np.var: nl.var,
    np.all: nl.all,
    np.floor: nl.floor,
    np.ceil: nl.ceil,
    np.trunc: trunc,
    np.tan: tan,
    np.arctan: nl.arctan,
    np.fmod: fmod,
    np.mod: mod,
    np.logical_and: nl.logical_and,
    np.logical_or: nl.logical_or,
    np.logical_xor: nl.logical_xor,
    np.logical_not: nl.logical_not,
    np.bitwise_and: nl.bitwise_and,
    np.bitwise_or: nl.bitwise_or,
    np.bitwise_xor: nl.bitwise_xor,
    np.invert: nl.invert,
    np.left_shift: nl.left_shift,
    np.right_shift: nl.right_shift,
}


class Operator:
    """An old ``nl`` tile function (``mask=``/``dtype=`` keywords) that also serves as an
    ``op=`` operator of the ISA calls, like ``nl.add`` or ``nl.max``."""

    def __init__(self, op, call):
        self.op = op
        self._call = call
        self.__name__ = op.name
        self.__doc__ = call.__doc__

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __repr__(self):
        return f"nl.{self.op.name}"


def resolve_op(op, where="op"):
    """The simulator operator for an old-API ``op=`` value (None stays None)."""
    if op is None:
        return None
    if isinstance(op, Operator):
        return op.op
    if isinstance(op, AluOp):
        return op
    return resolve_alu_op(_NUMPY.get(op, op), where)
