"""Index patterns on the GpSimd engine: iota and affine_select (e.g. causal masks), and
sequence_bounds (the extent of each segment of equal ids)."""

import math
from collections.abc import Sequence

import torch

from .. import alu, buffers, checks, dtypes
from ..argtypes import Operator
from ..errors import require
from ..tensor import NkiTensor
from ..tiles import as_float32, read_pf, write
from ..trace import issue


def affine_values(where, dst, pattern, offset, channel_multiplier):
    """int64 ``[P, F]`` of ``offset + p*channel_multiplier + sum_k i_k*step_k``."""
    pattern = [(int(step), int(num)) for step, num in pattern]
    require(
        1 <= len(pattern) <= 4,
        where,
        f"pattern must have 1 to 4 [step, num] entries, has {len(pattern)}",
    )
    count = math.prod(num for _, num in pattern)
    require(
        count == dst.free_size,
        where,
        f"pattern covers {count} elements per partition, dst has {dst.free_size}",
    )
    free = torch.zeros((), dtype=torch.int64)
    for step, num in pattern:
        free = free.unsqueeze(-1) + step * torch.arange(num)
    parts = torch.arange(dst.shape[0]).unsqueeze(1) * int(channel_multiplier)
    return int(offset) + parts + free.reshape(1, -1)


def iota(
    dst: NkiTensor,
    pattern: Sequence[Sequence[int]],
    offset: int = 0,
    channel_multiplier: int = 0,
    name: str | None = None,
) -> None:
    """Fill ``dst`` with the affine pattern (computed in int32, cast to dst's dtype)."""
    where = "iota"
    checks.on_chip(where, "dst", dst, buffers.sbuf)
    write(dst, affine_values(where, dst, pattern, offset, channel_multiplier).to(torch.int32))
    issue(where, "gpsimd", [dst], [])


def affine_select(
    dst: NkiTensor,
    pattern: Sequence[Sequence[int]],
    channel_multiplier: int,
    on_true_tile: NkiTensor,
    on_false_value: float,
    cmp_op: Operator = alu.equal,
    offset: int = 0,
    name: str | None = None,
) -> None:
    """``dst = on_true_tile`` where ``cmp_op(affine value, 0)`` holds, else ``on_false_value``."""
    where = "affine_select"
    checks.on_chip(where, "dst", dst, buffers.sbuf)
    checks.on_chip(where, "on_true_tile", on_true_tile, buffers.sbuf)
    checks.same_tile(where, "dst", dst, "on_true_tile", on_true_tile)
    cmp = alu.resolve(cmp_op, where, "binary")
    values = affine_values(where, dst, pattern, offset, channel_multiplier).to(torch.float32)
    keep = cmp.binary(values, torch.zeros(())) != 0
    write(dst, torch.where(keep, read_pf(on_true_tile), torch.tensor(as_float32(on_false_value))))
    issue(where, "gpsimd", [dst], [on_true_tile])


def sequence_bounds(dst: NkiTensor, segment_ids: NkiTensor, name: str | None = None) -> None:
    """``[start, end)`` of the run of equal segment ids around each element (id 0 is padding:
    start n, end -1), as ``dst[:, 0, :]`` and ``dst[:, 1, :]`` (GpSimd)."""
    where = "sequence_bounds"
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "segment_ids", segment_ids)
    require(
        segment_ids.dtype in (torch.float32, torch.int32),
        where,
        f"segment_ids must be float32 or int32, got {dtypes.name(segment_ids.dtype)}",
    )
    ids = read_pf(segment_ids)
    parts, n = ids.shape
    require(
        dst.shape[0] == parts and dst.free_size == 2 * n,
        where,
        f"dst must be ({parts}, 2, {n}), got {dst.shape}",
    )
    starts = torch.empty_like(ids)
    ends = torch.empty_like(ids)
    for p in range(parts):
        row = ids[p]
        for i in range(n):
            if row[i] == 0:
                starts[p, i], ends[p, i] = n, -1
                continue
            lo, hi = i, i + 1
            while lo > 0 and row[lo - 1] == row[i]:
                lo -= 1
            while hi < n and row[hi] == row[i]:
                hi += 1
            starts[p, i], ends[p, i] = lo, hi
    write(dst, torch.stack([starts, ends], 1))
    issue(where, "gpsimd", [dst], [segment_ids])
