"""NKI data types, represented by the torch dtypes that store them on the host."""

import numpy as np
import torch

from .errors import fail

bool_ = torch.bool
int8 = torch.int8
int16 = torch.int16
int32 = torch.int32
uint8 = torch.uint8
uint16 = torch.uint16
uint32 = torch.uint32
float16 = torch.float16
bfloat16 = torch.bfloat16
float32 = torch.float32
# tfloat32 has no host type; it is stored and computed as float32.
tfloat32 = torch.float32
# Legacy float8_e4m3 has no torch type; the OCP e4m3fn encoding stands in for it.
float8_e4m3 = torch.float8_e4m3fn
float8_e4m3fn = torch.float8_e4m3fn
float8_e5m2 = torch.float8_e5m2
float8_e8m0fnu = torch.float8_e8m0fnu

SUPPORTED = (
    bool_,
    int8,
    int16,
    int32,
    uint8,
    uint16,
    uint32,
    float16,
    bfloat16,
    float32,
    float8_e4m3fn,
    float8_e5m2,
    float8_e8m0fnu,
)
# HBM tensors handed in from the host may also use these wider types.
HOST_ONLY = (torch.float64, torch.int64)

_BY_NAME = {str(dt).removeprefix("torch."): dt for dt in SUPPORTED + HOST_ONLY}
_BY_NAME.update({"bool_": bool_, "tfloat32": tfloat32, "float8_e4m3": float8_e4m3})


def normalize(dtype, op="dtype"):
    """Map an NKI, torch, numpy or string dtype to the torch dtype that stores it."""
    if isinstance(dtype, torch.dtype):
        result = dtype
    elif dtype is float:
        result = float32
    elif dtype is int:
        result = int32
    elif dtype is bool:
        result = bool_
    else:
        name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
        result = _BY_NAME.get(name)
        if result is None:
            fail(op, f"unsupported dtype {dtype!r}")
    if result not in SUPPORTED and result not in HOST_ONLY:
        fail(op, f"unsupported dtype {result}")
    return result


def require_on_chip_dtype(dtype, op):
    """Reject host-only dtypes (float64/int64) for on-chip tensors."""
    if dtype in HOST_ONLY:
        fail(op, f"dtype {dtype} is not supported on chip")


def is_float(dtype):
    """True for floating point dtypes."""
    return dtype.is_floating_point


def promote(*dtypes):
    """The result dtype of an elementwise op: the highest-precision input dtype."""
    result = dtypes[0]
    for dt in dtypes[1:]:
        result = torch.promote_types(result, dt)
    return result


def sentinel(dtype):
    """The fill value for fresh allocations: NaN for floats, 4 for integers (as AWS's simulator)."""
    if dtype == bool_:
        return True
    return float("nan") if dtype.is_floating_point else 4


def name(dtype):
    """Short printable name of a dtype."""
    return str(dtype).removeprefix("torch.")
