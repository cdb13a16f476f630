"""Issuing an instruction: capacity check, written-state update and the trace record."""

from dataclasses import dataclass

import torch

from . import buffers, runtime
from .tensor import NkiTensor, row_major


@dataclass(frozen=True)
class Instr:
    """One executed ISA instruction, as seen by the cost model."""

    name: str
    engine: str  # tensor | vector | scalar | gpsimd | dma
    reads: tuple  # allocation ids read
    writes: tuple  # allocation ids written
    on_chip_writes: tuple  # subset of writes that are SBUF/PSUM (reuse hazards)
    free: int  # elements per partition streamed by the engine
    inputs: int  # number of streamed tile operands
    narrow: bool  # every streamed operand is <= 2 bytes wide
    nbytes: int = 0  # DMA: bytes moved
    chunk: int = 0  # DMA: contiguous bytes per descriptor
    moving: int = 0  # nc_matmul: moving free size
    fp32: bool = False  # nc_matmul: 4-pass fp32 operands
    double_row: bool = False
    flops: int = 0  # nc_matmul: 2*K*M*N


def contiguous_run(t):
    """Contiguous bytes per access run of a view (per partition for on-chip tensors)."""
    run, expected = 1, 1
    dims = list(zip(t.shape, t.strides))
    if t.buffer.on_chip:
        dims = dims[1:]
    for size, stride in reversed(dims):
        if size == 1:
            continue
        if stride != expected:
            break
        run *= size
        expected *= size
    return run * t.itemsize


def _psum_flags(t):
    """The PSUM written-flags over every byte of the elements of view ``t``:
    shape ``t.shape + (itemsize,)``, in the allocation's logical byte layout."""
    size = t.itemsize
    strides = tuple(s * size for s in t.strides) + (1,)
    return t._alloc.psum_written.as_strided(t.shape + (size,), strides, t.offset * size)


def _covers_allocation(t):
    """True if view ``t`` reaches every element of its allocation exactly once."""
    if t.size * t.itemsize != t._alloc.nbytes or t.offset != 0:
        return False
    return all(st == rm for n, st, rm in zip(t.shape, t.strides, row_major(t.shape)) if n > 1)


def mark_written(t):
    """Record that the elements of ``t`` now hold defined data."""
    alloc = t._alloc
    alloc.written = True
    if alloc.buffer is not buffers.psum or alloc.psum_complete:
        return
    if _covers_allocation(t):
        alloc.psum_complete = True
        return
    if alloc.psum_written is None:
        alloc.psum_written = torch.zeros(alloc.nbytes, dtype=torch.bool)
    _psum_flags(t).fill_(True)


_WORDS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def psum_written(t):
    """Which PSUM elements of ``t`` were written before: True (all of them), False (none) or a
    bool tensor of ``t``'s shape. Each element's byte flags are read as one integer, all set
    when it is 0x01 repeated (torch's bool reduction over the byte axis is slow)."""
    alloc = t._alloc
    if alloc.psum_complete:
        return True
    if alloc.psum_written is None:
        return False
    size = t.itemsize
    words = _psum_flags(t).view(torch.uint8).view(_WORDS[size])[..., 0]
    return words == int.from_bytes(b"\x01" * size, "little")


def issue(name, engine, dsts, srcs, *, reads=(), free=None, **cost):
    """Account for an executed instruction: capacity, written state and the trace.

    ``srcs`` are the operands the engine streams; ``reads`` are further (per-partition
    scalar) operands that only matter as dependencies.
    """
    ctx = runtime.current()
    world = ctx.world
    if world is not None and world.interleave:
        world.tick(ctx.instance)
    used = [t._alloc for ts in (dsts, srcs, reads) for t in ts if isinstance(t, NkiTensor)]
    ctx.allocator.step(name, used)
    for d in dsts:
        mark_written(d)
    if ctx.recorder is None:
        return
    extra = [r for r in reads if isinstance(r, NkiTensor)]
    streamed = list(srcs) or list(dsts)
    ctx.recorder.append(
        Instr(
            name=name,
            engine=engine,
            reads=tuple(t._alloc.index for t in list(srcs) + extra),
            writes=tuple(d._alloc.index for d in dsts),
            on_chip_writes=tuple(d._alloc.index for d in dsts if d.buffer.on_chip),
            free=free if free is not None else max(t.free_size for t in streamed),
            inputs=len(srcs),
            narrow=all(t.itemsize <= 2 for t in streamed),
            **cost,
        )
    )
