"""neuronxcc.nki.compiler: allocation and scheduling directives of the pre-0.2 API.

The simulator keeps every logical tile in storage of its own, so a direct allocation
(``ncc.sbuf.alloc``, ``mod_alloc`` and the PSUM variants) only selects the memory: the
requested addresses, and the aliasing between logical tiles that modulo allocation implies,
are not modelled.  Scheduling directives are accepted and change nothing.
"""

import contextlib

import nki.language as _nl


class Allocation:
    """A direct allocation request for ``buffer``; ``spec`` keeps what the kernel asked for."""

    __slots__ = ("buffer", "spec")

    def __init__(self, buffer, spec):
        self.buffer = buffer
        self.spec = spec

    def __repr__(self):
        return f"<direct allocation in {self.buffer!r}>"


class _Memory:
    """``ncc.sbuf`` / ``ncc.psum``: allocation requests for one on-chip memory."""

    def __init__(self, buffer):
        self._buffer = buffer

    def alloc(self, func):
        """Place each logical tile where ``func(idx, pdim_size, fdim_size)`` says."""
        return Allocation(self._buffer, func)

    def mod_alloc(self, **placement):
        """Place the logical tiles modulo the given tile counts from a base address."""
        return Allocation(self._buffer, placement)

    def auto_alloc(self):
        """Let the allocator place the tiles (the default)."""
        return self._buffer

    def __repr__(self):
        return f"ncc.{self._buffer.name}"


sbuf = _Memory(_nl.sbuf)
psum = _Memory(_nl.psum)


def _passthrough(func=None, **options):
    """A decorator that returns the kernel unchanged (with or without arguments)."""
    if func is None:
        return lambda f: f
    return func


skip_middle_end_transformations = _passthrough
enable_stack_allocator = _passthrough
force_auto_alloc = _passthrough


@contextlib.contextmanager
def allocation_scope():
    """A scope for direct allocations (no effect on the simulator)."""
    yield


@contextlib.contextmanager
def no_reorder():
    """Keep the enclosed instructions in program order (the simulator always does)."""
    yield


def multi_buffer(factor=2):
    """A multi-buffering directive (no effect on the simulator)."""
    return contextlib.nullcontext(factor)


def buffer_of(buffer):
    """The simulator memory behind a ``buffer=`` argument (a buffer or a direct allocation)."""
    return buffer.buffer if isinstance(buffer, Allocation) else buffer
