"""On-chip memory: live SBUF/PSUM bytes per partition checked per instruction, and the
physical memory that tiles placed with ``nl.ndarray(address=...)`` live in."""

import gc
import itertools
import operator
import weakref

import torch

from . import buffers
from .errors import fail

PARTITIONS = 128
# Fresh physical memory reads as NaN in every float format (and -1 in integer ones).
UNINITIALIZED_BYTE = 0xFF


class Allocation:
    """Backing storage of one tensor (an ``nl.ndarray`` or a kernel argument)."""

    __slots__ = (
        "storage",
        "buffer",
        "name",
        "dtype",
        "row_bytes",
        "pitch_bytes",
        "origin_bytes",
        "partition0",
        "col_bytes",
        "nbytes",
        "partition_bytes",
        "written",
        "psum_complete",
        "psum_written",
        "index",
        "usage",
        "__weakref__",
    )

    def __init__(self, storage, buffer, name, row_bytes, nbytes, partition_bytes, index):
        self.storage = storage  # any torch tensor over the storage
        self.buffer = buffer
        self.name = name
        self.dtype = None  # the NKI dtype the allocation was made with
        self.row_bytes = row_bytes  # logical bytes per partition
        self.pitch_bytes = row_bytes  # bytes between partitions in the storage
        self.origin_bytes = 0  # storage byte of the allocation's first element
        self.partition0 = 0  # first physical partition (placed tiles)
        self.col_bytes = 0  # byte offset within each partition (placed tiles)
        self.nbytes = nbytes  # addressable (logical) extent
        self.partition_bytes = partition_bytes  # footprint counted against capacity
        self.written = False
        # PSUM remembers which bytes were written so nc_matmul(accumulate=None) knows whether
        # to overwrite or accumulate: psum_complete once every byte was, else per-byte flags in
        # the allocation's logical layout, made by the first write that covers only a part.
        self.psum_complete = False
        self.psum_written = None
        self.index = index  # stable id for dependency tracking in the cost model
        self.usage = None  # on-chip: the Usage record of its lifetime


class Usage:
    """The footprint of one on-chip allocation and the instructions that first and last use it."""

    __slots__ = ("buffer", "footprint", "span", "first", "last")

    def __init__(self, buffer, footprint, span):
        self.buffer = buffer
        self.footprint = footprint  # bytes per partition (automatic allocations)
        self.span = span  # (first byte, end byte) per partition of a placed tile, else None
        self.first = None
        self.last = None


class Allocator:
    """On-chip memory of one kernel instance, checked against the target's capacity.

    Inside a launched kernel a tile occupies memory from the first to the last instruction that
    uses it, as the compiler allocates it; the check runs over that schedule when the kernel
    returns (``finish``).  Outside a kernel (instructions called directly) a tile is live while
    any view of it is reachable from Python, checked at every instruction.  Placed tiles
    (``address=``) occupy their byte ranges; overlapping placements share memory and count once.
    """

    def __init__(self, target, deferred=False):
        self.target = target
        self.deferred = deferred
        self.live = {buffers.sbuf: 0, buffers.psum: 0}
        self.peak = {buffers.sbuf: 0, buffers.psum: 0}
        self.placed = {buffers.sbuf: weakref.WeakSet(), buffers.psum: weakref.WeakSet()}
        self.physical = {}
        self.count = 0
        self.usages = []
        self.steps = []  # instruction name of each step

    def capacity(self, buffer):
        """Bytes per partition available in ``buffer``."""
        t = self.target
        return t.sbuf_partition_bytes if buffer is buffers.sbuf else t.psum_partition_bytes

    def footprint(self, buffer, partition_bytes):
        """Bytes per partition an allocation occupies; PSUM is handed out in whole 2 KiB banks."""
        if buffer is buffers.psum:
            bank = self.target.psum_bank_bytes
            return -(-partition_bytes // bank) * bank
        return partition_bytes

    def _track(self, alloc, footprint, span):
        alloc.usage = Usage(alloc.buffer, footprint, span)
        self.usages.append(alloc.usage)

    def new(self, storage, buffer, name, row_bytes, nbytes):
        """Register a fresh allocation; reject a single tile larger than the whole memory."""
        self.count += 1
        if not buffer.on_chip:
            return Allocation(storage, buffer, name, row_bytes, nbytes, 0, self.count)
        footprint = self.footprint(buffer, row_bytes)
        if footprint > self.capacity(buffer):
            self._overflow("ndarray", buffer, footprint)
        alloc = Allocation(storage, buffer, name, row_bytes, nbytes, footprint, self.count)
        self._track(alloc, footprint, None)
        if not self.deferred:
            # Reachability is the liveness rule only outside a launch (see the class doc).
            self.live[buffer] += footprint
            weakref.finalize(alloc, self._release, buffer, footprint)
        return alloc

    def place(self, buffer, name, partitions, row_bytes, address, op):
        """An allocation at ``address = (partition, byte)`` of the instance's physical memory."""
        if not (isinstance(address, (tuple, list)) and len(address) == 2):
            fail(op, f"address must be a (partition_offset, free_offset) pair, got {address!r}")
        partition, col = (operator.index(a) for a in address)
        cap = self.capacity(buffer)
        if not (0 <= partition and partition + partitions <= PARTITIONS):
            fail(
                op,
                f"address partition {partition} with {partitions} partitions exceeds the "
                f"{PARTITIONS} partitions of {buffer.name.upper()}",
            )
        if not (0 <= col and col + row_bytes <= cap):
            fail(
                op,
                f"address bytes [{col}, {col + row_bytes}) exceed the {cap} bytes per partition of "
                f"{buffer.name.upper()} on {self.target.name}",
            )
        if buffer is buffers.psum:
            bank = self.target.psum_bank_bytes
            if col % bank != 0:
                fail(
                    op,
                    f"a PSUM tile must start at a bank boundary (multiple of {bank} bytes), "
                    f"got {col}",
                )
        memory = self.physical.get(buffer)
        if memory is None:
            memory = torch.full((PARTITIONS * cap,), UNINITIALIZED_BYTE, dtype=torch.uint8)
            self.physical[buffer] = memory
        self.count += 1
        alloc = Allocation(memory, buffer, name, row_bytes, partitions * row_bytes, 0, self.count)
        alloc.pitch_bytes = cap
        alloc.origin_bytes = partition * cap + col
        alloc.partition0 = partition
        alloc.col_bytes = col
        self._track(alloc, 0, (col, col + row_bytes))
        self.placed[buffer].add(alloc)
        return alloc

    def _release(self, buffer, footprint):
        self.live[buffer] -= footprint

    def used(self, buffer):
        """Bytes per partition of ``buffer`` held by reachable tiles."""
        spans = [a.usage.span for a in self.placed[buffer]]
        return self.live[buffer] + _union(spans)

    def step(self, name, allocations):
        """An instruction ran using ``allocations``: extend their lifetimes, and outside a kernel
        check that the reachable tiles fit."""
        now = len(self.steps)
        self.steps.append(name)
        for alloc in allocations:
            usage = alloc.usage
            if usage is not None:
                if usage.first is None:
                    usage.first = now
                usage.last = now
        if self.deferred:
            return
        for buffer in self.live:
            used = self.used(buffer)
            if used > self.capacity(buffer):
                # Tiles kept only by reference cycles (e.g. tracebacks) are not live.
                gc.collect()
                used = self.used(buffer)
            self.peak[buffer] = max(self.peak[buffer], used)
            if used > self.capacity(buffer):
                self._overflow(name, buffer, used)

    def finish(self):
        """Check the kernel's schedule: at every instruction, the tiles used before and after it
        must fit in SBUF and PSUM."""
        for buffer in self.live:
            used, step = self._schedule_peak(buffer)
            self.peak[buffer] = used
            if used > self.capacity(buffer):
                self._overflow(self.steps[step], buffer, used)

    def _schedule_peak(self, buffer):
        """(peak bytes per partition, first instruction at the peak) over the schedule."""
        steps = len(self.steps)
        usages = [u for u in self.usages if u.buffer is buffer and u.first is not None]
        if not usages or not steps:
            return 0, 0
        # Python ints: per-usage tensor indexing costs more than the whole schedule scan.
        delta = [0] * (steps + 1)
        for u in usages:
            if u.span is None:
                delta[u.first] += u.footprint
                delta[u.last + 1] -= u.footprint
        used = list(itertools.accumulate(delta[:steps]))
        placed = [u for u in usages if u.span is not None]
        if placed:
            starts = sorted(placed, key=lambda u: u.first)
            boundaries = sorted({u.first for u in placed} | {u.last + 1 for u in placed})
            active, k = [], 0
            for i, t in enumerate(boundaries):
                if t >= steps:
                    break
                while k < len(starts) and starts[k].first <= t:
                    active.append(starts[k])
                    k += 1
                active = [u for u in active if u.last >= t]
                end = boundaries[i + 1] if i + 1 < len(boundaries) else steps
                shared = _union([u.span for u in active])
                for step in range(t, end):
                    used[step] += shared
        peak = max(used)
        return peak, used.index(peak)

    def _overflow(self, op, buffer, used):
        cap = self.capacity(buffer)
        t = self.target
        if buffer is buffers.psum:
            bank = t.psum_bank_bytes
            fail(
                op,
                f"PSUM capacity exceeded on {t.name}: live tiles need {-(-used // bank)} banks "
                f"({used} bytes per partition), {t.psum_banks} banks of {bank} bytes "
                "available",
            )
        fail(
            op,
            f"SBUF capacity exceeded on {t.name}: live tiles need {used} bytes per partition, "
            f"{cap} available",
        )


def _union(spans):
    """Total length of the union of byte ranges ``[lo, hi)``."""
    total, end = 0, 0
    for lo, hi in sorted(s for s in spans if s):
        if hi > end:
            total += hi - max(lo, end)
            end = hi
    return total
