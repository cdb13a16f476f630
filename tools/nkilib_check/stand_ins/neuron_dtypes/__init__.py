"""Stand-in for AWS's internal ``neuron_dtypes`` (not on any package index), with what
nki-library's tests use: numpy types for the NKI dtypes (ml_dtypes' for bf16/fp8, nki's for the
x4 packed types), ``static_cast``, ``finfo``, ``sizeinbytes`` and ``is_float_type``.

``static_cast`` packs float values into x4 words ([..., 4n] -> [..., n]), unpacks x4 words
([..., n] -> [..., 4n]), and otherwise converts as numpy does (bf16/fp8 round to nearest even).
"""

import ml_dtypes
import numpy as np
import torch

import nki.dtype as _nki_dtype
from nki._src import dtypes as _dtypes
from nki._src import interop as _interop

bfloat16 = ml_dtypes.bfloat16
float8_e4m3 = ml_dtypes.float8_e4m3
float8_e4m3fn = ml_dtypes.float8_e4m3fn
float8_e5m2 = ml_dtypes.float8_e5m2
float8_e8m0fnu = ml_dtypes.float8_e8m0fnu
float8_e4m3fn_x4 = _nki_dtype.float8_e4m3fn_x4.dtype
float8_e5m2_x4 = _nki_dtype.float8_e5m2_x4.dtype
float4_e2m1fn_x4 = _nki_dtype.float4_e2m1fn_x4.dtype


def _packed(dtype):
    """The nki x4 type of a numpy/NKI dtype, or None."""
    found = _dtypes.from_numpy(dtype)
    return found if found is not None and found.packed else None


def _words(array, x4):
    """The x4 words of ``array`` as an int64 tensor."""
    raw = np.uint32 if x4.itemsize == 4 else np.uint16
    return torch.from_numpy(np.ascontiguousarray(array).view(raw).astype(np.int64))


def static_cast(array, dtype):
    """``array`` converted to ``dtype`` (see the module docstring for the x4 types)."""
    array = np.asarray(array)
    source, target = _packed(array.dtype), _packed(dtype)
    if source is not None:
        values = _dtypes.unpack(_words(array, source), source).numpy()
    else:
        values = array
    if target is None:
        return values.astype(np.dtype(dtype))
    if values.shape[-1] % 4:
        raise ValueError(f"packing into {target} needs a last dim divisible by 4: {values.shape}")
    as_float = torch.from_numpy(np.ascontiguousarray(values.astype(np.float32)))
    return _interop.to_numpy(_dtypes.pack(as_float, target), target)


def finfo(dtype):
    """``ml_dtypes.finfo`` (numpy's for the IEEE types)."""
    return ml_dtypes.finfo(np.dtype(dtype))


def sizeinbytes(dtype):
    """Bytes per element of ``dtype``."""
    return np.dtype(dtype).itemsize


def is_float_type(dtype):
    """True for floating point types, the ml_dtypes extension types and x4 types included."""
    if _packed(dtype) is not None:
        return True
    try:
        ml_dtypes.finfo(np.dtype(dtype))
    except (TypeError, ValueError):
        return False
    return True
