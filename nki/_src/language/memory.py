"""Moving tiles between memories: nl.load, nl.store and assignment through views."""

import numbers

from .. import alu, buffers, checks
from ..argtypes import DTypeLike
from ..isa.dma import dma_copy
from ..isa.elementwise import memset, tensor_copy
from ..tensor import NkiTensor
from ..tiles import fill


def load(src: NkiTensor, dtype: DTypeLike | None = None) -> NkiTensor:
    """Copy an HBM tensor into a new SBUF tile (dim 0 becomes the partition dim)."""
    checks.tensor("nl.load", "src", src)
    dst = NkiTensor.allocate(
        src.shape, src.dtype if dtype is None else dtype, buffers.sbuf, op="nl.load"
    )
    dma_copy(dst=dst, src=src)
    return dst


def to_sbuf(t):
    """``t`` itself if it is in SBUF, else a copy of it in SBUF (DMA cannot read PSUM)."""
    if t.buffer is buffers.sbuf:
        return t
    copy = NkiTensor.allocate(t.shape, t.dtype, buffers.sbuf, op="copy")
    if t.buffer is buffers.psum:
        tensor_copy(dst=copy, src=t)
    else:
        dma_copy(dst=copy, src=t)
    return copy


def store(dst: NkiTensor, value: NkiTensor) -> None:
    """Copy an on-chip tile into the HBM tensor ``dst``."""
    checks.tensor("nl.store", "dst", dst)
    checks.tensor("nl.store", "value", value)
    dma_copy(dst=dst, src=to_sbuf(value))


@alu.implement("assign")
def _assign(op, dst, value):
    """``dst[...] = value``: memset for scalars, DMA when HBM is involved, else an on-chip copy."""
    if isinstance(value, numbers.Number):
        if dst.buffer.on_chip:
            memset(dst=dst, value=value)
        else:
            fill(dst, value)
        return
    checks.tensor("assign", "value", value)
    same_view = (
        value._alloc is dst._alloc
        and value.shape == dst.shape
        and value.strides == dst.strides
        and value._offset == dst._offset
    )
    if same_view:
        return
    if not (dst.buffer.on_chip and value.buffer.on_chip):
        dma_copy(dst=dst, src=to_sbuf(value) if value.buffer is buffers.psum else value)
    else:
        alu.copy(value, dst=dst)
