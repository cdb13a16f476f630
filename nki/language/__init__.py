"""nki.language: tensors, memory spaces, dtypes, loops and tile-level math."""

from .._src.alu import (
    abs,
    abs_max,
    abs_min,
    add,
    all,
    arctan,
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    ceil,
    copy,
    cos,
    divide,
    equal,
    erf,
    erf_dx,
    exp,
    floor,
    fmod,
    gelu,
    gelu_apprx_sigmoid,
    gelu_apprx_sigmoid_dx,
    gelu_apprx_tanh,
    gelu_dx,
    greater,
    greater_equal,
    invert,
    left_shift,
    less,
    less_equal,
    log,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    max,
    maximum,
    mean,
    min,
    minimum,
    mish,
    mod,
    multiply,
    negative,
    not_equal,
    power,
    prod,
    reciprocal,
    relu,
    right_shift,
    rsqrt,
    sigmoid,
    sign,
    silu,
    silu_dx,
    sin,
    softplus,
    sqrt,
    square,
    subtract,
    sum,
    tan,
    tanh,
    trunc,
    var,
)
from .._src.buffers import (
    hbm,
    is_hbm,
    is_on_chip,
    is_psum,
    is_sbuf,
    private_hbm,
    psum,
    sbuf,
    shared_hbm,
)
from .._src.dtypes import (
    bfloat16,
    bool_,
    float4_e2m1fn_x4,
    float8_e4m3,
    float8_e4m3fn,
    float8_e4m3fn_x4,
    float8_e5m2,
    float8_e5m2_x4,
    float8_e8m0fnu,
    float16,
    float32,
    int8,
    int16,
    int32,
    tfloat32,
    uint8,
    uint16,
    uint32,
)
from .._src.language.creation import (
    empty_like,
    full,
    ndarray,
    ones,
    ones_like,
    rand,
    shared_constant,
    shared_identity_matrix,
    zeros,
    zeros_like,
)
from .._src.language.fused import rms_norm, softmax
from .._src.language.linalg import matmul, transpose
from .._src.language.math import where
from .._src.language.memory import load, store
from .._src.language.ranges import (
    affine_range,
    dynamic_range,
    fori_loop,
    sequential_range,
    static_range,
)
from .._src.language.ranges import plain_range as range
from .._src.language.spmd import num_programs, program_id, program_ndim
from .._src.language.tile_size import tile_size
from .._src.language.views import broadcast_to, expand_dims
from .._src.objects import NKIObject
from .._src.tensor import NkiTensor, ds


def device_print(print_prefix: str, tensor: NkiTensor) -> None:
    """Print ``print_prefix`` followed by the values of ``tensor``."""
    print(print_prefix, tensor.host)
