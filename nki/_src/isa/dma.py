"""DMA instructions: copies between HBM and SBUF (no PSUM), with casts via fp32."""

from .. import buffers, checks, dtypes
from ..enums import dge_mode as Dge
from ..enums import engine as E
from ..enums import oob_mode as Oob
from ..errors import require
from ..tiles import read, write
from ..trace import contiguous_run, issue

_DMA_SPACES = (buffers.sbuf, buffers.private_hbm, buffers.shared_hbm)


def _endpoint(where, label, t):
    checks.tensor(where, label, t)
    checks.buffer(where, label, t, *_DMA_SPACES)
    if t.buffer.on_chip:
        checks.partitions(where, label, t)


def _issue(where, dst, src):
    issue(
        where,
        "dma",
        [dst],
        [src],
        nbytes=dst.size * max(dst.itemsize, src.itemsize),
        chunk=min(contiguous_run(dst), contiguous_run(src)),
    )


def dma_copy(
    dst, src, priority=None, oob_mode=Oob.error, dge_mode=Dge.unknown, engine=E.unknown, name=None
):
    """``dst = src`` element by element in row-major order (element counts must match)."""
    where = "dma_copy"
    _endpoint(where, "dst", dst)
    _endpoint(where, "src", src)
    require(
        isinstance(dge_mode, Dge) and isinstance(oob_mode, Oob),
        where,
        "dge_mode and oob_mode must be nki.isa enum members",
    )
    checks.engine(where, engine, E.sync, E.scalar)
    require(
        dst.size == src.size,
        where,
        f"element count mismatch: dst has {dst.size}, src has {src.size}",
    )
    write(dst, src.host if dst.dtype == src.dtype else read(src))
    _issue(where, dst, src)


_PERMUTATIONS = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def dma_transpose(
    dst, src, axes=None, priority=None, dge_mode=Dge.unknown, oob_mode=Oob.error, name=None
):
    """Transpose ``src`` (HBM or SBUF) into an SBUF ``dst`` with the DMA engines."""
    where = "dma_transpose"
    _endpoint(where, "src", src)
    checks.tensor(where, "dst", dst)
    checks.buffer(where, "dst", dst, buffers.sbuf)
    checks.partitions(where, "dst", dst)
    require(src.ndim in _PERMUTATIONS, where, f"src must be 2-D to 4-D, is {src.ndim}-D")
    perm = tuple(axes) if axes is not None else _PERMUTATIONS[src.ndim]
    require(
        perm == _PERMUTATIONS[src.ndim],
        where,
        f"axes {perm} not supported for a {src.ndim}-D tile; use {_PERMUTATIONS[src.ndim]}",
    )
    require(
        dst.dtype == src.dtype,
        where,
        f"dst dtype {dtypes.name(dst.dtype)} must equal src dtype {dtypes.name(src.dtype)}",
    )
    expected = tuple(src.shape[p] for p in perm)
    require(dst.shape == expected, where, f"dst shape {dst.shape} must be {expected}")
    write(dst, src.host.permute(perm))
    issue(where, "dma", [dst], [src], nbytes=dst.size * dst.itemsize, chunk=dst.itemsize)
