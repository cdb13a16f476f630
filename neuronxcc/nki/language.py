"""neuronxcc.nki.language: the pre-0.2 ``nl`` API, over the simulator's ``nki.language``.

Beyond ``nki.language`` it has ``nl.arange``/``nl.mgrid`` index expressions, ``mask=`` on
every tile operation, ``nl.par_dim`` (block dimensions in front of the partition dimension),
``nl.spmd_dim``/``nl.nc`` launch-grid annotations, NumPy data types, and a few functions the
new API dropped (``load_transpose2d``, ``atomic_rmw``, ``gather_flattened``, ``static_cast``).
"""

import math
import operator

import numpy as np
import torch

import nki.isa as new_isa
import nki.language as new
from nki._src.legacy_api import (
    fail,
    fill,
    issue,
    mark_written,
    normalize_dtype,
    promote_dtypes,
    require,
    to_sbuf,
)
from nki.language import NkiTensor, ds  # noqa: F401 - re-exported

from . import _ops
from ._blocks import BlockTensor
from ._dma import dma
from ._index import Access, arange, mgrid  # noqa: F401 - re-exported
from ._masking import execute
from ._ops import Operator
from .compiler import buffer_of

# ---- data types: NumPy types as in the old API (bfloat16/float8 through ml_dtypes) ---------
bool_ = np.bool_
int8, int16, int32 = np.int8, np.int16, np.int32
uint8, uint16, uint32 = np.uint8, np.uint16, np.uint32
float16, float32 = np.float16, np.float32
tfloat32 = new.tfloat32
try:
    import ml_dtypes

    bfloat16 = np.dtype(ml_dtypes.bfloat16)
    float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
    float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
except ImportError:  # NumPy cannot hold these without ml_dtypes; kernels still accept them.
    bfloat16, float8_e4m3, float8_e5m2 = new.bfloat16, new.float8_e4m3, new.float8_e5m2
float8_e4m3fn = new.float8_e4m3fn


class _Bounds:
    """``nl.fp32.min`` and the like: the extreme finite values of a float type."""

    def __init__(self, name, info):
        self._name = name
        self.min = float(info.min)
        self.max = float(info.max)

    def __repr__(self):
        return f"nl.{self._name}"


fp32 = _Bounds("fp32", np.finfo(np.float32))
bfp16 = _Bounds("bfp16", torch.finfo(torch.bfloat16))


def finfo(dtype):
    """Machine limits of a float type."""
    return torch.finfo(normalize_dtype(dtype, "finfo").torch)


def static_cast(input_data, dtype):
    """``input_data`` (a NumPy array, or a tile inside a kernel) converted to ``dtype``."""
    if isinstance(input_data, (NkiTensor, Access)):
        return copy(input_data, dtype=dtype)
    return np.asarray(input_data).astype(dtype)


# ---- memories, tile sizes, loops, SPMD ----------------------------------------------------
sbuf, psum, hbm = new.sbuf, new.psum, new.hbm
private_hbm, shared_hbm = new.private_hbm, new.shared_hbm
tile_size = new.tile_size
program_id, num_programs, program_ndim = new.program_id, new.num_programs, new.program_ndim
is_hbm, is_sbuf, is_psum, is_on_chip = new.is_hbm, new.is_sbuf, new.is_psum, new.is_on_chip
NKIObject = new.NKIObject
dynamic_range = new.dynamic_range


def affine_range(*args, **kwargs):
    """Loop without loop-carried dependencies (runs as ``range``; options are ignored)."""
    return new.affine_range(*args)


def sequential_range(*args, **kwargs):
    """Loop with loop-carried dependencies (runs as ``range``)."""
    return new.sequential_range(*args)


def static_range(*args, **kwargs):
    """Fully unrolled loop (runs as ``range``)."""
    return new.static_range(*args)


class par_dim(int):
    """Marks the partition dimension of an on-chip tensor shape; the dimensions in front of
    it are block dimensions (a tensor of (P, F) tiles)."""

    def __repr__(self):
        return f"nl.par_dim({int(self)})"


class spmd_dim:
    """A launch-grid dimension built from sub-dimensions (``nl.nc(2)`` places one on
    NeuronCores); the simulator launches its product of instances in order."""

    def __init__(self, *dims):
        self.dims = dims

    def __index__(self):
        return math.prod(operator.index(d) for d in self.dims)

    __int__ = __index__

    def __mul__(self, other):
        return spmd_dim(self, other)

    def __rmul__(self, other):
        return spmd_dim(other, self)

    def __repr__(self):
        return f"nl.spmd_dim({', '.join(map(repr, self.dims))})"


class nc(spmd_dim):
    """``nl.nc(n)``: a launch-grid dimension spread over ``n`` NeuronCores."""

    def __init__(self, count):
        super().__init__(operator.index(count))

    def __repr__(self):
        return f"nl.nc({self.dims[0]})"


# ---- creation ----------------------------------------------------------------------------
def ndarray(shape, dtype, *, buffer=None, name="", **kwargs):
    """A new uninitialized tensor; ``nl.par_dim`` marks the partition dim of on-chip ones."""
    buffer = new.sbuf if buffer is None else buffer_of(buffer)
    marked = [i for i, d in enumerate(shape) if isinstance(d, par_dim)]
    shape = tuple(operator.index(d) for d in shape)
    require(len(marked) <= 1, "ndarray", "a shape can mark only one nl.par_dim")
    if marked and marked[0] > 0 and getattr(buffer, "on_chip", False):
        return BlockTensor(shape, marked[0], dtype, buffer, name)
    return new.ndarray(shape, dtype, buffer=buffer, name=name)


def _fill(t, value):
    """Fill a new tensor: memset on chip (each tile of a block tensor), a host fill in HBM."""
    if isinstance(t, BlockTensor):
        for tile in t.tiles():
            new_isa.memset(dst=tile, value=value)
    elif t.buffer.on_chip:
        new_isa.memset(dst=t, value=value)
    else:
        fill(t, value)
        mark_written(t)
    return t


def full(shape, fill_value, dtype, *, buffer=None, name="", **kwargs):
    """A new tensor filled with ``fill_value``."""
    return _fill(ndarray(shape, dtype, buffer=buffer, name=name), fill_value)


def zeros(shape, dtype, *, buffer=None, name="", **kwargs):
    """A new tensor filled with zeros."""
    return full(shape, 0, dtype, buffer=buffer, name=name)


def ones(shape, dtype, *, buffer=None, name="", **kwargs):
    """A new tensor filled with ones."""
    return full(shape, 1, dtype, buffer=buffer, name=name)


def _like(a, dtype, buffer):
    return (a.dtype if dtype is None else dtype), (a.buffer if buffer is None else buffer)


def empty_like(a, dtype=None, *, buffer=None, name="", **kwargs):
    """A new uninitialized tensor shaped like ``a``."""
    dtype, buffer = _like(a, dtype, buffer)
    return ndarray(a.shape, dtype, buffer=buffer, name=name)


def zeros_like(a, dtype=None, *, buffer=None, name="", **kwargs):
    """A new zero-filled tensor shaped like ``a``."""
    dtype, buffer = _like(a, dtype, buffer)
    return zeros(a.shape, dtype, buffer=buffer, name=name)


def ones_like(a, dtype=None, *, buffer=None, name="", **kwargs):
    """A new one-filled tensor shaped like ``a``."""
    dtype, buffer = _like(a, dtype, buffer)
    return ones(a.shape, dtype, buffer=buffer, name=name)


def rand(shape, dtype=np.float32, *, buffer=None, name="", **kwargs):
    """A new tile of uniform random values in [0, 1)."""
    return new.rand(tuple(shape), dtype, buffer=buffer_of(buffer), name=name)


def random_seed(seed, *, mask=None, **kwargs):
    """Seed the random numbers of ``nl.rand`` and ``dropout`` (a scalar or 1-element tile)."""
    value = seed.host.reshape(-1)[0].item() if isinstance(seed, NkiTensor) else seed
    torch.manual_seed(int(value))


shared_constant = new.shared_constant
shared_identity_matrix = new.shared_identity_matrix


# ---- memory --------------------------------------------------------------------------------
def load(src, *, mask=None, dtype=None, **kwargs):
    """A new SBUF tile holding ``src`` (an HBM tensor, possibly indexed by tile values)."""
    dst = ndarray(src.shape, dtype or src.dtype, buffer=new.sbuf)
    execute(dma, "nl.load", mask=mask, writes=("dst",), lazy=("dst", "src"), dst=dst, src=src)
    return dst


def _store(dst, value):
    if isinstance(value, NkiTensor) and value.buffer is new.psum:
        value = to_sbuf(value)
    dma(dst, value)


def _store_scalar(dst, value):
    fill(dst, value)
    issue("nl.store", "dma", [dst], [], nbytes=dst.size * dst.itemsize, chunk=dst.itemsize)


def store(dst, value, *, mask=None, **kwargs):
    """Write a tile (or a scalar) to the HBM tensor ``dst``."""
    if not isinstance(value, (NkiTensor, Access)):
        execute(
            lambda dst: _store_scalar(dst, value), "nl.store", mask=mask, writes=("dst",), dst=dst
        )
        return
    execute(
        _store, "nl.store", mask=mask, writes=("dst",), lazy=("dst", "value"), dst=dst, value=value
    )


def load_transpose2d(src, *, mask=None, dtype=None, **kwargs):
    """A new SBUF tile holding the 2-D HBM tensor ``src`` transposed (by DMA)."""
    require(src.ndim == 2, "nl.load_transpose2d", f"src must be 2-D, is {src.ndim}-D")
    dst = ndarray((src.shape[1], src.shape[0]), src.dtype, buffer=new.sbuf)
    execute(
        new_isa.dma_transpose, "nl.load_transpose2d", mask=mask, writes=("dst",), dst=dst, src=src
    )
    if dtype is None or normalize_dtype(dtype) == dst.dtype:
        return dst
    return copy(dst, dtype=dtype)


def atomic_rmw(dst, value, op, *, mask=None, **kwargs):
    """``dst = op(dst, value)`` on an HBM tensor, element by element."""
    execute(
        lambda dst, value: dma(
            dst, to_sbuf(value) if value.buffer is psum else value, dst_rmw_op=op
        ),
        "nl.atomic_rmw",
        mask=mask,
        writes=("dst",),
        lazy=("dst",),
        dst=dst,
        value=value,
    )


def _gather_flattened(dst, data, indices):
    where = "nl.gather_flattened"
    require(
        data.shape[0] == indices.shape[0],
        where,
        f"data and indices need the same partitions ({data.shape[0]} vs {indices.shape[0]})",
    )
    source = data.host.reshape(data.shape[0], -1)
    picks = indices.host.to(torch.int64).reshape(indices.shape[0], -1)
    require(
        bool(((picks >= 0) & (picks < source.shape[1])).all()),
        where,
        f"an index is outside the {source.shape[1]} elements of a partition",
    )
    dst.host.copy_(torch.gather(source, 1, picks).reshape(dst.shape))
    issue(where, "gpsimd", [dst], [data, indices])


def gather_flattened(data, indices, *, mask=None, dtype=None, **kwargs):
    """Per partition, the elements of ``data`` (free dims flattened) at ``indices``."""
    dst = ndarray(indices.shape, dtype or data.dtype, buffer=new.sbuf)
    execute(
        _gather_flattened,
        "nl.gather_flattened",
        mask=mask,
        writes=("dst",),
        dst=dst,
        data=data,
        indices=indices,
    )
    return dst


# ---- tile math ---------------------------------------------------------------------------
def _tile_math(op, arity, default_dtype=None):
    """The old ``nl`` function for ``op``: a new SBUF tile, broadcasting, ``mask=``."""
    names = ("x", "y")[:arity]

    def call(*operands, dtype=None, mask=None, **kwargs):
        operands = operands + tuple(kwargs.pop(n) for n in names[len(operands) :] if n in kwargs)
        require(
            len(operands) == arity, f"nl.{op.name}", f"takes {arity} operands, got {len(operands)}"
        )
        tiles = [v for v in operands if isinstance(v, (NkiTensor, Access, BlockTensor))]
        require(tiles, f"nl.{op.name}", "needs at least one tile operand")
        shape = np.broadcast_shapes(*(t.shape for t in tiles))
        out_dtype = dtype or default_dtype or promote_dtypes(*(t.dtype for t in tiles))
        dst = ndarray(shape, out_dtype, buffer=new.sbuf)
        bound = dict(zip(names, operands))
        execute(
            lambda dst, **ops: op(*(ops[n] for n in names), dst=dst),
            f"nl.{op.name}",
            mask=mask,
            writes=("dst",),
            dst=dst,
            **bound,
        )
        return dst

    call.__doc__ = f"``{op.name}`` elementwise into a new SBUF tile (old API, ``mask=``)."
    return Operator(op, call)


def _reduction(op, default_dtype=None):
    """The old ``nl`` reduction for ``op`` over free axes, with ``mask=`` and ``keepdims``."""

    def call(x, axis, *, dtype=None, mask=None, keepdims=False, **kwargs):
        axes = {operator.index(a) % x.ndim for a in ((axis,) if isinstance(axis, int) else axis)}
        if keepdims:
            shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
        else:
            shape = tuple(s for d, s in enumerate(x.shape) if d not in axes)
        if len(shape) < 2:
            shape = (x.shape[0], 1)
        dst = ndarray(shape, dtype or default_dtype or x.dtype, buffer=new.sbuf)
        execute(
            lambda dst, x: op(x, tuple(sorted(axes)), keepdims=keepdims, dst=dst),
            f"nl.{op.name}",
            mask=mask,
            writes=("dst",),
            dst=dst,
            x=x,
        )
        return dst

    call.__doc__ = f"``{op.name}`` over free axes into a new SBUF tile (old API, ``mask=``)."
    return Operator(op, call)


add = _tile_math(new.add, 2)
subtract = _tile_math(new.subtract, 2)
multiply = _tile_math(new.multiply, 2)
divide = _tile_math(new.divide, 2)
maximum = _tile_math(new.maximum, 2)
minimum = _tile_math(new.minimum, 2)
power = _tile_math(new.power, 2)
fmod = _tile_math(_ops.fmod, 2)
mod = _tile_math(_ops.mod, 2)
bitwise_and = _tile_math(new.bitwise_and, 2)
bitwise_or = _tile_math(new.bitwise_or, 2)
bitwise_xor = _tile_math(new.bitwise_xor, 2)
left_shift = _tile_math(new.left_shift, 2)
right_shift = _tile_math(new.right_shift, 2)
equal = _tile_math(new.equal, 2, new.bool_)
not_equal = _tile_math(new.not_equal, 2, new.bool_)
greater = _tile_math(new.greater, 2, new.bool_)
greater_equal = _tile_math(new.greater_equal, 2, new.bool_)
less = _tile_math(new.less, 2, new.bool_)
less_equal = _tile_math(new.less_equal, 2, new.bool_)
logical_and = _tile_math(new.logical_and, 2, new.bool_)
logical_or = _tile_math(new.logical_or, 2, new.bool_)
logical_xor = _tile_math(new.logical_xor, 2, new.bool_)
logical_not = _tile_math(new.logical_not, 1, new.bool_)
invert = _tile_math(new.invert, 1)
abs = _tile_math(new.abs, 1)  # noqa: A001 - NKI name
arctan = _tile_math(new.arctan, 1)
ceil = _tile_math(new.ceil, 1)
copy = _tile_math(new.copy, 1)
cos = _tile_math(new.cos, 1)
erf = _tile_math(new.erf, 1)
erf_dx = _tile_math(_ops.erf_dx, 1)
exp = _tile_math(new.exp, 1)
floor = _tile_math(new.floor, 1)
gelu = _tile_math(new.gelu, 1)
gelu_dx = _tile_math(_ops.gelu_dx, 1)
gelu_apprx_sigmoid = _tile_math(new.gelu_apprx_sigmoid, 1)
gelu_apprx_tanh = _tile_math(new.gelu_apprx_tanh, 1)
log = _tile_math(new.log, 1)
mish = _tile_math(new.mish, 1)
negative = _tile_math(new.negative, 1)
reciprocal = _tile_math(new.reciprocal, 1)
relu = _tile_math(new.relu, 1)
rsqrt = _tile_math(new.rsqrt, 1)
sigmoid = _tile_math(new.sigmoid, 1)
sign = _tile_math(new.sign, 1)
silu = _tile_math(new.silu, 1)
silu_dx = _tile_math(_ops.silu_dx, 1)
sin = _tile_math(new.sin, 1)
softplus = _tile_math(new.softplus, 1)
sqrt = _tile_math(new.sqrt, 1)
square = _tile_math(new.square, 1)
tan = _tile_math(_ops.tan, 1)
tanh = _tile_math(new.tanh, 1)
trunc = _tile_math(_ops.trunc, 1)
sum = _reduction(new.sum)  # noqa: A001 - NKI name
prod = _reduction(new.prod)
max = _reduction(new.max)  # noqa: A001 - NKI name
min = _reduction(new.min)  # noqa: A001 - NKI name
mean = _reduction(new.mean)
var = _reduction(new.var)
all = _reduction(new.all, new.bool_)  # noqa: A001 - NKI name


def _unmasked(where, mask):
    require(mask is None, where, "mask= is not supported on this function by the simulator")


def where(condition, x, y, *, dtype=None, mask=None, **kwargs):
    """``x`` where ``condition`` is non-zero, else ``y``."""
    _unmasked("nl.where", mask)
    return new.where(condition, x, y, dtype=dtype)


def matmul(x, y, *, transpose_x=False, mask=None, **kwargs):
    """``x @ y`` into a new fp32 PSUM tile (``transpose_x``: x given as [K, M])."""
    _unmasked("nl.matmul", mask)
    return new.matmul(x, y, transpose_x=transpose_x)


def transpose(x, *, dtype=None, mask=None, **kwargs):
    """``x`` with partition and free axes swapped, on the Tensor engine."""
    _unmasked("nl.transpose", mask)
    return new.transpose(x, dtype=dtype)


def softmax(x, axis, *, dtype=None, compute_dtype=None, mask=None, **kwargs):
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``."""
    _unmasked("nl.softmax", mask)
    return new.softmax(x, axis=axis, dtype=dtype)


def rms_norm(x, w, axis, n, epsilon=1e-06, *, dtype=None, compute_dtype=None, mask=None, **kw):
    """``x / sqrt(mean(x^2) + epsilon) * w``."""
    _unmasked("nl.rms_norm", mask)
    return new.rms_norm(x, w, axis=axis, n=n, epsilon=epsilon, dtype=dtype)


def broadcast_to(src, *, shape, **kwargs):
    """A new SBUF tile holding ``src`` broadcast to ``shape``."""
    return new.broadcast_to(src, tuple(shape))


expand_dims = new.expand_dims


def dropout(x, rate, *, dtype=None, mask=None, **kwargs):
    """``x`` with each element zeroed with probability ``rate``."""
    dst = ndarray(x.shape, dtype or x.dtype, buffer=new.sbuf)
    execute(new_isa.dropout, "nl.dropout", mask=mask, writes=("dst",), dst=dst, data=x, prob=rate)
    return dst


def device_print(prefix, x, *, mask=None, **kwargs):
    """Print ``prefix`` and the values of ``x``."""
    _unmasked("nl.device_print", mask)
    new.device_print(prefix, x)


def loop_reduce(x, op, loop_indices, *, dtype=None, mask=None, **kwargs):
    """Not supported: the simulator runs loops eagerly; accumulate with ``+=`` instead."""
    fail("nl.loop_reduce", "is not supported by the simulator; accumulate with += in the loop")


def all_reduce(x, op, program_axes, *, dtype=None, mask=None, **kwargs):
    """Not supported: collectives across SPMD programs are not simulated by this layer."""
    fail("nl.all_reduce", "collectives across SPMD programs are not supported by the simulator")
