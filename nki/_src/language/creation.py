"""Creating tensors: uninitialized, constant-filled, random and shared constants."""

import os

import numpy as np
import torch
from numpy.typing import ArrayLike

from .. import buffers, checks, dtypes
from ..argtypes import DTypeLike, Shape
from ..buffers import Buffer
from ..errors import fail
from ..isa.elementwise import memset
from ..tensor import NkiTensor
from ..tiles import fill
from ..trace import issue, mark_written


def ndarray(
    shape: int | Shape,
    dtype: DTypeLike,
    buffer: Buffer | None = None,
    name: str = "",
    address: tuple[int, int] | None = None,
) -> NkiTensor:
    """A new uninitialized tensor (filled with NaN / 4 so stray reads show up); ``address``
    ``(partition, byte)`` places an SBUF/PSUM tile in the physical memory instead."""
    buffer = buffers.sbuf if buffer is None else buffer
    return NkiTensor.allocate(shape, dtype, buffer, name, address=address)


def full(
    shape: int | Shape,
    fill_value: float,
    dtype: DTypeLike,
    buffer: Buffer | None = None,
    name: str = "",
) -> NkiTensor:
    """A new tensor filled with ``fill_value``."""
    t = ndarray(shape, dtype, buffer, name)
    if t.buffer.on_chip:
        memset(dst=t, value=fill_value)
    else:
        fill(t, fill_value)
        mark_written(t)
    return t


def zeros(
    shape: int | Shape, dtype: DTypeLike, buffer: Buffer | None = None, name: str = ""
) -> NkiTensor:
    """A new tensor filled with zeros."""
    return full(shape, 0, dtype, buffer, name)


def ones(
    shape: int | Shape, dtype: DTypeLike, buffer: Buffer | None = None, name: str = ""
) -> NkiTensor:
    """A new tensor filled with ones."""
    return full(shape, 1, dtype, buffer, name)


def _like(a: NkiTensor, dtype: DTypeLike | None, buffer: Buffer | None) -> tuple[DTypeLike, Buffer]:
    """dtype and buffer of a ``*_like`` result: the given ones, else those of ``a``."""
    return (a.dtype if dtype is None else dtype), (a.buffer if buffer is None else buffer)


def empty_like(
    a: NkiTensor, dtype: DTypeLike | None = None, buffer: Buffer | None = None, name: str = ""
) -> NkiTensor:
    """A new uninitialized tensor shaped like ``a``."""
    return ndarray(a.shape, *_like(a, dtype, buffer), name)


def zeros_like(
    a: NkiTensor, dtype: DTypeLike | None = None, buffer: Buffer | None = None, name: str = ""
) -> NkiTensor:
    """A new zero-filled tensor shaped like ``a``."""
    return zeros(a.shape, *_like(a, dtype, buffer), name)


def ones_like(
    a: NkiTensor, dtype: DTypeLike | None = None, buffer: Buffer | None = None, name: str = ""
) -> NkiTensor:
    """A new one-filled tensor shaped like ``a``."""
    return ones(a.shape, *_like(a, dtype, buffer), name)


def rand(
    shape: int | Shape,
    dtype: DTypeLike = dtypes.float32,
    buffer: Buffer | None = None,
    name: str = "",
) -> NkiTensor:
    """A new tensor of uniform random values in [0, 1)."""
    t = ndarray(shape, dtype, buffer, name)
    t.host.copy_(torch.rand(t.shape))
    issue("nl.rand", "vector", [t], [], free=t.free_size)
    return t


def shared_constant(
    constant: ArrayLike | str | os.PathLike[str], dtype: DTypeLike | None = None
) -> NkiTensor:
    """A shared-HBM tensor holding compile-time constant data (an array or a ``.npy`` path)."""
    from .. import interop

    if isinstance(constant, (str, os.PathLike)):
        constant = np.load(constant)
    array = np.ascontiguousarray(np.asarray(constant))
    data = interop.to_host(array)
    shape = tuple(data.shape) or (1,)
    t = ndarray(shape, interop.dtype_of(array) if dtype is None else dtype, buffers.shared_hbm)
    t.host.copy_(data.reshape(t.shape))
    mark_written(t)
    return t


def shared_identity_matrix(
    n: int, dtype: DTypeLike = dtypes.uint8, dst: NkiTensor | None = None
) -> NkiTensor:
    """An ``n x n`` identity matrix in SBUF (written into ``dst`` when given)."""
    if dst is None:
        dst = ndarray((n, n), dtype, buffers.sbuf)
    checks.on_chip("shared_identity_matrix", "dst", dst, buffers.sbuf)
    if dst.shape != (n, n):
        fail("shared_identity_matrix", f"dst shape {dst.shape} must be ({n}, {n})")
    dst.host.copy_(torch.eye(n))
    issue("shared_identity_matrix", "gpsimd", [dst], [], free=n)
    return dst
