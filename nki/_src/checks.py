"""Validation rules shared by the instructions; each failure names the rule and the sizes."""

import numbers

from . import buffers, dtypes
from .enums import engine as Engine
from .errors import fail
from .tensor import PMAX, NkiTensor

ON_CHIP = (buffers.sbuf, buffers.psum)


def tensor(op, label, t):
    """``t`` must be an NKI tensor."""
    if not isinstance(t, NkiTensor):
        fail(op, f"{label} must be an NKI tensor, got {type(t).__name__}")
    return t


def buffer(op, label, t, *allowed):
    """``t`` must live in one of ``allowed``."""
    if t.buffer not in allowed:
        names = " or ".join(b.name.upper() if b.on_chip else b.name for b in allowed)
        fail(op, f"{label} must be in {names}, got {t.buffer.name}")


def partitions(op, label, t, limit=PMAX):
    """The partition dimension of ``t`` must not exceed ``limit``."""
    if t.shape[0] > limit:
        fail(op, f"{label} partition dimension {t.shape[0]} exceeds maximum {limit}")


def on_chip(op, label, t, *allowed):
    """``t`` is an SBUF/PSUM tile (or in ``allowed``) with at most 128 partitions."""
    # Every instruction checks its tiles: the rules' own functions run (and word the error)
    # only when one fails.
    if not isinstance(t, NkiTensor):
        tensor(op, label, t)
    if t.buffer not in (allowed or ON_CHIP):
        buffer(op, label, t, *(allowed or ON_CHIP))
    if t.shape[0] > PMAX:
        partitions(op, label, t)
    return t


def same_partitions(op, a_label, a, b_label, b):
    """``a`` and ``b`` must use the same number of partitions."""
    if a.shape[0] != b.shape[0]:
        fail(
            op,
            f"partition dimension mismatch: {a_label} has {a.shape[0]}, {b_label} has {b.shape[0]}",
        )


def same_dtype(op, a_label, a, b_label, b, why=""):
    """``a`` and ``b`` must have one dtype (``why``: the instruction's reason, e.g. no cast)."""
    if a.dtype != b.dtype:
        fail(
            op,
            f"{a_label} dtype {dtypes.name(a.dtype)} must equal {b_label} dtype "
            f"{dtypes.name(b.dtype)}" + (f" ({why})" if why else ""),
        )


def dtype_in(op, label, t, *allowed):
    """``t``'s dtype must be one of ``allowed``."""
    if t.dtype not in allowed:
        names = [dtypes.name(d) for d in allowed]
        choices = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        fail(op, f"{label} dtype {dtypes.name(t.dtype)} must be {choices}")


def same_free(op, a_label, a, b_label, b):
    """``a`` and ``b`` must hold the same number of elements per partition."""
    if a.free_size != b.free_size:
        fail(
            op,
            f"free size mismatch: {a_label} has {a.free_size} elements per partition, "
            f"{b_label} has {b.free_size}",
        )


def same_tile(op, a_label, a, b_label, b):
    """Same partitions and same elements per partition."""
    if a.shape[0] != b.shape[0] or a.size != b.size:
        same_partitions(op, a_label, a, b_label, b)
        same_free(op, a_label, a, b_label, b)


def not_both_psum(op, a_label, a, b_label, b):
    """Two streamed inputs cannot both come from PSUM."""
    if a.buffer is buffers.psum and b.buffer is buffers.psum:
        fail(op, f"{a_label} and {b_label} cannot both be in PSUM")


def operand(op, label, v, parts):
    """A per-partition operand: a scalar or a ``(parts, 1)`` on-chip tile."""
    if isinstance(v, NkiTensor):
        on_chip(op, label, v)
        if not (v.shape[0] == parts and v.free_size == 1):
            fail(op, f"{label} must be a scalar or a ({parts}, 1) tile, got {v.shape}")
    elif not isinstance(v, numbers.Number):
        fail(op, f"{label} must be a scalar or a tile, got {type(v).__name__}")
    return v


def tile_pair(op, dst, first, second, scalar):
    """Checks an instruction on two full tiles and a per-partition scalar; returns the partition
    count. ``first``, ``second`` and ``scalar`` are (label, value) pairs."""
    (a_label, a), (b_label, b), (s_label, s) = first, second, scalar
    for label, t in (("dst", dst), (a_label, a), (b_label, b)):
        on_chip(op, label, t)
    same_tile(op, "dst", dst, a_label, a)
    same_tile(op, "dst", dst, b_label, b)
    not_both_psum(op, a_label, a, b_label, b)
    parts = a.shape[0]
    operand(op, s_label, s, parts)
    return parts


def engine(op, value, *allowed):
    """``value`` must be an ``nki.isa.engine`` member from ``allowed``; raw ints are rejected."""
    if not isinstance(value, Engine):
        fail(op, f"engine must be an nki.isa.engine member, got {value!r}")
    if value is not Engine.unknown and value not in allowed:
        fail(
            op,
            f"engine {value.name} is not supported; use one of "
            + ", ".join(e.name for e in allowed),
        )
    return value


def gpsimd_no_psum(op, eng, *tiles):
    """GpSimd cannot access PSUM."""
    if eng is Engine.gpsimd and any(t.buffer is buffers.psum for t in tiles):
        fail(op, "the gpsimd engine cannot access PSUM")
