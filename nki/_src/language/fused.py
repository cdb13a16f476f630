"""Fused helpers built from the elementwise and reduction functions."""

from .. import alu
from ..argtypes import DTypeLike
from ..tensor import NkiTensor


def softmax(x: NkiTensor, axis: int = -1, dtype: DTypeLike | None = None) -> NkiTensor:
    """``exp(x - max) / sum(exp(x - max))`` along the free ``axis``."""
    shifted = alu.subtract(x, alu.max(x, axis=axis, keepdims=True), dtype="float32")
    e = alu.exp(shifted)
    return alu.divide(e, alu.sum(e, axis=axis, keepdims=True), dtype=dtype or x.dtype)


def rms_norm(
    x: NkiTensor,
    w: NkiTensor,
    axis: int = -1,
    n: int | None = None,
    epsilon: float = 1e-6,
    dtype: DTypeLike | None = None,
) -> NkiTensor:
    """``x / sqrt(mean(x^2, axis) + epsilon) * w``, the mean taken over ``n`` elements."""
    n = x.shape[axis] if n is None else n
    ssq = alu.sum(alu.square(x, dtype="float32"), axis=axis, keepdims=True)
    rstd = alu.rsqrt(alu.add(alu.multiply(ssq, 1.0 / n), epsilon))
    return alu.multiply(alu.multiply(x, rstd), w, dtype=dtype or x.dtype)
