"""Shape helpers: nl.broadcast_to and nl.expand_dims."""

from .. import alu, buffers
from ..argtypes import Shape
from ..tensor import NkiTensor


def broadcast_to(x: NkiTensor, shape: Shape) -> NkiTensor:
    """A new SBUF tile holding ``x`` broadcast to ``shape`` (partition broadcast included)."""
    out = NkiTensor.allocate(shape, x.dtype, buffers.sbuf, op="nl.broadcast_to")
    return alu.copy(x, dst=out)


def expand_dims(x: NkiTensor, axis: int) -> NkiTensor:
    """A view of ``x`` with a size-1 dim inserted at ``axis``."""
    return x.expand_dim(axis)
