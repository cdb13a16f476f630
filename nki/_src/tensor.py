"""NkiTensor: a strided view (shape, strides, offset) over host storage in one memory space."""

import math
import operator

import torch

from . import alu, buffers, dtypes, runtime
from .errors import fail, require

PMAX = 128
MAX_DIMS = 5


class DynSlice:
    """``nl.ds(start, size)``: a slice of ``size`` elements beginning at ``start``."""

    __slots__ = ("start", "size")

    def __init__(self, start, size):
        self.start = operator.index(start)
        self.size = operator.index(size)

    def __repr__(self):
        return f"nl.ds({self.start}, {self.size})"


def ds(start, size):
    """Construct a dynamic slice for simple tensor indexing."""
    return DynSlice(start, size)


def as_shape(shape, op):
    """Normalize an int or sequence of ints into a shape tuple of positive ints."""
    if isinstance(shape, int) or hasattr(shape, "__index__"):
        shape = (shape,)
    shape = tuple(operator.index(s) for s in shape)
    require(len(shape) >= 1, op, "tensors need at least one dimension")
    require(len(shape) <= MAX_DIMS, op, f"{len(shape)} dimensions exceed the maximum of {MAX_DIMS}")
    require(all(s >= 1 for s in shape), op, f"shape {shape} has a non-positive dimension")
    return shape


def row_major(shape):
    """Contiguous strides for ``shape``."""
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return tuple(reversed(strides))


class NkiTensor:
    """A tensor view: storage in one buffer plus (shape, strides, offset) in elements."""

    __slots__ = ("_alloc", "_base", "shape", "strides", "_offset", "_origin")

    def __init__(self, alloc, base, shape, strides, offset, origin):
        self._alloc = alloc
        self._base = base  # torch tensor whose dtype and storage the view reads
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self._offset = offset  # absolute storage offset (torch as_strided units)
        self._origin = origin  # absolute offset of element 0 of the storage

    # ---- creation -------------------------------------------------------------------------
    @classmethod
    def allocate(cls, shape, dtype, buffer, name="", op="ndarray"):
        """Allocate storage, filled with the uninitialized-memory sentinel."""
        if not isinstance(buffer, buffers.Buffer):
            fail(op, f"buffer must be nl.sbuf, nl.psum or an HBM buffer, got {buffer!r}")
        shape = as_shape(shape, op)
        dtype = dtypes.normalize(dtype, op)
        ctx = runtime.current()
        if buffer.on_chip:
            dtypes.require_on_chip_dtype(dtype, op)
            require(shape[0] <= PMAX, op, f"partition dimension {shape[0]} exceeds maximum {PMAX}")
        numel = math.prod(shape)
        key = ctx.shared_key(name) if buffer is buffers.shared_hbm else None
        alloc = None if key is None else ctx.shared.get(key)
        if alloc is None:
            storage = torch.full((numel,), dtypes.sentinel(dtype), dtype=dtype)
            row_bytes = numel // shape[0] * dtype.itemsize
            alloc = ctx.allocator.new(storage, buffer, name, row_bytes, numel * dtype.itemsize)
            if key is not None:
                ctx.shared[key] = alloc
        require(
            alloc.storage.numel() == numel and alloc.storage.dtype == dtype,
            op,
            f"shared_hbm tensor {key} differs between SPMD instances",
        )
        return cls(alloc, alloc.storage, shape, row_major(shape), 0, 0)

    @classmethod
    def wrap(cls, t, buffer, name=""):
        """View a host torch tensor (a kernel argument) as an HBM tensor, without copying."""
        span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
        alloc = runtime.current().allocator.new(t, buffer, name, 0, span * t.element_size())
        return cls(alloc, t, t.shape, t.stride(), t.storage_offset(), t.storage_offset())

    # ---- attributes -----------------------------------------------------------------------
    @property
    def dtype(self):
        return self._base.dtype

    @property
    def buffer(self):
        return self._alloc.buffer

    @property
    def name(self):
        return self._alloc.name

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def itemsize(self):
        return self._base.element_size()

    @property
    def offset(self):
        """Element offset of this view from the start of its storage."""
        return self._offset - self._origin

    @property
    def host(self):
        """The torch view of this tensor's elements (writes land in the storage)."""
        return self._base.as_strided(self.shape, self.strides, self._offset)

    @property
    def free_size(self):
        """Elements per partition (dim 0 is the partition dim; a scalar view has one)."""
        return self.size // self.shape[0] if self.shape else 1

    def get_pattern(self):
        """The view as ``[[stride, count], ...]`` pairs, as accepted by ``ap``."""
        return [[s, c] for s, c in zip(self.strides, self.shape)]

    def is_contiguous(self):
        """True if the view covers its elements in dense row-major order."""
        return all(
            st == rm for st, rm, s in zip(self.strides, row_major(self.shape), self.shape) if s > 1
        )

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return (
            f"NkiTensor(shape={self.shape}, dtype={dtypes.name(self.dtype)}, "
            f"buffer={self.buffer!r}, strides={self.strides}, offset={self.offset})"
        )

    # ---- views ----------------------------------------------------------------------------
    def _derive(self, v):
        """Wrap a torch view of ``self.host`` as an NkiTensor over the same storage."""
        origin = self._origin
        base = self._base
        if v.dtype != base.dtype:
            origin = origin * base.element_size() // v.element_size()
            base = v
        return NkiTensor(self._alloc, base, v.shape, v.stride(), v.storage_offset(), origin)

    def _keep_partition(self, op, moved):
        """On-chip tensors must keep dim 0 as the partition dim."""
        if moved and self.buffer.on_chip:
            fail(op, "cannot change the partition dimension of an on-chip tensor")

    def __getitem__(self, key):
        key = _expand_key(key, self.ndim)
        on_chip = self.buffer.on_chip
        torch_key, dropped = [], []
        for dim, (k, size) in enumerate(zip(key, self.shape)):
            if isinstance(k, DynSlice):
                k = slice(k.start, k.start + k.size)
            if isinstance(k, slice):
                torch_key.append(_check_slice(k, size, dim))
            elif isinstance(k, NkiTensor):
                fail("index", "tensor-valued (dynamic) indices are not supported; use .ap()")
            else:
                idx = operator.index(k)
                idx = idx + size if idx < 0 else idx
                require(
                    0 <= idx < size, "index", f"index {k} exceeds dimension size {size} (dim {dim})"
                )
                if on_chip and dim == 0:
                    torch_key.append(slice(idx, idx + 1))
                else:
                    torch_key.append(idx)
                    dropped.append(dim)
        # On-chip views stay at least 2-D: keep the last dropped free dim at size 1.
        if on_chip and self.ndim - len(dropped) < 2 and dropped:
            dim = dropped[-1]
            torch_key[dim] = slice(torch_key[dim], torch_key[dim] + 1)
        return self._derive(self.host[tuple(torch_key)])

    def __setitem__(self, key, value):
        alu.assign(self[key], value)

    def slice(self, dim, start, end, step=1):
        """View of ``start:end:step`` along ``dim``."""
        key = [slice(None)] * self.ndim
        key[dim] = slice(start, end, step)
        return self[tuple(key)]

    def select(self, dim, index):
        """View with ``dim`` fixed at ``index`` and removed."""
        self._keep_partition("select", dim == 0)
        key = [slice(None)] * self.ndim
        key[dim] = index
        return self[tuple(key)]

    def reshape(self, *shape):
        """View with a new shape over the same elements (no copy)."""
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        shape = tuple(operator.index(s) for s in shape)
        if -1 not in shape:
            require(
                math.prod(shape) == self.size,
                "reshape",
                f"cannot reshape {self.shape} ({self.size} elements) into {shape} "
                f"({math.prod(shape)} elements)",
            )
        self._keep_partition("reshape", self.buffer.on_chip and shape[0] != self.shape[0])
        try:
            return self._derive(self.host.view(shape))
        except RuntimeError:
            fail(
                "reshape",
                f"view {self.shape} with strides {self.strides} is not contiguous "
                "on the reshaped dimensions; copy it first",
            )

    def flatten_dims(self, start, end):
        """Merge dims ``start..end`` (inclusive) into one."""
        shape = (
            self.shape[:start] + (math.prod(self.shape[start : end + 1]),) + self.shape[end + 1 :]
        )
        return self.reshape(shape)

    def reshape_dim(self, dim, shape):
        """Split ``dim`` into ``shape``."""
        return self.reshape(self.shape[:dim] + tuple(shape) + self.shape[dim + 1 :])

    def permute(self, *dims):
        """View with dims reordered."""
        dims = tuple(dims[0]) if len(dims) == 1 and not isinstance(dims[0], int) else dims
        self._keep_partition("permute", dims[0] != 0)
        return self._derive(self.host.permute(dims))

    def expand_dim(self, dim):
        """View with a size-1 dim inserted at ``dim``."""
        self._keep_partition("expand_dim", dim == 0)
        return self._derive(self.host.unsqueeze(dim))

    def squeeze_dim(self, dim):
        """View with the size-1 dim ``dim`` removed."""
        self._keep_partition("squeeze_dim", dim == 0)
        require(self.shape[dim] == 1, "squeeze_dim", f"dim {dim} has size {self.shape[dim]}, not 1")
        return self._derive(self.host.squeeze(dim))

    def broadcast(self, dim, size):
        """View repeating the size-1 dim ``dim`` ``size`` times (stride 0)."""
        self._keep_partition("broadcast", dim == 0)
        require(self.shape[dim] == 1, "broadcast", f"dim {dim} has size {self.shape[dim]}, not 1")
        shape = list(self.shape)
        shape[dim] = size
        return self._derive(self.host.expand(shape))

    def broadcast_to(self, shape):
        """View broadcasting size-1 dims to ``shape``."""
        shape = tuple(shape)
        self._keep_partition("broadcast_to", shape[0] != self.shape[0])
        return self._derive(self.host.expand(shape))

    def view(self, dtype):
        """Reinterpret the bits as ``dtype``; the last dim rescales by the size ratio."""
        dtype = dtypes.normalize(dtype, "view")
        try:
            return self._derive(self.host.view(dtype))
        except RuntimeError as e:
            fail(
                "view", f"cannot reinterpret {dtypes.name(self.dtype)} as {dtypes.name(dtype)}: {e}"
            )

    def ap(self, pattern, offset=None, *, scalar_offset=None, vector_offset=None, indirect_dim=0):
        """Raw access pattern ``[[stride, count], ...]`` over the storage (not composable)."""
        require(vector_offset is None, "ap", "vector_offset indirection is not supported")
        pattern = [tuple(operator.index(v) for v in pair) for pair in pattern]
        require(all(len(p) == 2 for p in pattern), "ap", "pattern entries must be [stride, count]")
        strides = tuple(s for s, _ in pattern)
        shape = as_shape([c for _, c in pattern], "ap")
        start = self._offset if offset is None else self._origin + operator.index(offset)
        if scalar_offset is not None:
            start += _scalar_value(scalar_offset) * strides[indirect_dim]
        if self.buffer.on_chip:
            row = self._alloc.row_bytes // self.itemsize
            require(
                shape[0] <= PMAX, "ap", f"partition dimension {shape[0]} exceeds maximum {PMAX}"
            )
            require(
                shape[0] == 1 or strides[0] == row,
                "ap",
                f"partition stride {strides[0]} must equal the storage's free size {row}",
            )
        extent = self._alloc.nbytes // self.itemsize
        lo = start - self._origin
        hi = lo + sum((c - 1) * s for s, c in pattern)
        require(min(strides) >= 0, "ap", "negative strides are not supported")
        require(
            lo >= 0 and hi < extent,
            "ap",
            f"access pattern covers elements [{lo}, {hi}], outside the storage of {extent}",
        )
        return NkiTensor(self._alloc, self._base, shape, strides, start, self._origin)

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
    require(len(key) <= ndim, "index", f"{len(key)} indices for a {ndim}-D tensor")
    return key + (slice(None),) * (ndim - len(key))


def _check_slice(s, size, dim):
    """Resolve a slice against ``size``; out-of-range bounds are errors, not clamped."""
    step = 1 if s.step is None else operator.index(s.step)
    require(step > 0, "index", f"slice step must be positive, got {step}")
    start = 0 if s.start is None else operator.index(s.start)
    stop = size if s.stop is None else operator.index(s.stop)
    start = start + size if start < 0 else start
    stop = stop + size if stop < 0 else stop
    require(start < stop, "index", f"empty slice [{start}:{stop}] (dim {dim})")
    require(
        start >= 0 and stop <= size,
        "index",
        f"index range [{start}, {stop - 1}] exceeds dimension size {size} (dim {dim})",
    )
    return slice(start, stop, step)


def _scalar_value(v):
    """Integer value of a register or a 1-element tensor used as a dynamic offset."""
    if isinstance(v, NkiTensor):
        require(v.size == 1, "ap", f"scalar_offset tensor must have 1 element, has {v.size}")
        return int(v.host.reshape(-1)[0].item())
    return operator.index(v)
