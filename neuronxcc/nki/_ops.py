"""Operators of the pre-0.2 API: the ``op=`` arguments (NumPy functions or ``nl`` functions)
and the elementwise functions the old ``nl`` had beyond ``nki.language``."""

import math

import numpy as np
import torch

from nki._src import alu

tan = alu.Op("tan", "unary", unary=torch.tan)
trunc = alu.Op("trunc", "unary", unary=torch.trunc)
fmod = alu.Op("fmod", "binary", binary=torch.fmod)
mod = alu.Op("mod", "binary", binary=torch.remainder)
erf_dx = alu.Op(
    "erf_dx", "unary", unary=lambda a: 2.0 / math.sqrt(math.pi) * torch.exp(-torch.square(a))
)


def _gelu_dx(a):
    cdf = 0.5 * (1.0 + torch.erf(a / math.sqrt(2.0)))
    return cdf + a * torch.exp(-0.5 * torch.square(a)) / math.sqrt(2.0 * math.pi)


def _silu_dx(a):
    s = torch.sigmoid(a)
    return s * (1.0 + a * (1.0 - s))


gelu_dx = alu.Op("gelu_dx", "unary", unary=_gelu_dx)
silu_dx = alu.Op("silu_dx", "unary", unary=_silu_dx)

# NumPy functions old kernels pass as operators, beyond those nki.language already maps.
_NUMPY = {
    np.amax: alu.max,
    np.amin: alu.min,
    np.prod: alu.prod,
    np.mean: alu.mean,
    np.var: alu.var,
    np.all: alu.all,
    np.floor: alu.floor,
    np.ceil: alu.ceil,
    np.trunc: trunc,
    np.tan: tan,
    np.arctan: alu.arctan,
    np.fmod: fmod,
    np.mod: mod,
    np.logical_and: alu.logical_and,
    np.logical_or: alu.logical_or,
    np.logical_xor: alu.logical_xor,
    np.logical_not: alu.logical_not,
    np.bitwise_and: alu.bitwise_and,
    np.bitwise_or: alu.bitwise_or,
    np.bitwise_xor: alu.bitwise_xor,
    np.invert: alu.invert,
    np.left_shift: alu.left_shift,
    np.right_shift: alu.right_shift,
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
    if isinstance(op, alu.Op):
        return op
    return alu.resolve(_NUMPY.get(op, op), where)
