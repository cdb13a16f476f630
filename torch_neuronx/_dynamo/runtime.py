"""Runs a graph compiled for the host on the neuron tensors it is called with.

Device memory is host memory, so inputs are passed as zero-copy CPU aliases
(``torch.ops.neuron.as_cpu``) and the compiled code reads and writes device memory in place.
While the graph runs, the core's pool serves its allocations: results, activations saved for
the backward graph and scratch buffers are device memory, which the allocator's limits and
statistics cover as in eager mode; its random ops draw from the core's generator. Outputs that
alias an input come back as views of that input. Fresh outputs become neuron tensors storage by
storage, sharing the pool memory with no copy and keeping their strides, offsets and any
sharing between them, all of which AOTAutograd relies on. Fresh outputs that only the backward
graph reads (saved activations) stay host tensors.
"""

import threading

import torch

HOST = None  # placement of an output that stays a host tensor

_running = threading.local()


def graph_running() -> bool:
    """Whether this thread is inside a compiled graph, whose host tensors are device memory."""
    return getattr(_running, "depth", 0) > 0


def _host_alias(arg):
    if isinstance(arg, torch.Tensor) and arg.device.type == "neuron":
        return torch.ops.neuron.as_cpu(arg)
    return arg


def _view(storage, like, device):
    return torch.empty(0, dtype=like.dtype, device=device).set_(
        storage, like.storage_offset(), like.size(), like.stride()
    )


class HostGraph:
    """A compiled graph, called with AOTAutograd's boxed convention, on neuron tensors."""

    def __init__(self, compiled, placements, cpu_fallback_ops, name="", draws_random=False):
        # placements[i]: torch.device for output i, "current" for the current neuron core,
        # or HOST to leave it on the host.
        # An instance attribute, because wrappers (functools.wraps) copy only __dict__.
        self._boxed_call = True
        self.compiled = compiled
        self.placements = placements
        # Reported on every call, as eager reports each call of such an op.
        self.cpu_fallback_ops = cpu_fallback_ops
        # The graph's kernel name in profiles.
        self.name = name
        # Reported on every call, as eager reports each random op.
        self.draws_random = draws_random

    def __call__(self, args):
        if self.cpu_fallback_ops:
            torch.ops.neuron.record_compiled_fallback(self.cpu_fallback_ops)
        if self.draws_random:
            torch.ops.neuron.record_compiled_random(self.name)
        owners = {}
        core = None
        for arg in args:
            if isinstance(arg, torch.Tensor):
                owners.setdefault(arg.untyped_storage().data_ptr(), arg)
                if core is None and arg.device.type == "neuron":
                    core = arg.device.index
        # Counted as what it is before the host aliases below would count it as host access.
        torch.ops.neuron.run_queue("compiled_graph")
        host_args = [_host_alias(a) for a in args]
        args.clear()
        torch.ops.neuron.enter_core(
            torch.neuron.current_device() if core is None else core, self.name
        )
        _running.depth = getattr(_running, "depth", 0) + 1
        try:
            outs = self.compiled(host_args)
        finally:
            _running.depth -= 1
            torch.ops.neuron.exit_core()
        moved = {}
        return [self._place(o, p, owners, moved) for o, p in zip(outs, self.placements)]

    @staticmethod
    def _place(out, placement, owners, moved):
        if not isinstance(out, torch.Tensor):
            return out
        ptr = out.untyped_storage().data_ptr()
        owner = owners.get(ptr) if ptr else None
        if owner is not None:
            # An alias of an input stays one, on the input's device, even when only the backward
            # reads it: the input's storage may get new memory before then (FSDP2 frees and
            # re-allocates parameters between forward and backward), and a view follows it.
            if owner.device.type == "cpu":
                return out
            return _view(owner.untyped_storage(), out, owner.device)
        if placement is HOST:
            return out
        storage = moved.get(ptr) if ptr else None
        if storage is not None:
            return _view(storage, out, storage.device)
        core = placement.index if isinstance(placement, torch.device) else None
        result = torch.ops.neuron.to_device_alias(
            out, torch.neuron.current_device() if core is None else core
        )
        if ptr:
            moved[ptr] = result.untyped_storage()
        return result
