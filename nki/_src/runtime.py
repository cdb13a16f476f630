"""Per-kernel-instance execution state: target, SPMD position, allocator and trace recorder."""

import threading
from contextlib import contextmanager

import torch

from . import targets
from .allocator import Allocator


class KernelContext:
    """State of one running kernel instance (one program of the SPMD grid)."""

    def __init__(
        self,
        target,
        grid=(),
        program_index=(),
        shared=None,
        recorder=None,
        world=None,
        instance=0,
        rank=0,
        num_ranks=1,
    ):
        self.target = target
        self.grid = tuple(grid)
        self.program_index = tuple(program_index)
        # Synchronization: the launch's World, this instance's number in it, its collective rank.
        self.world = world
        self.instance = instance
        self.rank = rank
        self.num_ranks = num_ranks
        # Inside a launch, on-chip liveness follows the instruction schedule (checked when the
        # kernel returns); the default context checks reachable tiles at every instruction.
        self.allocator = Allocator(target, deferred=world is not None)
        # shared_hbm allocations are linked across the instances of one launch by name or
        # order; outside a launch (shared is None) nothing is linked.
        self.shared = shared
        self.shared_seq = 0
        self.recorder = recorder
        # Engine accumulator registers (one fp32 lane per partition).
        self.scalar_regs = torch.zeros(128)
        self.vector_regs = torch.zeros(128)

    def shared_key(self, name):
        """Key linking a shared_hbm allocation across instances: its name, else its order."""
        if self.shared is None:
            return None
        self.shared_seq += 1
        return name or f"#{self.shared_seq}"


class _ThreadState(threading.local):
    """Per thread: the stack of running kernel contexts (each thread starts with its own)."""

    def __init__(self):
        self.stack = []


_local = _ThreadState()
_default = None


def current():
    """The innermost running kernel context, or a default one outside any kernel."""
    global _default
    stack = _local.stack
    if stack:
        return stack[-1]
    target = targets.get()
    if _default is None or _default.target is not target:
        _default = KernelContext(target)
    return _default


def inside_kernel():
    """True while a kernel instance is executing."""
    return bool(_local.stack)


@contextmanager
def running(ctx):
    """Make ``ctx`` the current context for the duration of the block."""
    stack = _local.stack
    stack.append(ctx)
    try:
        yield ctx
    finally:
        stack.pop()


@contextmanager
def single_threaded():
    """Run tile operations on one intra-op thread: they are small, and OpenMP fork/join
    overhead (severe on a loaded machine) would dominate them."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
