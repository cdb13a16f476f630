"""Block dimensions: on-chip tensors declared ``(B..., nl.par_dim(P), F...)``.

Such a tensor is a set of logical (P, F) tiles; indexing its block dimensions with integers
gives one tile.  The compiler gives each tile storage only while it is live, at the minimum a
single tile, so the tensor is charged as one tile against SBUF/PSUM capacity (the simulator
cannot foresee the last use of a block).  PSUM tiles start on a 2 KiB bank boundary.  All
blocks share one allocation, which the cost model sees as one buffer.
"""

import math
import operator

import torch

import nki.language as nl
from nki._src.legacy_api import (
    PMAX,
    DynSlice,
    current_runtime,
    dtype_name,
    dtype_sentinel,
    fail,
    normalize_dtype,
    require,
    require_on_chip_dtype,
    row_major,
)
from nki.language import NkiTensor


class BlockTensor:
    """An on-chip tensor with block dimensions in front of its partition dimension."""

    def __init__(self, shape, axis, dtype, buffer, name=""):
        dtype = normalize_dtype(dtype, "ndarray")
        require_on_chip_dtype(dtype, "ndarray")
        self.shape = tuple(shape)
        self.dtype = dtype
        self._blocks, self._parts, self._free = (
            self.shape[:axis],
            self.shape[axis],
            self.shape[axis + 1 :],
        )
        require(
            self._parts <= PMAX,
            "ndarray",
            f"partition dimension {self._parts} exceeds maximum {PMAX}",
        )
        tile = math.prod(self._free)
        if buffer is nl.psum:
            bank = current_runtime().target.psum_bank_bytes // dtype.itemsize
            tile = -(-tile // bank) * bank
        self._tile = tile
        count = math.prod(self._blocks)
        storage = torch.full(
            (self._parts * count * tile,), dtype_sentinel(dtype), dtype=dtype.torch
        )
        tile_bytes = tile * dtype.itemsize
        # The tiles sit side by side in each partition; the allocation is charged as one.
        self._alloc = current_runtime().allocator.new(
            storage, buffer, name, tile_bytes, storage.numel() * dtype.itemsize
        )
        self._alloc.dtype = dtype
        self._alloc.row_bytes = self._alloc.pitch_bytes = count * tile_bytes
        self._storage = storage

    @property
    def buffer(self):
        return self._alloc.buffer

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    def __repr__(self):
        return (
            f"BlockTensor(shape={self.shape}, dtype={dtype_name(self.dtype)}, "
            f"buffer={self.buffer!r})"
        )

    def tile(self, index):
        """The (P, F...) tile of flat block number ``index``."""
        row = self._alloc.row_bytes // self.itemsize
        return NkiTensor._make(
            self._alloc,
            self._storage,
            self.dtype,
            (self._parts,) + self._free,
            (row,) + row_major(self._free),
            index * self._tile,
            0,
        )

    def tiles(self):
        """Every tile, in row-major block order."""
        return [self.tile(i) for i in range(math.prod(self._blocks))]

    def _entries(self, key):
        entries = list(key) if isinstance(key, tuple) else [key]
        if any(e is Ellipsis for e in entries):
            i = entries.index(Ellipsis)
            entries[i : i + 1] = [slice(None)] * (self.ndim - len(entries) + 1)
        require(len(entries) <= self.ndim, "index", f"{len(entries)} indices for {self.shape}")
        return entries + [slice(None)] * (self.ndim - len(entries))

    def __getitem__(self, key):
        entries = self._entries(key)
        flat = 0
        for dim, (entry, size) in enumerate(zip(entries, self._blocks)):
            if isinstance(entry, DynSlice) and entry.size == 1:
                entry = entry.start
            try:
                idx = operator.index(entry)
            except TypeError:
                fail(
                    "index",
                    f"block dimension {dim} of {self.shape} must be indexed with an integer, "
                    f"got {entry!r}",
                )
            idx = idx + size if idx < 0 else idx
            require(0 <= idx < size, "index", f"block index {idx} exceeds dimension size {size}")
            flat = flat * size + idx
        tile = self.tile(flat)
        rest = entries[len(self._blocks) :]
        if all(isinstance(e, slice) and e == slice(None) for e in rest):
            return tile
        return tile[tuple(rest)]

    def __setitem__(self, key, value):
        from ._masking import assign

        assign(self[key], value)
