"""On-chip capacity accounting: live SBUF/PSUM bytes per partition, checked per instruction."""

import weakref

import torch

from . import buffers
from .errors import fail


class Allocation:
    """Backing storage of one tensor (an ``nl.ndarray`` or a kernel argument)."""

    __slots__ = (
        "storage",
        "buffer",
        "name",
        "row_bytes",
        "nbytes",
        "partition_bytes",
        "written",
        "psum_written",
        "index",
        "__weakref__",
    )

    def __init__(self, storage, buffer, name, row_bytes, nbytes, partition_bytes, index):
        self.storage = storage  # any torch tensor over the storage
        self.buffer = buffer
        self.name = name
        self.row_bytes = row_bytes  # bytes per partition as laid out (on-chip)
        self.nbytes = nbytes  # addressable extent of the storage
        self.partition_bytes = partition_bytes  # footprint counted against capacity
        self.written = False
        # PSUM remembers which elements were written so nc_matmul(accumulate=None) knows
        # whether to overwrite or accumulate.
        self.psum_written = (
            torch.zeros(storage.numel(), dtype=torch.bool) if buffer is buffers.psum else None
        )
        self.index = index  # stable id for dependency tracking in the cost model


class Allocator:
    """Tracks live on-chip allocations of one kernel instance against the target's capacity.

    An allocation is live while any tensor view of it is reachable from Python, so tiles
    allocated in a loop body are released when their names are rebound.  The check runs
    when an instruction executes (not at allocation), after the previous iteration's tiles
    have been dropped.
    """

    def __init__(self, target):
        self.target = target
        self.live = {buffers.sbuf: 0, buffers.psum: 0}
        self.peak = {buffers.sbuf: 0, buffers.psum: 0}
        self.count = 0

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

    def new(self, storage, buffer, name, row_bytes, nbytes):
        """Register a fresh allocation; reject a single tile larger than the whole memory."""
        self.count += 1
        if not buffer.on_chip:
            return Allocation(storage, buffer, name, row_bytes, nbytes, 0, self.count)
        footprint = self.footprint(buffer, row_bytes)
        if footprint > self.capacity(buffer):
            self._overflow("ndarray", buffer, footprint)
        alloc = Allocation(storage, buffer, name, row_bytes, nbytes, footprint, self.count)
        self.live[buffer] += footprint
        weakref.finalize(alloc, self._release, buffer, footprint)
        return alloc

    def _release(self, buffer, footprint):
        self.live[buffer] -= footprint

    def check(self, op):
        """Fail if the live allocations exceed SBUF or PSUM capacity on this target."""
        for buffer, used in self.live.items():
            self.peak[buffer] = max(self.peak[buffer], used)
            if used > self.capacity(buffer):
                self._overflow(op, buffer, used)

    def _overflow(self, op, buffer, used):
        cap = self.capacity(buffer)
        t = self.target
        if buffer is buffers.psum:
            bank = t.psum_bank_bytes
            fail(
                op,
                f"PSUM capacity exceeded on {t.name}: live tiles need {used // bank} banks "
                f"({used} bytes per partition), {t.psum_banks} banks of {bank} bytes "
                "available",
            )
        fail(
            op,
            f"SBUF capacity exceeded on {t.name}: live tiles need {used} bytes per partition, "
            f"{cap} available",
        )
