"""Pre-0.2 indexing: ``nl.arange`` / ``nl.mgrid`` expressions, masks, and tensor accesses.

Indexing a tensor with index expressions follows NumPy advanced indexing: the expressions
broadcast together into the shape of the result, and each result element selects one tensor
element.  When the selected elements form a strided pattern inside the tensor the result is
an ordinary ``NkiTensor`` view; otherwise (elements outside the tensor, which a mask must
exclude, or a gather through tile-valued indices) it is an ``Access``, which the old-API
instructions resolve when they run.
"""

import contextlib
import math
import numbers
import operator

import numpy as np
import torch

from nki._src.legacy_api import DynSlice, check_slice, fail, require
from nki.isa import VirtualRegister
from nki.language import NkiTensor

_old_kernels = []


@contextlib.contextmanager
def running_old_kernel():
    """Mark the extent of a pre-0.2 kernel body (some old semantics apply only there)."""
    _old_kernels.append(True)
    try:
        yield
    finally:
        _old_kernels.pop()


def old_kernel_running():
    """True while a pre-0.2 kernel body runs."""
    return bool(_old_kernels)


def _int_operand(v):
    """The integer value(s) of an arithmetic operand of an index expression, or None."""
    if isinstance(v, IndexExpr):
        return v.values
    if isinstance(v, (numbers.Integral, VirtualRegister)):
        return operator.index(v)
    return None


class IndexExpr:
    """Integer index values laid out on axes (``nl.arange(128)[:, None]``), with affine
    arithmetic; comparisons give a ``Predicate`` (a mask)."""

    __slots__ = ("values",)
    # NumPy scalars on the left of an operator defer to the reflected method below.
    __array_ufunc__ = None

    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.int64)

    @property
    def shape(self):
        return self.values.shape

    @property
    def ndim(self):
        return self.values.ndim

    def __getitem__(self, key):
        return IndexExpr(self.values[key])

    def __array__(self, dtype=None, copy=None):
        return self.values if dtype is None else self.values.astype(dtype)

    def __repr__(self):
        return f"IndexExpr(shape={self.shape})"

    def _apply(self, other, fn, reverse=False):
        value = _int_operand(other)
        if value is None:
            return NotImplemented
        return IndexExpr(fn(value, self.values) if reverse else fn(self.values, value))

    def _compare(self, other, fn):
        value = _int_operand(other)
        if value is None:
            if isinstance(other, numbers.Real):
                value = other
            else:
                return NotImplemented
        return Predicate(fn(self.values, value))

    def __add__(self, o):
        return self._apply(o, operator.add)

    def __radd__(self, o):
        return self._apply(o, operator.add, True)

    def __sub__(self, o):
        return self._apply(o, operator.sub)

    def __rsub__(self, o):
        return self._apply(o, operator.sub, True)

    def __mul__(self, o):
        return self._apply(o, operator.mul)

    def __rmul__(self, o):
        return self._apply(o, operator.mul, True)

    def __floordiv__(self, o):
        return self._apply(o, operator.floordiv)

    def __rfloordiv__(self, o):
        return self._apply(o, operator.floordiv, True)

    def __mod__(self, o):
        return self._apply(o, operator.mod)

    def __rmod__(self, o):
        return self._apply(o, operator.mod, True)

    def __neg__(self):
        return IndexExpr(-self.values)

    def __pos__(self):
        return self

    def __lt__(self, o):
        return self._compare(o, operator.lt)

    def __le__(self, o):
        return self._compare(o, operator.le)

    def __gt__(self, o):
        return self._compare(o, operator.gt)

    def __ge__(self, o):
        return self._compare(o, operator.ge)

    def __eq__(self, o):
        return self._compare(o, operator.eq)

    def __ne__(self, o):
        return self._compare(o, operator.ne)

    __hash__ = None


class Predicate:
    """A mask: a condition on index expressions, combined with ``&``, ``|``, ``^`` and ``~``.

    Like the old API's predicates it has no truth value of its own (any object is true), so
    ``a and b`` evaluates to ``b``; use ``&`` to combine conditions.
    """

    __slots__ = ("values",)
    __array_ufunc__ = None

    def __init__(self, values):
        self.values = np.asarray(values, dtype=bool)

    @property
    def shape(self):
        return self.values.shape

    def __array__(self, dtype=None, copy=None):
        return self.values if dtype is None else self.values.astype(dtype)

    def __repr__(self):
        return f"Predicate(shape={self.shape}, true={int(self.values.sum())})"

    def _combine(self, other, fn):
        if isinstance(other, Predicate):
            return Predicate(fn(self.values, other.values))
        if isinstance(other, (bool, np.bool_)):
            return Predicate(fn(self.values, bool(other)))
        return NotImplemented

    def __and__(self, o):
        return self._combine(o, operator.and_)

    __rand__ = __and__

    def __or__(self, o):
        return self._combine(o, operator.or_)

    __ror__ = __or__

    def __xor__(self, o):
        return self._combine(o, operator.xor)

    __rxor__ = __xor__

    def __invert__(self):
        return Predicate(~self.values)

    def box(self):
        """Per-axis ``slice`` objects when the true elements form one box, else None."""
        m = self.values
        ranges = []
        for axis in range(m.ndim):
            others = tuple(a for a in range(m.ndim) if a != axis)
            line = m.any(axis=others) if others else m
            hits = np.flatnonzero(line)
            if hits.size == 0:
                return tuple(slice(0, 0) for _ in range(m.ndim))
            lo, hi = int(hits[0]), int(hits[-1]) + 1
            if hits.size != hi - lo:
                return None
            ranges.append((lo, hi))
        inside = np.ones(m.shape, dtype=bool)
        for axis, (lo, hi) in enumerate(ranges):
            line = np.zeros(m.shape[axis], dtype=bool)
            line[lo:hi] = True
            inside = inside & line.reshape([-1 if a == axis else 1 for a in range(m.ndim)])
        if not np.array_equal(inside, m):
            return None
        return tuple(slice(lo, hi) for lo, hi in ranges)


def arange(*args):
    """``nl.arange(stop)`` / ``nl.arange(start, stop[, step])``: a 1-D index expression."""
    return IndexExpr(np.arange(*(operator.index(a) for a in args)))


class Grid(tuple):
    """The ``nl.mgrid[...]`` result: one index expression per axis, also named ``.p`` (the
    partition axis), ``.x``, ``.y`` and ``.z``."""

    _NAMES = ("p", "x", "y", "z")

    def __getattr__(self, name):
        if name in self._NAMES and self._NAMES.index(name) < len(self):
            return self[self._NAMES.index(name)]
        raise AttributeError(f"mgrid of {len(self)} axes has no attribute {name!r}")


class _MGrid:
    """``nl.mgrid[0:128, 0:512]``: dense index grids, as ``numpy.mgrid``."""

    def __getitem__(self, key):
        if isinstance(key, slice):
            return IndexExpr(np.mgrid[key])
        return Grid(IndexExpr(g) for g in np.mgrid[key])

    def __repr__(self):
        return "nl.mgrid"


mgrid = _MGrid()


def _is_advanced(entry):
    return isinstance(entry, (IndexExpr, NkiTensor, np.ndarray, list))


def claims(t, key):
    """True if indexing ``t`` with ``key`` needs the pre-0.2 semantics."""
    entries = key if isinstance(key, tuple) else (key,)
    if any(isinstance(e, (IndexExpr, np.ndarray, list)) for e in entries):
        return True
    return any(isinstance(e, NkiTensor) for e in entries) and old_kernel_running()


def _entries(key, ndim):
    """The key as one entry per tensor dimension (``...`` expanded, missing dims full)."""
    entries = list(key) if isinstance(key, tuple) else [key]
    if any(e is Ellipsis for e in entries):
        i = next(i for i, e in enumerate(entries) if e is Ellipsis)
        entries[i : i + 1] = [slice(None)] * (ndim - len(entries) + 1)
    require(len(entries) <= ndim, "index", f"{len(entries)} indices for a {ndim}-D tensor")
    return entries + [slice(None)] * (ndim - len(entries))


def _advanced_values(entry):
    """(int64 values, comes from tile data) of an advanced index entry."""
    if isinstance(entry, NkiTensor):
        require(
            not entry.dtype.is_floating_point,
            "index",
            f"a tile used as an index must hold integers, got {entry.dtype}",
        )
        return entry.host.to(torch.int64).numpy(), True
    if isinstance(entry, IndexExpr):
        return entry.values, False
    return np.asarray(entry, dtype=np.int64), False


class Access:
    """Elements of ``tensor`` selected by index expressions that do not form a strided view.

    ``offsets`` are element offsets in the allocation's logical layout (as ``t.offset``),
    ``inbounds`` marks the positions inside the tensor and ``flat`` their row-major element
    numbers (for out-of-bounds messages).  ``indirect`` says whether tile data chose them.
    """

    __slots__ = ("tensor", "offsets", "inbounds", "flat", "indirect")

    def __init__(self, tensor, offsets, inbounds, flat, indirect):
        self.tensor = tensor
        self.offsets = offsets
        self.inbounds = inbounds
        self.flat = flat
        self.indirect = indirect

    @property
    def shape(self):
        return self.offsets.shape

    @property
    def ndim(self):
        return self.offsets.ndim

    @property
    def dtype(self):
        return self.tensor.dtype

    @property
    def buffer(self):
        return self.tensor.buffer

    @property
    def itemsize(self):
        return self.tensor.itemsize

    @property
    def size(self):
        return self.offsets.size

    def __repr__(self):
        kind = "gather" if self.indirect else "access"
        return f"<{kind} of {self.shape} elements of {self.tensor!r}>"

    def restrict(self, box):
        """The sub-access of the positions in ``box`` (one slice per axis)."""
        return Access(
            self.tensor, self.offsets[box], self.inbounds[box], self.flat[box], self.indirect
        )

    def out_of_bounds(self, where):
        """Fail for the first position outside the tensor (a mask must exclude it)."""
        first = tuple(int(i) for i in np.argwhere(~self.inbounds)[0])
        fail(
            where,
            f"index expression reaches outside tensor {self.tensor.shape} at result position "
            f"{first}; add a mask= excluding it",
        )

    def view(self):
        """The ``NkiTensor`` view these elements form, or None if they form no strided view."""
        if self.indirect or not self.inbounds.all():
            return None
        offsets = self.offsets
        start = int(offsets.flat[0])
        pattern = []
        expected = np.full(offsets.shape, start, dtype=np.int64)
        for axis, size in enumerate(offsets.shape):
            stride = 0
            if size > 1:
                unit = [0] * offsets.ndim
                unit[axis] = 1
                stride = int(offsets[tuple(unit)]) - start
                if stride < 0:
                    return None
                expected = expected + stride * np.arange(size).reshape(
                    [-1 if a == axis else 1 for a in range(offsets.ndim)]
                )
            pattern.append([stride, size])
        if not np.array_equal(expected, offsets):
            return None
        return self.tensor.ap(pattern, offset=start - self.tensor.offset)

    def _whole(self):
        """(torch view of the whole allocation, index tuple of the selected elements)."""
        t = self.tensor
        if t.buffer.on_chip:
            row = t._alloc.row_bytes // t.itemsize
            whole = t.ap([[row, t._alloc.nbytes // t._alloc.row_bytes], [1, row]], -t.offset)
            picks = np.divmod(self.offsets, row)
        else:
            whole = t.ap([[1, t._alloc.nbytes // t.itemsize]], -t.offset)
            picks = (self.offsets,)
        return whole.host, tuple(torch.from_numpy(np.ascontiguousarray(p)) for p in picks)

    def read(self, keep=None):
        """The selected elements' values (positions outside ``keep``, if given, read element 0)."""
        host, picks = self._whole()
        if keep is not None:
            picks = tuple(torch.where(keep, p, 0) for p in picks)
        return host[picks]

    def write(self, values, keep=None):
        """Store ``values`` (shaped like this access) at the selected elements in ``keep``."""
        host, picks = self._whole()
        if keep is not None:
            picks = tuple(p[keep] for p in picks)
            values = values[keep]
        host[picks] = values.to(host.dtype)

    def contiguous_bytes(self):
        """Bytes per contiguous run along the last axis (a DMA descriptor's size)."""
        last = self.offsets.reshape(-1, self.shape[-1])
        dense = self.shape[-1] > 1 and bool((np.diff(last, axis=1) == 1).all())
        return self.itemsize * (self.shape[-1] if dense else 1)


def access(t, key):
    """``t[key]`` with the pre-0.2 semantics: an ``NkiTensor`` view when the elements form
    one, else an ``Access``."""
    entries = _entries(key, t.ndim)
    advanced = any(_is_advanced(e) for e in entries)
    values, slices, dropped, tiles = {}, {}, [], set()
    for dim, (entry, size) in enumerate(zip(entries, t.shape)):
        if isinstance(entry, DynSlice):
            entry = slice(entry.start, entry.start + entry.size)
        if isinstance(entry, slice):
            s = check_slice(entry, size, dim)
            slices[dim] = np.arange(s.start, s.stop, s.step)
        elif _is_advanced(entry):
            values[dim], from_tile = _advanced_values(entry)
            if from_tile:
                tiles.add(dim)
        elif entry is None:
            fail("index", "None (newaxis) is not supported in tensor indices")
        else:
            idx = operator.index(entry)
            idx = idx + size if idx < 0 else idx
            require(0 <= idx < size, "index", f"index {entry} exceeds dimension size {size}")
            if advanced:
                values[dim] = np.asarray(idx, dtype=np.int64)
            else:
                dropped.append((dim, idx))
    # NumPy's layout: adjacent advanced indices put their broadcast shape in their place,
    # otherwise it goes first; sliced dims keep their order around it.
    # A tile of indices holds one index per partition: its missing trailing dims are size 1.
    rank = max((v.ndim for v in values.values()), default=0)
    for d in tiles:
        values[d] = values[d].reshape(values[d].shape + (1,) * (rank - values[d].ndim))
    adv = sorted(values)
    bshape = np.broadcast_shapes(*(values[d].shape for d in adv)) if adv else ()
    adjacent = adv == list(range(adv[0], adv[-1] + 1)) if adv else True
    before = [d for d in slices if adv and adjacent and d < adv[0]]
    after = [d for d in slices if d not in before]
    shape = tuple(len(slices[d]) for d in before) + bshape + tuple(len(slices[d]) for d in after)
    positions = {d: i for i, d in enumerate(before)}
    positions.update({d: len(before) + len(bshape) + i for i, d in enumerate(after)})
    per_dim = {}
    for d in adv:
        v = np.broadcast_to(values[d], bshape)
        per_dim[d] = v.reshape((1,) * len(before) + bshape + (1,) * len(after))
    for d, r in slices.items():
        per_dim[d] = r.reshape([-1 if a == positions[d] else 1 for a in range(len(shape))])
    for d, idx in dropped:
        per_dim[d] = np.asarray(idx, dtype=np.int64)
    offsets = np.full(shape, t.offset, dtype=np.int64)
    flat = np.zeros(shape, dtype=np.int64)
    inbounds = np.ones(shape, dtype=bool)
    row_major = [math.prod(t.shape[d + 1 :]) for d in range(t.ndim)]
    for d, idx in per_dim.items():
        offsets = offsets + idx * t.strides[d]
        flat = flat + idx * row_major[d]
        inbounds = inbounds & (idx >= 0) & (idx < t.shape[d])
    if not shape:
        offsets, flat, inbounds = offsets.reshape(1), flat.reshape(1), inbounds.reshape(1)
    found = Access(t, offsets, inbounds, flat, bool(tiles))
    view = found.view()
    return found if view is None else view
