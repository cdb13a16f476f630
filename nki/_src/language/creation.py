"""Creating tensors: uninitialized, constant-filled, random and shared constants."""

import numpy as np
import torch

from .. import buffers, dtypes
from ..isa.elementwise import memset
from ..tensor import NkiTensor
from ..trace import issue, mark_written


def ndarray(shape, dtype, buffer=None, name="", **kwargs):
    """A new uninitialized tensor (filled with NaN / 4 so stray reads show up)."""
    return NkiTensor.allocate(shape, dtype, buffers.sbuf if buffer is None else buffer, name)


def full(shape, fill_value, dtype, buffer=None, name=""):
    """A new tensor filled with ``fill_value``."""
    t = ndarray(shape, dtype, buffer, name)
    if t.buffer.on_chip:
        memset(dst=t, value=fill_value)
    else:
        t.host.fill_(fill_value)
        mark_written(t)
    return t


def zeros(shape, dtype, buffer=None, name=""):
    """A new tensor filled with zeros."""
    return full(shape, 0, dtype, buffer, name)


def ones(shape, dtype, buffer=None, name=""):
    """A new tensor filled with ones."""
    return full(shape, 1, dtype, buffer, name)


def _like(a, dtype, buffer):
    """dtype and buffer of a ``*_like`` result: the given ones, else those of ``a``."""
    return (a.dtype if dtype is None else dtype), (a.buffer if buffer is None else buffer)


def empty_like(a, dtype=None, buffer=None, name=""):
    """A new uninitialized tensor shaped like ``a``."""
    return ndarray(a.shape, *_like(a, dtype, buffer), name)


def zeros_like(a, dtype=None, buffer=None, name=""):
    """A new zero-filled tensor shaped like ``a``."""
    return zeros(a.shape, *_like(a, dtype, buffer), name)


def ones_like(a, dtype=None, buffer=None, name=""):
    """A new one-filled tensor shaped like ``a``."""
    return ones(a.shape, *_like(a, dtype, buffer), name)


def rand(shape, dtype=dtypes.float32, buffer=None, name=""):
    """A new tensor of uniform random values in [0, 1)."""
    t = ndarray(shape, dtype, buffer, name)
    t.host.copy_(torch.rand(t.shape))
    issue("nl.rand", "vector", [t], [], free=t.free_size)
    return t


def shared_constant(constant, dtype=None):
    """An HBM tensor holding compile-time constant data."""
    data = torch.as_tensor(np.asarray(constant))
    shape = tuple(data.shape) or (1,)
    t = ndarray(shape, data.dtype if dtype is None else dtype, buffers.private_hbm, name="constant")
    t.host.copy_(data.reshape(t.shape))
    mark_written(t)
    return t


def shared_identity_matrix(n, dtype=dtypes.uint8):
    """An HBM ``n x n`` identity matrix constant."""
    return shared_constant(torch.eye(n), dtype)
