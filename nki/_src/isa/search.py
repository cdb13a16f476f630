"""Value search within partitions: nc_find_index8, nc_match_replace8 (Vector engine) and
nonzero_with_count (GpSimd engine)."""

import operator

import torch

from .. import buffers, checks, dtypes, runtime
from ..errors import require
from ..tensor import NkiTensor
from ..tiles import read_pf, rows, write
from ..trace import issue

SEARCH_FMAX = 16384
GPSIMD_CORE_PARTITIONS = 16
_INDEX_DTYPES = (dtypes.uint16, dtypes.uint32)


def _not_found(dtype):
    """The all-ones index sentinel of ``dtype`` (uint16 or uint32)."""
    return (1 << (8 * dtype.itemsize)) - 1


def _check_search(where, dst, data, vals):
    for label, t in (("dst", dst), ("data", data), ("vals", vals)):
        checks.on_chip(where, label, t)
        require(t.ndim <= 3, where, f"{label} must be at most 3-D, is {t.ndim}-D")
    checks.same_partitions(where, "data", data, "vals", vals)
    require(
        8 <= data.free_size <= SEARCH_FMAX,
        where,
        f"data must have 8 to {SEARCH_FMAX} elements per partition, has {data.free_size}",
    )
    require(
        vals.free_size == 8, where, f"vals must have 8 elements per partition, has {vals.free_size}"
    )


def _positions(matches):
    """Position of the first True of each row of ``matches`` ``[..., F]``, or -1."""
    found = matches.any(-1)
    first = matches.to(torch.int8).argmax(-1)
    return torch.where(found, first, torch.full_like(first, -1))


def nc_find_index8(
    dst: NkiTensor, data: NkiTensor, vals: NkiTensor, name: str | None = None
) -> None:
    """Index of the first occurrence of each of the 8 ``vals`` in each partition of ``data``;
    a value repeated in ``vals`` takes successive occurrences; missing values give all ones."""
    where = "nc_find_index8"
    _check_search(where, dst, data, vals)
    checks.same_partitions(where, "dst", dst, "data", data)
    checks.dtype_in(where, "dst", dst, *_INDEX_DTYPES)
    require(
        dst.free_size == 8, where, f"dst must have 8 elements per partition, has {dst.free_size}"
    )
    x = read_pf(data)
    v = read_pf(vals)
    matches = x[:, None, :] == v[:, :, None]  # [P, 8, F]
    # The j-th val takes the (number of equal earlier vals + 1)-th occurrence.
    same = (v[:, :, None] == v[:, None, :]).tril(-1).sum(-1)  # [P, 8]
    nth = matches & (matches.cumsum(-1) == same[:, :, None] + 1)
    index = _positions(nth)
    index = torch.where(index < 0, torch.tensor(_not_found(dst.dtype)), index)
    write(dst, index.to(torch.int64))
    issue(where, "vector", [dst], [data], reads=(vals,))


def nc_match_replace8(
    dst: NkiTensor,
    data: NkiTensor,
    vals: NkiTensor,
    imm: float,
    dst_idx: NkiTensor | None = None,
    name: str | None = None,
) -> None:
    """Replace the first occurrence of each of the 8 ``vals`` in ``data`` with ``imm`` (vals
    processed from last to first, each taking the first not yet matched occurrence)."""
    where = "nc_match_replace8"
    _check_search(where, dst, data, vals)
    checks.same_tile(where, "dst", dst, "data", data)
    x = read_pf(data)
    v = read_pf(vals)
    available = torch.ones_like(x, dtype=torch.bool)
    index = torch.full(v.shape, -1, dtype=torch.int64)
    rows = torch.arange(x.shape[0])
    for j in reversed(range(8)):
        pos = _positions((x == v[:, j : j + 1]) & available)
        hit = pos >= 0
        available[rows[hit], pos[hit]] = False
        index[:, j] = pos
    write(dst, torch.where(available, x, torch.tensor(float(imm))))
    dsts = [dst]
    if dst_idx is not None:
        checks.on_chip(where, "dst_idx", dst_idx)
        checks.same_partitions(where, "dst_idx", dst_idx, "data", data)
        checks.dtype_in(where, "dst_idx", dst_idx, *_INDEX_DTYPES)
        require(
            dst_idx.free_size == 8,
            where,
            f"dst_idx must have 8 elements per partition, has {dst_idx.free_size}",
        )
        write(dst_idx, torch.where(index < 0, _not_found(dst_idx.dtype), index))
        dsts.append(dst_idx)
    issue(where, "vector", dsts, [data], reads=(vals,))


def nonzero_with_count(
    dst: NkiTensor,
    src: NkiTensor,
    index_offset: int = 0,
    padding_val: int = -1,
    name: str | None = None,
) -> None:
    """On partitions 0, 16, ..., 112 (each GpSimd core's first): the indices of ``src``'s
    nonzero elements plus ``index_offset``, then ``padding_val``, then the count."""
    where = "nonzero_with_count"
    target = runtime.current().target
    require(
        target.generation >= 3,
        where,
        f"requires NeuronCore-v3 or newer; target {target.name} is NeuronCore-v{target.generation}",
    )
    checks.on_chip(where, "src", src, buffers.sbuf)
    checks.on_chip(where, "dst", dst, buffers.sbuf)
    checks.dtype_in(where, "src", src, dtypes.float32, dtypes.int32)
    checks.dtype_in(where, "dst", dst, dtypes.int32)
    checks.same_partitions(where, "dst", dst, "src", src)
    require(
        dst.free_size == src.free_size + 1,
        where,
        f"dst must have one more element per partition than src ({src.free_size + 1}), "
        f"has {dst.free_size}",
    )
    offset, padding = operator.index(index_offset), operator.index(padding_val)
    active = [
        p for p in range(src.shape[0]) if (src.partition_offset + p) % GPSIMD_CORE_PARTITIONS == 0
    ]
    require(
        all((dst.partition_offset + p) % GPSIMD_CORE_PARTITIONS == 0 for p in active),
        where,
        f"src (from partition {src.partition_offset}) and dst (from partition "
        f"{dst.partition_offset}) must sit alike relative to the 16-partition GpSimd cores",
    )
    x = src.host.reshape(src.shape[0], -1)
    out = rows(dst, where)
    width = src.free_size
    for p in active:
        idx = torch.nonzero(x[p] != 0).flatten()
        row = torch.full((width + 1,), padding, dtype=torch.int64)
        row[: idx.numel()] = idx + offset
        row[width] = idx.numel()
        out[p].copy_(row.to(out.dtype))
    issue(where, "gpsimd", [dst], [src])
