"""Adaptive eager execution (experimental, off by default): elementwise ops are queued and a run
of them executes as one fused kernel with the bits of running them one by one.

``TORCH_NEURONX_ENABLE_CONCATENATION=1`` turns it on at start; ``enable``/``disable`` switch it
at run time. ``torch.use_deterministic_algorithms(True)`` turns it off. See
docs/adaptive_eager.md.
"""

import contextlib

import torch

__all__ = ["disable", "enable", "enabled", "is_enabled", "stats"]


def is_enabled() -> bool:
    """Whether eager neuron ops may be queued and fused."""
    return torch.ops.neuron.adaptive_eager()[0]


def enable(prologue: bool | None = None, limit: int | None = None) -> None:
    """Queues and fuses eager ops from now on (``prologue``: strided views may join a run;
    ``limit``: the most ops one queue holds)."""
    _, current_prologue, current_limit = torch.ops.neuron.adaptive_eager()
    torch.ops.neuron.set_adaptive_eager(
        True,
        current_prologue if prologue is None else prologue,
        current_limit if limit is None else limit,
    )


def disable() -> None:
    """Runs the queued ops, then runs every op where it is issued."""
    _, prologue, limit = torch.ops.neuron.adaptive_eager()
    torch.ops.neuron.set_adaptive_eager(False, prologue, limit)


@contextlib.contextmanager
def enabled(on: bool = True):
    """Adaptive eager on (or off) inside the block; the previous state afterwards."""
    before = is_enabled()
    enable() if on else disable()
    try:
        yield
    finally:
        enable() if before else disable()


def stats() -> dict[str, int]:
    """Queued ops, fused kernels and the ops in them, fusion-cache hits and misses, eligible ops
    run at once because their run was predicted to hold only them, and queue runs by boundary
    (``runs.<boundary>``). Unlike memory statistics, reading them is no boundary."""
    return stats_of(dict(zip(*torch.ops.neuron.counters())))


def stats_of(counters: dict[str, int]) -> dict[str, int]:
    """``stats()`` from a snapshot of torch_neuronx.metrics counters."""
    out = {
        "queued_ops": counters.get("QueuedOps", 0),
        "fused_kernels": counters.get("FusedKernels", 0),
        "fused_ops": counters.get("FusedOps", 0),
        "cache_hits": counters.get("FusionCacheHits", 0),
        "cache_misses": counters.get("FusionCacheMisses", 0),
        "run_alone": counters.get("RunAlone", 0),
    }
    prefix = "QueueRun::"
    out.update({"runs." + k[len(prefix) :]: v for k, v in counters.items() if k.startswith(prefix)})
    return out
