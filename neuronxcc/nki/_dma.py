"""DMA between tensors where either side may be an ``Access``: indirect (gathering or
scattering) DMA with ``oob_mode`` handling, and read-modify-write destinations."""

import torch

from nki._src.legacy_api import contiguous_run, issue, require
from nki.isa import dge_mode
from nki.isa import dma_copy as _dma_copy
from nki.isa import oob_mode as _Oob
from nki.language import NkiTensor

from ._index import Access
from ._ops import resolve_op


def _checked(a, oob, where):
    """Positions of access ``a`` to transfer: all (error mode, after checking) or the in-bounds
    ones (skip mode).  Static index expressions out of bounds are errors in every mode."""
    if a.inbounds.all():
        return None
    if not a.indirect:
        a.out_of_bounds(where)
    if oob is _Oob.skip:
        return torch.from_numpy(a.inbounds.copy())
    bad = int(a.flat[~a.inbounds].reshape(-1)[0])
    raise IndexError(f"index {bad} is out of bounds for axis 0 with size {a.tensor.size}")


def dma(dst, src, oob_mode=_Oob.error, dge_mode=dge_mode.unknown, dst_rmw_op=None):
    """``dst = src`` (or ``dst = rmw(dst, src)``) where either side may gather or scatter."""
    where = "dma_copy"
    if isinstance(dst, NkiTensor) and isinstance(src, NkiTensor) and dst_rmw_op is None:
        _dma_copy(dst=dst, src=src, oob_mode=oob_mode, dge_mode=dge_mode)
        return
    require(dst.size == src.size, where, f"element count mismatch: {dst.size} vs {src.size}")
    keep = torch.ones(dst.shape, dtype=torch.bool)
    if isinstance(src, Access):
        valid = _checked(src, oob_mode, where)
        values = src.read(valid).reshape(dst.shape)
        if valid is not None:
            keep = keep & valid.reshape(dst.shape)
    else:
        values = src.host.reshape(dst.shape)
    if isinstance(dst, Access):
        valid = _checked(dst, oob_mode, where)
        if valid is not None:
            keep = keep & valid
        current = dst.read(keep)
    else:
        current = dst.host
    if dst_rmw_op is not None:
        op = resolve_op(dst_rmw_op)
        values = op.binary(current.to(torch.float32), values.to(torch.float32))
    values = torch.where(keep, values.to(current.dtype), current)
    if isinstance(dst, Access):
        dst.write(values, keep)
        target, chunk = dst.tensor, dst.contiguous_bytes()
    else:
        dst.host.copy_(values)
        target, chunk = dst, contiguous_run(dst)
    source = src.tensor if isinstance(src, Access) else src
    if isinstance(src, Access):
        chunk = min(chunk, src.contiguous_bytes())
    issue(
        where,
        "dma",
        [target],
        [source],
        nbytes=dst.size * max(dst.itemsize, src.itemsize),
        chunk=chunk,
    )
