"""NkiTensor: a strided view (shape, strides, offset) over host storage in one memory space.

On-chip tensors have two layouts.  *Logically* (``.strides``, ``.offset``, ``.ap()`` patterns)
partition ``p`` starts ``row`` elements after partition ``p - 1``, where ``row`` is the
tensor's elements per partition.  *Physically* the storage may place partitions further
apart: a tile created with ``nl.ndarray(address=(partition, byte))`` lives inside the
instance's physical SBUF/PSUM memory, where partitions are the memory's full size apart, so
tiles given overlapping addresses share their bytes as on the device.
"""

import functools
import math
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, SupportsIndex, cast

import numpy as np
import torch

from . import alu, buffers, dtypes, runtime
from .argtypes import DTypeLike, Shape
from .buffers import Buffer
from .dtypes import DType
from .errors import fail, require
from .objects import NKIObject

if TYPE_CHECKING:
    from .allocator import Allocation

PMAX = 128
MAX_DIMS = 5

# The pre-0.2 API (neuronxcc.nki) indexes with nl.arange expressions and tile values and
# broadcasts tiles across partitions, and ``psum_tile += matmul_result`` accumulates like a
# matmul into PSUM; its compatibility layer sets ``legacy`` to an object whose
# ``getitem(t, key)``, ``setitem(t, key, value)``, ``broadcast_to(t, shape)`` and
# ``iadd(t, other)`` return NotImplemented wherever this module's own semantics apply.
legacy = None


class DynSlice:
    """``nl.ds(start, size)``: a slice of ``size`` elements beginning at ``start``."""

    __slots__ = ("start", "size")

    def __init__(self, start, size):
        self.start = operator.index(start)
        self.size = operator.index(size)

    def __repr__(self):
        return f"nl.ds({self.start}, {self.size})"


def ds(start: SupportsIndex, size: SupportsIndex) -> DynSlice:
    """Construct a dynamic slice for simple tensor indexing."""
    return DynSlice(start, size)


def as_shape(shape: "int | Shape", op: str) -> tuple[int, ...]:
    """Normalize an int or sequence of ints into a shape tuple of positive ints."""
    if isinstance(shape, (tuple, list)) or not hasattr(shape, "__index__"):
        dims = tuple(map(operator.index, cast("Sequence[SupportsIndex]", shape)))
    else:
        dims = (operator.index(shape),)
    if 1 <= len(dims) <= MAX_DIMS and min(dims) >= 1:
        return dims
    require(len(dims) >= 1, op, "tensors need at least one dimension")
    if len(dims) > MAX_DIMS:
        fail(op, f"{len(dims)} dimensions exceed the maximum of {MAX_DIMS}")
    if min(dims) < 1:
        fail(op, f"shape {dims} has a non-positive dimension")
    return dims


@functools.cache
def row_major(shape):
    """Contiguous strides for ``shape`` (a tuple)."""
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return tuple(reversed(strides))


def _bytes_view(storage):
    """A flat uint8 tensor over the whole of ``storage``'s memory."""
    return torch.empty(0, dtype=torch.uint8).set_(storage.untyped_storage())


def reinterpret(storage, dtype):
    """A flat tensor of ``dtype`` (a torch dtype) over the whole of ``storage``'s memory."""
    raw = _bytes_view(storage)
    usable = raw.numel() // dtype.itemsize * dtype.itemsize
    return raw[:usable].view(dtype)


class NkiTensor(NKIObject):
    """A tensor view: storage in one buffer plus (shape, strides, offset) in elements."""

    __slots__ = (
        "_alloc",
        "_base",
        "dtype",
        "itemsize",
        "shape",
        "_strides",
        "_offset",
        "_origin",
        "_index",
        "_invalid",
        "size",
        "_host",
    )

    shape: tuple[int, ...]
    _alloc: "Allocation"
    _base: torch.Tensor
    dtype: DType
    itemsize: int
    size: int
    _strides: tuple[int, ...]
    _offset: int
    _origin: int
    _index: torch.Tensor | None
    _invalid: str | None

    def __init__(
        self,
        shape: Shape,
        dtype: DTypeLike,
        storage: torch.Tensor | np.ndarray | None = None,
        buffer: Buffer = buffers.sbuf,
        name: str = "",
    ) -> None:
        """Bind ``storage`` (torch tensor or numpy array; None: fresh memory) as a tensor."""
        if storage is None:
            made = NkiTensor.allocate(shape, dtype, buffer, name)
        else:
            from . import interop

            host = interop.to_host(storage)
            dtype = dtypes.normalize(dtype, "NkiTensor")
            if not (host.numel() * host.element_size() >= math.prod(shape) * dtype.itemsize):
                fail(
                    "NkiTensor",
                    f"storage of {host.numel()} elements is smaller than shape {tuple(shape)}",
                )
            made = NkiTensor.wrap(host, buffer, name).ap(
                [[s, c] for s, c in zip(row_major(tuple(shape)), shape)], dtype=dtype
            )
        for slot in NkiTensor.__slots__:
            object.__setattr__(self, slot, getattr(made, slot))

    @classmethod
    def _make(cls, alloc, base, dtype, shape, strides, offset, origin):
        t = object.__new__(cls)
        t._alloc = alloc
        t._base = base  # torch tensor whose dtype and storage the view reads
        # Attributes rather than properties: every instruction reads them of its operands.
        t.dtype = dtype
        t.itemsize = base.element_size()
        t.shape = tuple(shape)
        t._strides = tuple(strides)  # physical strides in ``base`` elements
        t._offset = offset  # absolute storage offset (torch as_strided units)
        t._origin = origin  # absolute offset of the allocation's element 0 (base units)
        t._index = None  # vector-offset views: absolute storage offset of every element
        t._invalid = None  # why the view cannot be accessed (an out-of-bounds access pattern)
        t.size = math.prod(t.shape)
        t._host = None  # the torch view, made on first access (instructions reuse tiles)
        return t

    # ---- creation -------------------------------------------------------------------------
    @classmethod
    def allocate(
        cls,
        shape: int | Shape,
        dtype: DTypeLike,
        buffer: Buffer,
        name: str = "",
        op: str = "ndarray",
        address: tuple[int, int] | None = None,
    ) -> "NkiTensor":
        """Allocate storage, filled with the uninitialized-memory sentinel."""
        if not isinstance(buffer, buffers.Buffer):
            fail(op, f"buffer must be nl.sbuf, nl.psum or an HBM buffer, got {buffer!r}")
        shape = as_shape(shape, op)
        dtype = dtypes.normalize(dtype, op)
        ctx = runtime.current()
        if buffer.on_chip:
            dtypes.require_on_chip_dtype(dtype, op)
            if shape[0] > PMAX:
                fail(op, f"partition dimension {shape[0]} exceeds maximum {PMAX}")
        elif address is not None:
            fail(op, "address= places SBUF/PSUM tiles; HBM tensors have no on-chip address")
        numel = math.prod(shape)
        row_bytes = numel // shape[0] * dtype.itemsize
        if address is not None:
            alloc = ctx.allocator.place(buffer, name, shape[0], row_bytes, address, op)
            alloc.dtype = dtype
            if alloc.col_bytes % dtype.itemsize != 0:
                fail(op, f"address byte {alloc.col_bytes} is not aligned to {dtypes.name(dtype)}")
            base = reinterpret(alloc.storage, dtype.torch)
            origin = alloc.origin_bytes // dtype.itemsize
            strides = (alloc.pitch_bytes // dtype.itemsize,) + row_major(shape)[1:]
            return cls._make(alloc, base, dtype, shape, strides, origin, origin)
        key = ctx.shared_key(name) if buffer is buffers.shared_hbm else None
        alloc = None if key is None else ctx.shared.get(key)
        if alloc is None:
            storage = torch.full((numel,), dtypes.sentinel(dtype), dtype=dtype.torch)
            alloc = ctx.allocator.new(storage, buffer, name, row_bytes, numel * dtype.itemsize)
            alloc.dtype = dtype
            if key is not None:
                ctx.shared[key] = alloc
        if not (alloc.storage.numel() == numel and alloc.dtype is dtype):
            fail(op, f"shared_hbm tensor {key} differs between SPMD instances")
        return cls._make(alloc, alloc.storage, dtype, shape, row_major(shape), 0, 0)

    @classmethod
    def wrap(
        cls, t: torch.Tensor, buffer: Buffer, name: str = "", dtype: DTypeLike | None = None
    ) -> "NkiTensor":
        """View a host torch tensor (a kernel argument) as an HBM tensor, without copying."""
        span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
        nbytes = span * t.element_size()
        alloc = runtime.current().allocator.new(t, buffer, name, nbytes, nbytes)
        dtype = dtype or dtypes.from_torch(t.dtype)
        alloc.dtype = dtype
        origin = t.storage_offset()
        return cls._make(alloc, t, dtype, t.shape, t.stride(), origin, origin)

    # ---- attributes -----------------------------------------------------------------------
    @property
    def buffer(self):
        # The allocation's: old-API kernels move a returned private_hbm tensor to shared_hbm.
        return self._alloc.buffer

    @property
    def name(self):
        return self._alloc.name

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def _row(self):
        """Logical elements per partition of the allocation, in this view's element units."""
        return self._alloc.row_bytes // self.itemsize

    @property
    def _pitch(self):
        """Physical elements between partitions of the allocation, in this view's units."""
        return self._alloc.pitch_bytes // self.itemsize

    def _logical(self, absolute):
        """Logical element offset of absolute storage offset ``absolute``."""
        p, col = divmod(absolute - self._origin, self._pitch)
        return p * self._row + col

    def _physical(self, logical):
        """Absolute storage offset of logical element offset ``logical``."""
        p, col = divmod(logical, self._row)
        return self._origin + p * self._pitch + col

    def _logical_stride(self, stride):
        p, col = divmod(stride, self._pitch)
        return p * self._row + col

    @property
    def strides(self):
        """Element strides of the view in the allocation's logical layout."""
        if self._pitch == self._row:
            return self._strides
        return (self._logical_stride(self._strides[0]),) + self._strides[1:]

    @property
    def offset(self):
        """Logical element offset of this view from the start of its allocation."""
        return self._logical(self._offset)

    @property
    def host(self):
        """The torch view of this tensor's elements (writes land in the storage)."""
        if self._invalid is not None:
            fail("ap", self._invalid)
        if self._index is not None:
            fail(
                "indirect",
                "a vector_offset (gather/scatter) view can only be read or written by dma_copy",
            )
        if self._host is None:
            self._host = self._base.as_strided(self.shape, self._strides, self._offset)
        return self._host

    def _flat_storage(self):
        """The whole storage as a flat tensor of this view's element type."""
        length = self._base.untyped_storage().nbytes() // self.itemsize
        return self._base.as_strided((length,), (1,), 0)

    def _in_bounds(self):
        """Which elements of a vector-offset view address the allocation (bool, view's shape)."""
        lo = self._origin
        hi = lo + self._alloc.nbytes // self.itemsize
        return (self._index >= lo) & (self._index < hi)

    def gather(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The elements of this view (any kind) and which of them are in bounds."""
        if self._index is None:
            return self.host, None
        valid = self._in_bounds()
        index = self._index
        if not bool(valid.all()):
            index = torch.where(valid, index, torch.full_like(index, self._origin))
        return self._flat_storage()[index], valid

    def scatter(self, values: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Store ``values`` (this view's shape) into the view's elements where ``mask`` holds."""
        if self._index is None:
            target = self.host
            target.copy_(values if mask is None else torch.where(mask, values, target))
            return
        keep = self._in_bounds() if mask is None else mask & self._in_bounds()
        index, values = self._index, values.to(self._base.dtype)
        # Selecting the kept elements (a compaction of both tensors) only when some are not.
        if not bool(keep.all()):
            index, values = index[keep], values[keep]
        self._flat_storage()[index] = values

    @property
    def free_size(self):
        """Elements per partition (dim 0 is the partition dim; a scalar view has one)."""
        return self.size // self.shape[0] if self.shape else 1

    @property
    def partition_offset(self):
        """First partition of an on-chip view within its physical memory."""
        return self._alloc.partition0 + (self._offset - self._origin) // self._pitch

    def get_pattern(self) -> list[list[int]]:
        """The view as ``[[stride, count], ...]`` pairs, as accepted by ``ap``."""
        return [[s, c] for s, c in zip(self.strides, self.shape)]

    def is_contiguous(self) -> bool:
        """True if the view covers its elements in dense row-major order (per partition for
        on-chip tensors)."""
        dims = list(zip(self.shape, self.strides, row_major(self.shape)))
        if self.buffer.on_chip:
            dims = dims[1:]
        return all(st == rm for s, st, rm in dims if s > 1)

    def is_indirect(self) -> bool:
        """True for vector-offset (gather/scatter) views; scalar offsets resolve eagerly here."""
        return self._index is not None

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return (
            f"NkiTensor(shape={self.shape}, dtype={dtypes.name(self.dtype)}, "
            f"buffer={self.buffer!r}, strides={self.strides}, offset={self.offset})"
        )

    # ---- views ----------------------------------------------------------------------------
    def _derive(self, v, dtype=None):
        """Wrap a torch view of ``self.host`` as an NkiTensor over the same storage."""
        origin = self._origin
        base = self._base
        if v.dtype != base.dtype:
            origin = origin * base.element_size() // v.element_size()
            base = v
        if dtype is None:
            dtype = self.dtype if v.dtype == self._base.dtype else dtypes.from_torch(v.dtype)
        return NkiTensor._make(
            self._alloc, base, dtype, v.shape, v.stride(), v.storage_offset(), origin
        )

    def _keep_partition(self, op, moved):
        """On-chip tensors must keep dim 0 as the partition dim."""
        if moved and self.buffer.on_chip:
            fail(op, "cannot change the partition dimension of an on-chip tensor")

    def __getitem__(self, key):
        if legacy is not None:
            found = legacy.getitem(self, key)
            if found is not NotImplemented:
                return found
        key = _expand_key(key, self.ndim)
        on_chip = self.buffer.on_chip
        torch_key, dropped, empty = [], [], None
        for dim, (k, size) in enumerate(zip(key, self.shape)):
            if isinstance(k, DynSlice):
                k = slice(k.start, k.start + k.size)
            if isinstance(k, slice):
                k = _check_slice(k, size, dim)
                if k.start == k.stop:
                    empty = f"empty slice [{k.start}:{k.stop}] (dim {dim}) accessed"
                torch_key.append(k)
            elif isinstance(k, NkiTensor):
                fail("index", "tensor-valued (dynamic) indices are not supported; use .ap()")
            else:
                idx = operator.index(k)
                idx = idx + size if idx < 0 else idx
                if not (0 <= idx < size):
                    fail("index", f"index {k} exceeds dimension size {size} (dim {dim})")
                if on_chip and dim == 0:
                    torch_key.append(slice(idx, idx + 1))
                else:
                    torch_key.append(idx)
                    dropped.append(dim)
        # On-chip views stay at least 2-D: keep the last dropped free dim at size 1.
        if on_chip and self.ndim - len(dropped) < 2 and dropped:
            dim = dropped[-1]
            torch_key[dim] = slice(torch_key[dim], torch_key[dim] + 1)
        if self._invalid is not None and self.size:
            fail("ap", self._invalid)
        # The view's geometry as torch's basic indexing computes it, without building tensors.
        shape, strides, offset = [], [], self._offset
        for k, stride in zip(torch_key, self._strides):
            if isinstance(k, slice):
                step = k.step or 1
                shape.append(len(range(k.start, k.stop, step)))
                strides.append(stride * step)
                offset += k.start * stride
            else:
                offset += k * stride
        view = NkiTensor._make(
            self._alloc, self._base, self.dtype, shape, strides, offset, self._origin
        )
        # An empty view may be built (e.g. a core's share of nothing) but not accessed.
        view._invalid = empty or self._invalid
        return view

    def __setitem__(self, key, value):
        if legacy is not None and legacy.setitem(self, key, value) is not NotImplemented:
            return
        alu.assign(self[key], value)

    def slice(self, dim: int, start: int | None, end: int | None, step: int = 1) -> "NkiTensor":
        """View of ``start:end:step`` along ``dim``."""
        key = [slice(None)] * self.ndim
        key[dim] = slice(start, end, step)
        return self[tuple(key)]

    def select(self, dim: int, index: "SupportsIndex | NkiTensor") -> "NkiTensor":
        """View with ``dim`` fixed at ``index`` (an int, or a 1-element tile / register read at
        run time) and removed."""
        self._keep_partition("select", dim == 0)
        if isinstance(index, NkiTensor) or type(index).__name__ == "VirtualRegister":
            index = _scalar_value(index)
        key: list[object] = [slice(None)] * self.ndim
        key[dim] = index
        return self[tuple(key)]

    def reshape(self, *shape: int | Shape) -> "NkiTensor":
        """View with a new shape over the same elements (no copy)."""
        # One argument that is not an int is the shape itself.
        sizes = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        dims = tuple(operator.index(s) for s in cast("Sequence[SupportsIndex]", sizes))
        if -1 not in dims and math.prod(dims) != self.size:
            fail(
                "reshape",
                f"cannot reshape {self.shape} ({self.size} elements) into {dims} "
                f"({math.prod(dims)} elements)",
            )
        self._keep_partition("reshape", self.buffer.on_chip and dims[0] != self.shape[0])
        try:
            return self._derive(self.host.view(dims))
        except RuntimeError:
            fail(
                "reshape",
                f"view {self.shape} with strides {self.strides} is not contiguous "
                "on the reshaped dimensions; copy it first",
            )

    def flatten_dims(self, start: int, end: int) -> "NkiTensor":
        """Merge dims ``start..end`` (inclusive) into one."""
        shape = (
            self.shape[:start] + (math.prod(self.shape[start : end + 1]),) + self.shape[end + 1 :]
        )
        return self.reshape(shape)

    def reshape_dim(self, dim: int, shape: Shape) -> "NkiTensor":
        """Split ``dim`` into ``shape``."""
        return self.reshape(self.shape[:dim] + tuple(shape) + self.shape[dim + 1 :])

    def permute(self, *dims: int | Sequence[int]) -> "NkiTensor":
        """View with dims reordered."""
        dims = tuple(dims[0]) if len(dims) == 1 and not isinstance(dims[0], int) else dims
        self._keep_partition("permute", dims[0] != 0)
        return self._derive(self.host.permute(dims))

    def expand_dim(self, dim: int) -> "NkiTensor":
        """View with a size-1 dim inserted at ``dim``."""
        self._keep_partition("expand_dim", dim == 0)
        return self._derive(self.host.unsqueeze(dim))

    def squeeze_dim(self, dim: int) -> "NkiTensor":
        """View with the size-1 dim ``dim`` removed."""
        self._keep_partition("squeeze_dim", dim == 0)
        if self.shape[dim] != 1:
            fail("squeeze_dim", f"dim {dim} has size {self.shape[dim]}, not 1")
        return self._derive(self.host.squeeze(dim))

    def broadcast(self, dim: int, size: int) -> "NkiTensor":
        """View repeating the size-1 dim ``dim`` ``size`` times (stride 0)."""
        self._keep_partition("broadcast", dim == 0)
        if self.shape[dim] != 1:
            fail("broadcast", f"dim {dim} has size {self.shape[dim]}, not 1")
        shape = list(self.shape)
        shape[dim] = size
        return self._derive(self.host.expand(shape))

    def broadcast_to(self, shape: Shape) -> "NkiTensor":
        """View broadcasting size-1 dims to ``shape``."""
        if legacy is not None:
            found = legacy.broadcast_to(self, shape)
            if found is not NotImplemented:
                return found
        shape = tuple(shape)
        self._keep_partition("broadcast_to", shape[0] != self.shape[0])
        return self._derive(self.host.expand(shape))

    def view(self, dtype: DTypeLike) -> "NkiTensor":
        """Reinterpret the bits as ``dtype``; the last dim rescales by the size ratio."""
        dtype = dtypes.normalize(dtype, "view")
        try:
            return self._derive(self.host.view(dtype.torch), dtype)
        except RuntimeError as e:
            fail(
                "view", f"cannot reinterpret {dtypes.name(self.dtype)} as {dtypes.name(dtype)}: {e}"
            )

    reinterpret_cast = view

    def _retyped(self, dtype):
        """This view's storage seen as ``dtype`` (same bytes): (base, origin, offset)."""
        if dtype.itemsize == self.itemsize:
            return self._base.view(dtype.torch), self._origin, self._offset
        size = dtype.itemsize
        origin_bytes = self._origin * self.itemsize
        offset_bytes = self._offset * self.itemsize
        if not (origin_bytes % size == 0 and offset_bytes % size == 0):
            fail(
                "ap",
                f"the view starts at byte {offset_bytes}, not aligned to {dtypes.name(dtype)} "
                f"({size} bytes)",
            )
        return reinterpret(self._base, dtype.torch), origin_bytes // size, offset_bytes // size

    def ap(
        self,
        pattern: Sequence[Sequence[int]],
        offset: SupportsIndex | None = None,
        *,
        scalar_offset: "SupportsIndex | NkiTensor | None" = None,
        vector_offset: "NkiTensor | None" = None,
        indirect_dim: int = 0,
        dtype: DTypeLike | None = None,
    ) -> "NkiTensor":
        """Raw access pattern ``[[stride, count], ...]`` over the allocation's logical layout,
        starting at this view's offset plus ``offset``; ``dtype`` reinterprets the bytes first."""
        require(
            vector_offset is None or scalar_offset is None,
            "ap",
            "vector_offset and scalar_offset are mutually exclusive",
        )
        require(self._index is None, "ap", "an indirect view cannot be re-indirected")
        dtype = self.dtype if dtype is None else dtypes.normalize(dtype, "ap")
        pattern = [tuple(operator.index(v) for v in pair) for pair in pattern]
        require(all(len(p) == 2 for p in pattern), "ap", "pattern entries must be [stride, count]")
        strides = [s for s, _ in pattern]
        shape = as_shape([c for _, c in pattern], "ap")
        base, origin, view_offset = self._retyped(dtype)
        probe = NkiTensor._make(self._alloc, base, dtype, shape, strides, view_offset, origin)
        row, pitch = probe._row, probe._pitch
        start = probe._logical(view_offset) + (0 if offset is None else operator.index(offset))
        if scalar_offset is not None:
            start += _scalar_value(scalar_offset) * self._indirect_stride(indirect_dim, dtype)
        if self.buffer.on_chip:
            if shape[0] > PMAX:
                fail("ap", f"partition dimension {shape[0]} exceeds maximum {PMAX}")
            if not (shape[0] == 1 or strides[0] == row):
                fail(
                    "ap", f"partition stride {strides[0]} must equal the storage's free size {row}"
                )
            strides[0] = pitch if shape[0] > 1 else strides[0]
        extent = self._alloc.nbytes // dtype.itemsize
        hi = start + sum((c - 1) * s for s, c in pattern)
        require(min(s for s, _ in pattern) >= 0, "ap", "negative strides are not supported")
        if vector_offset is not None:
            step = self._indirect_stride(indirect_dim, dtype)
            return probe._vector_indirect(shape, pattern, start, vector_offset, step)
        if start < 0 or hi >= extent:
            # Like a pointer, an out-of-bounds pattern is an error only once an instruction
            # accesses it; DMA with oob_mode.skip skips the out-of-bounds elements.
            view = NkiTensor._make(self._alloc, base, dtype, shape, strides, origin, origin)
            view._invalid = (
                f"access pattern covers elements [{start}, {hi}], outside the storage of {extent}"
            )
            if not self.buffer.on_chip:
                offsets = torch.tensor(origin + start)
                for stride, count in pattern:
                    offsets = offsets.unsqueeze(-1) + torch.arange(count) * stride
                view._index = offsets
            return view
        physical = probe._physical(start) if self.buffer.on_chip else origin + start
        return NkiTensor._make(self._alloc, base, dtype, shape, strides, physical, origin)

    def _indirect_stride(self, dim, dtype):
        """Elements (of ``dtype``) that one step of an indirect index moves: the logical stride of
        this tensor's dimension ``dim``."""
        dim = operator.index(dim)
        if not (0 <= dim < self.ndim):
            fail("ap", f"indirect_dim {dim} is not a dimension of {self.shape}")
        return self.strides[dim] * self.itemsize // dtype.itemsize

    def _vector_indirect(self, shape, pattern, start, vector_offset, step):
        """A gather/scatter view: partition ``p`` starts ``vector_offset[p] * step`` elements
        after ``start`` (replacing the pattern's partition stride); other dims as patterned."""
        where = "ap"
        require(not self.buffer.on_chip, where, "vector_offset indexes HBM tensors only")
        require(
            isinstance(vector_offset, NkiTensor) and vector_offset.buffer.on_chip,
            where,
            "vector_offset must be an SBUF tile of one index per partition",
        )
        if not (vector_offset.free_size == 1 and vector_offset.shape[0] == shape[0]):
            fail(
                where,
                f"vector_offset must be ({shape[0]}, 1) (one index per partition of the pattern), "
                f"got {vector_offset.shape}",
            )
        if vector_offset.dtype.is_floating_point:
            fail(where, f"vector_offset must hold integers, got {dtypes.name(vector_offset.dtype)}")
        idx = vector_offset.host.reshape(-1).to(torch.int64)
        offsets = (self._origin + start + idx * step).reshape([-1] + [1] * (len(shape) - 1))
        for d, (stride, count) in enumerate(pattern[1:], start=1):
            steps = torch.arange(count, dtype=torch.int64) * stride
            offsets = offsets + steps.reshape([-1 if a == d else 1 for a in range(len(shape))])
        strides = [s for s, _ in pattern]
        t = NkiTensor._make(
            self._alloc, self._base, self.dtype, shape, strides, start, self._origin
        )
        t._index = offsets.expand(shape).clone()
        return t

    # ---- arithmetic sugar (lowered to nl elementwise ops) ---------------------------------
    def _binary(self, name, other, reverse=False):
        fn = getattr(alu, name)
        return fn(other, self) if reverse else fn(self, other)

    def __add__(self, o):
        return self._binary("add", o)

    def __radd__(self, o):
        return self._binary("add", o, True)

    def __sub__(self, o):
        return self._binary("subtract", o)

    def __rsub__(self, o):
        return self._binary("subtract", o, True)

    def __mul__(self, o):
        return self._binary("multiply", o)

    def __rmul__(self, o):
        return self._binary("multiply", o, True)

    def __truediv__(self, o):
        return self._binary("divide", o)

    def __rtruediv__(self, o):
        return self._binary("divide", o, True)

    def __pow__(self, o):
        return self._binary("power", o)

    def __neg__(self):
        return self._binary("multiply", -1.0)

    def __iadd__(self, other):
        if legacy is None or legacy.iadd(self, other) is NotImplemented:
            alu.add(self, other, dst=self)
        return self

    def __isub__(self, other):
        alu.subtract(self, other, dst=self)
        return self

    def __imul__(self, other):
        alu.multiply(self, other, dst=self)
        return self


def _expand_key(key, ndim):
    """Expand ``...`` and pad missing trailing dims with full slices."""
    key = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in key):
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        fill = ndim - (len(key) - 1)
        key = key[:i] + (slice(None),) * fill + key[i + 1 :]
    if len(key) > ndim:
        fail("index", f"{len(key)} indices for a {ndim}-D tensor")
    return key + (slice(None),) * (ndim - len(key))


def _check_slice(s, size, dim):
    """Resolve a slice against ``size``; out-of-range bounds are errors, not clamped."""
    step = 1 if s.step is None else operator.index(s.step)
    if step <= 0:
        fail("index", f"slice step must be positive, got {step}")
    start = 0 if s.start is None else operator.index(s.start)
    stop = size if s.stop is None else operator.index(s.stop)
    start = start + size if start < 0 else start
    stop = stop + size if stop < 0 else stop
    if start > stop:
        fail("index", f"slice [{start}:{stop}] ends before it starts (dim {dim})")
    if not (start >= 0 and stop <= size):
        fail(
            "index", f"index range [{start}, {stop - 1}] exceeds dimension size {size} (dim {dim})"
        )
    return slice(start, stop, step)


def _scalar_value(v):
    """Integer value of a register or a 1-element tensor used as a dynamic offset."""
    if isinstance(v, NkiTensor):
        if v.size != 1:
            fail("ap", f"scalar_offset tensor must have 1 element, has {v.size}")
        return int(v.host.reshape(-1)[0].item())
    return operator.index(v)
