"""nc_stream_shuffle: cross-partition moves within each 32-partition quadrant (Vector engine)."""

import math
import operator
from collections.abc import Sequence

from .. import checks
from ..errors import require
from ..tensor import NkiTensor
from ..tiles import rows
from ..trace import issue

QUADRANT = 32
KEEP = 255
_STARTS = {1: (0, 32, 64, 96), 2: (0, 64), 3: (0,), 4: (0,)}


def nc_stream_shuffle(
    dst: NkiTensor, src: NkiTensor, shuffle_mask: Sequence[int], name: str | None = None
) -> None:
    """In every quadrant, partition ``i`` of ``dst`` takes partition ``shuffle_mask[i]`` of
    ``src`` (``255`` leaves it unmodified); the same 32-entry mask serves each quadrant."""
    where = "nc_stream_shuffle"
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "src", src)
    checks.same_dtype(where, "dst", dst, "src", src)
    checks.same_free(where, "dst", dst, "src", src)
    mask = [operator.index(m) for m in shuffle_mask]
    require(len(mask) == QUADRANT, where, f"shuffle_mask must have 32 entries, has {len(mask)}")
    require(
        all(0 <= m < QUADRANT or m == KEEP for m in mask),
        where,
        f"shuffle_mask entries must be partitions 0..31 or 255 (keep), got {mask}",
    )
    quadrants = math.ceil(max(src.shape[0], dst.shape[0]) / QUADRANT)
    for label, t in (("src", src), ("dst", dst)):
        require(
            t.partition_offset in _STARTS[quadrants],
            where,
            f"{label} starts at partition {t.partition_offset}; with {quadrants * QUADRANT} active "
            f"partitions it must start at one of {_STARTS[quadrants]}",
        )
    moved = src.host.reshape(src.shape[0], -1).clone()
    out = rows(dst, where)
    for q in range(quadrants):
        for i, m in enumerate(mask):
            p = q * QUADRANT + i
            if m == KEEP or p >= dst.shape[0]:
                continue
            s = q * QUADRANT + m
            require(
                s < src.shape[0],
                where,
                f"dst partition {p} reads src partition {s}, beyond src's {src.shape[0]}",
            )
            out[p].copy_(moved[s])
    issue(where, "vector", [dst], [src])
