"""nl.matmul and nl.transpose, lowered onto nc_transpose / nc_matmul."""

from .. import buffers, checks
from ..argtypes import DTypeLike
from ..enums import engine
from ..errors import require
from ..isa.elementwise import tensor_copy
from ..isa.matmul import nc_matmul, nc_transpose
from ..tensor import NkiTensor
from .memory import to_sbuf


def transpose(x: NkiTensor, dtype: DTypeLike | None = None) -> NkiTensor:
    """Swap the partition and free axes of a 2-D tile on the Tensor engine; returns a PSUM tile."""
    checks.on_chip("nl.transpose", "x", x)
    require(x.ndim == 2, "nl.transpose", f"x must be 2-D, is {x.ndim}-D")
    out = NkiTensor.allocate((x.shape[1], x.shape[0]), x.dtype, buffers.psum, op="nl.transpose")
    nc_transpose(dst=out, data=to_sbuf(x), engine=engine.tensor)
    if dtype is None or dtype == x.dtype:
        return out
    cast = NkiTensor.allocate(out.shape, dtype, buffers.sbuf, op="nl.transpose")
    tensor_copy(dst=cast, src=out)
    return cast


def matmul(x: NkiTensor, y: NkiTensor, transpose_x: bool = False) -> NkiTensor:
    """``x @ y`` into a new fp32 PSUM tile; ``transpose_x=True`` means x is given as [K, M]."""
    checks.on_chip("nl.matmul", "x", x)
    checks.on_chip("nl.matmul", "y", y)
    stationary = to_sbuf(x)
    if not transpose_x:
        stationary = to_sbuf(transpose(stationary))
    out = NkiTensor.allocate(
        (stationary.free_size, y.free_size), "float32", buffers.psum, op="nl.matmul"
    )
    nc_matmul(dst=out, stationary=stationary, moving=to_sbuf(y))
    return out
