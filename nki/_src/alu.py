"""Operators: one table drives ``op=`` arguments of nki.isa and the nki.language tile functions."""

import numpy as np
import torch
import torch.nn.functional as F

from .errors import fail

_IMPLS = {}


class Op:
    """An ALU/activation operator, callable as an ``nl`` tile function of kind ``call``."""

    __slots__ = ("name", "call", "binary", "unary", "reduce", "bitvec", "engine")

    def __init__(
        self, name, call, *, binary=None, unary=None, reduce=None, bitvec=False, engine=None
    ):
        self.name = name
        self.call = call  # binary | compare | unary | reduce
        self.binary = binary  # f(a, b) on fp32 (or int64 for bitvec) host tensors
        self.unary = unary  # f(a)
        self.reduce = reduce  # f(a, dims, keepdim)
        self.bitvec = bitvec
        self.engine = engine or ("scalar" if call == "unary" else "vector")

    def __call__(self, *args, **kwargs):
        return _IMPLS[self.call](self, *args, **kwargs)

    def __repr__(self):
        return f"nl.{self.name}"


def implement(kind):
    """Register the generic ``nl`` implementation for operators of ``kind``."""

    def deco(fn):
        _IMPLS[kind] = fn
        return fn

    return deco


def _reducer(last):
    """Build ``reduce(x, dims, keepdim)`` from a reduction over the last dim."""

    def reduce(x, dims, keepdim=False):
        dims = sorted(d % x.dim() for d in dims)
        rest = [d for d in range(x.dim()) if d not in dims]
        moved = x.permute(rest + dims).reshape(*[x.shape[d] for d in rest], -1)
        y = last(moved)
        if keepdim:
            for d in dims:
                y = y.unsqueeze(d)
        return y

    return reduce


def _flag(fn):
    """Turn a boolean-valued binary function into a 0/1 fp32 one."""
    return lambda a, b: fn(a, b).to(torch.float32)


_sum = _reducer(lambda t: t.sum(-1))
_prod = _reducer(lambda t: t.prod(-1))
_amax = _reducer(lambda t: t.amax(-1))
_amin = _reducer(lambda t: t.amin(-1))

# Binary arithmetic (Vector engine; nl.power runs on GpSimd).
add = Op("add", "binary", binary=torch.add, reduce=_sum)
subtract = Op("subtract", "binary", binary=torch.sub)
multiply = Op("multiply", "binary", binary=torch.mul, reduce=_prod)
divide = Op("divide", "binary", binary=torch.div)
maximum = Op("maximum", "binary", binary=torch.maximum, reduce=_amax)
minimum = Op("minimum", "binary", binary=torch.minimum, reduce=_amin)
power = Op("power", "binary", binary=torch.pow, engine="gpsimd")
fmod = Op("fmod", "binary", binary=torch.fmod)
mod = Op("mod", "binary", binary=torch.remainder)
# By magnitude, keeping the sign of the winner; ties go to y.
abs_max = Op("abs_max", "binary", binary=lambda a, b: torch.where(a.abs() > b.abs(), a, b))
abs_min = Op("abs_min", "binary", binary=lambda a, b: torch.where(a.abs() < b.abs(), a, b))
# Comparisons and logic produce 0/1.
equal = Op("equal", "compare", binary=_flag(torch.eq))
not_equal = Op("not_equal", "compare", binary=_flag(torch.ne))
greater = Op("greater", "compare", binary=_flag(torch.gt))
greater_equal = Op("greater_equal", "compare", binary=_flag(torch.ge))
less = Op("less", "compare", binary=_flag(torch.lt))
less_equal = Op("less_equal", "compare", binary=_flag(torch.le))
logical_and = Op("logical_and", "compare", binary=_flag(lambda a, b: (a != 0) & (b != 0)))
logical_or = Op("logical_or", "compare", binary=_flag(lambda a, b: (a != 0) | (b != 0)))
logical_xor = Op("logical_xor", "compare", binary=_flag(lambda a, b: (a != 0) ^ (b != 0)))
# Bit-vector operators work on the raw integers.
bitwise_and = Op("bitwise_and", "binary", binary=torch.bitwise_and, bitvec=True)
bitwise_or = Op("bitwise_or", "binary", binary=torch.bitwise_or, bitvec=True)
bitwise_xor = Op("bitwise_xor", "binary", binary=torch.bitwise_xor, bitvec=True)
left_shift = Op("left_shift", "binary", binary=torch.bitwise_left_shift, bitvec=True)
right_shift = Op("right_shift", "binary", binary=torch.bitwise_right_shift, bitvec=True)
invert = Op("invert", "unary", unary=torch.bitwise_not, bitvec=True, engine="vector")

# Activation functions (Scalar engine).
exp = Op("exp", "unary", unary=torch.exp)
log = Op("log", "unary", unary=torch.log)
sqrt = Op("sqrt", "unary", unary=torch.sqrt)
rsqrt = Op("rsqrt", "unary", unary=torch.rsqrt)
tanh = Op("tanh", "unary", unary=torch.tanh)
sigmoid = Op("sigmoid", "unary", unary=torch.sigmoid)
relu = Op("relu", "unary", unary=torch.relu)
gelu = Op("gelu", "unary", unary=F.gelu)
gelu_apprx_tanh = Op("gelu_apprx_tanh", "unary", unary=lambda a: F.gelu(a, approximate="tanh"))
gelu_apprx_sigmoid = Op("gelu_apprx_sigmoid", "unary", unary=lambda a: a * torch.sigmoid(1.702 * a))
silu = Op("silu", "unary", unary=F.silu)
softplus = Op("softplus", "unary", unary=F.softplus)
mish = Op("mish", "unary", unary=F.mish)
erf = Op("erf", "unary", unary=torch.erf)
sin = Op("sin", "unary", unary=torch.sin)
cos = Op("cos", "unary", unary=torch.cos)
arctan = Op("arctan", "unary", unary=torch.atan)
abs = Op("abs", "unary", unary=torch.abs)  # noqa: A001 - NKI name
square = Op("square", "unary", unary=torch.square)
reciprocal = Op("reciprocal", "unary", unary=torch.reciprocal, engine="vector")
negative = Op("negative", "unary", unary=torch.neg)
sign = Op("sign", "unary", unary=torch.sign)
floor = Op("floor", "unary", unary=torch.floor)
ceil = Op("ceil", "unary", unary=torch.ceil)
logical_not = Op("logical_not", "unary", unary=lambda a: (a == 0).to(torch.float32))
copy = Op("copy", "unary", unary=lambda a: a, engine="vector")
tan = Op("tan", "unary", unary=torch.tan)
trunc = Op("trunc", "unary", unary=torch.trunc)


def _gelu_dx(a):
    return 0.5 * (1 + torch.erf(a / 2**0.5)) + a * torch.exp(-0.5 * a * a) / (2 * torch.pi) ** 0.5


def _silu_dx(a):
    s = torch.sigmoid(a)
    return s * (1 + a * (1 - s))


def _gelu_apprx_sigmoid_dx(a):
    s = torch.sigmoid(1.702 * a)
    return s + 1.702 * a * s * (1 - s)


# Derivatives used by backward kernels.
gelu_dx = Op("gelu_dx", "unary", unary=_gelu_dx)
silu_dx = Op("silu_dx", "unary", unary=_silu_dx)
gelu_apprx_sigmoid_dx = Op("gelu_apprx_sigmoid_dx", "unary", unary=_gelu_apprx_sigmoid_dx)
erf_dx = Op("erf_dx", "unary", unary=lambda a: 2 / torch.pi**0.5 * torch.exp(-a * a))

# ``t[...] = v`` on a tensor view: the tensor module sits below nki.language, which implements
# it (memset, DMA or an on-chip copy), so it is dispatched through this table too.
assign = Op("assign", "assign")

# Reductions over free axes (Vector engine); nl.max/nl.min also serve as ALU ops.
sum = Op("sum", "reduce", binary=torch.add, reduce=_sum)  # noqa: A001 - NKI name
prod = Op("prod", "reduce", binary=torch.mul, reduce=_prod)
max = Op("max", "reduce", binary=torch.maximum, reduce=_amax)  # noqa: A001 - NKI name
min = Op("min", "reduce", binary=torch.minimum, reduce=_amin)  # noqa: A001 - NKI name
mean = Op("mean", "reduce", reduce=_reducer(lambda t: t.mean(-1)))
var = Op("var", "reduce", reduce=_reducer(lambda t: t.var(-1, unbiased=False)))
all = Op(  # noqa: A001 - NKI name
    "all",
    "reduce",
    reduce=_reducer(lambda t: (t != 0).all(-1).to(torch.float32)),
)

# Legacy kernels pass numpy functions as operators.
_NUMPY = {
    np.add: add,
    np.subtract: subtract,
    np.multiply: multiply,
    np.divide: divide,
    np.maximum: maximum,
    np.minimum: minimum,
    np.power: power,
    np.exp: exp,
    np.log: log,
    np.sqrt: sqrt,
    np.tanh: tanh,
    np.abs: abs,
    np.square: square,
    np.negative: negative,
    np.sign: sign,
    np.sin: sin,
    np.cos: cos,
    np.reciprocal: reciprocal,
    np.max: max,
    np.min: min,
    np.sum: sum,
    np.equal: equal,
    np.greater: greater,
    np.less: less,
    np.greater_equal: greater_equal,
    np.less_equal: less_equal,
    np.not_equal: not_equal,
}


def resolve(op, where, need=None):
    """The Op for an ``op=`` argument; it must provide ``need`` (binary/unary/reduce) if given."""
    found = op if isinstance(op, Op) else _NUMPY.get(op)
    if found is None:
        fail(where, f"op must be an nki.language operator, got {op!r}")
    if need is not None and getattr(found, need) is None:
        fail(where, f"{found!r} is not a {need} operator")
    return found
