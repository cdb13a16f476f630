"""Fused helpers built from the elementwise and reduction functions."""

from .. import alu


def softmax(x, axis=-1, dtype=None):
    """``exp(x - max) / sum(exp(x - max))`` along the free ``axis``."""
    shifted = alu.subtract(x, alu.max(x, axis=axis, keepdims=True), dtype="float32")
    e = alu.exp(shifted)
    return alu.divide(e, alu.sum(e, axis=axis, keepdims=True), dtype=dtype or x.dtype)


def rms_norm(x, w, axis=-1, n=None, epsilon=1e-6, dtype=None):
    """``x / sqrt(mean(x^2, axis) + epsilon) * w``, the mean taken over ``n`` elements."""
    n = x.shape[axis] if n is None else n
    ssq = alu.sum(alu.square(x, dtype="float32"), axis=axis, keepdims=True)
    rstd = alu.rsqrt(alu.add(alu.multiply(ssq, 1.0 / n), epsilon))
    return alu.multiply(alu.multiply(x, rstd), w, dtype=dtype or x.dtype)
