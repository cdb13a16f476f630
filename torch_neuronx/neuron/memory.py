"""Memory statistics and debugging of the caching allocator (CUDA's names, keys and formats)."""

import contextlib
import os
import pickle
import sys
from collections.abc import Iterator
from typing import Any, Literal

import torch
from torch.types import Device

from torch_neuronx.neuron._device import _index, device_count, get_device_properties

# What the allocator raises when a core's HBM (or this process's share of it) is full.
OutOfMemoryError = torch.OutOfMemoryError


def memory_stats(device: Device = None) -> dict[str, int]:
    """Allocator statistics as a flat dict with CUDA's keys."""
    return torch.accelerator.memory_stats(_index(device))


def memory_allocated(device: Device = None) -> int:
    """Bytes held by tensors on a NeuronCore."""
    return torch.accelerator.memory_allocated(_index(device))


def max_memory_allocated(device: Device = None) -> int:
    """Peak bytes held by tensors since the last reset."""
    return torch.accelerator.max_memory_allocated(_index(device))


def memory_reserved(device: Device = None) -> int:
    """Bytes reserved by the caching allocator, in use or cached."""
    return torch.accelerator.memory_reserved(_index(device))


def max_memory_reserved(device: Device = None) -> int:
    """Peak reserved bytes since the last reset."""
    return torch.accelerator.max_memory_reserved(_index(device))


def reset_peak_memory_stats(device: Device = None) -> None:
    """Resets the peak counters."""
    torch.accelerator.reset_peak_memory_stats(_index(device))


def reset_max_memory_allocated(device: Device = None) -> None:
    """Resets the peak counters (CUDA's older name)."""
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device: Device = None) -> None:
    """Resets the allocated/freed totals."""
    torch.accelerator.reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    """Returns every cached, unused block to the host."""
    torch.accelerator.empty_cache()


def mem_get_info(device: Device = None) -> tuple[int, int]:
    """(free, total) HBM bytes of a NeuronCore."""
    return torch.accelerator.get_memory_info(_index(device))


def host_memory_stats() -> dict[str, int]:
    """Pinned host memory statistics as a flat dict with CUDA's keys."""
    names, values = torch.ops.neuron.host_memory_stats()
    return dict(zip(names, values))


def _format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"


def memory_summary(device: Device = None, abbreviated: bool = False) -> str:
    """A readable table of the allocator statistics."""
    idx = _index(device)
    stats = memory_stats(idx)
    rows = [
        ("Allocated memory", "allocated_bytes", True),
        ("Active memory", "active_bytes", True),
        ("Requested memory", "requested_bytes", True),
        ("Reserved memory", "reserved_bytes", True),
        ("Allocations", "allocation", False),
        ("Active allocs", "active", False),
        ("Segments", "segment", False),
    ]
    pools = ("all",) if abbreviated else ("all", "small_pool", "large_pool")
    fmt = _format_bytes
    lines = [
        "=" * 79,
        f" neuron:{idx} memory summary (emulated {get_device_properties(idx).name})",
        "-" * 79,
        f"{'Metric':<26}{'Cur Usage':>13}{'Peak Usage':>13}{'Tot Alloc':>13}{'Tot Freed':>13}",
        "-" * 79,
    ]
    for title, key, is_bytes in rows:
        for pool in pools:
            vals = [
                stats.get(f"{key}.{pool}.{k}", 0) for k in ("current", "peak", "allocated", "freed")
            ]
            cells = [fmt(v) if is_bytes else str(v) for v in vals]
            label = title if pool == "all" else f"  from {pool.replace('_', ' ')}"
            lines.append(f"{label:<26}" + "".join(f"{c:>13}" for c in cells))
    lines.append("-" * 79)
    lines.append(f"{'OOMs':<26}{stats.get('num_ooms', 0):>13}")
    lines.append(f"{'Allocation retries':<26}{stats.get('num_alloc_retries', 0):>13}")
    lines.append("=" * 79)
    return "\n".join(lines) + "\n"


def memory_stats_as_nested_dict(device: Device = None) -> dict[str, Any]:
    """memory_stats() nested as CUDA's: ``stats["allocated_bytes"]["all"]["current"]``."""
    return _nest(memory_stats(device))


def host_memory_stats_as_nested_dict() -> dict[str, Any]:
    """host_memory_stats() nested as CUDA's."""
    return _nest(host_memory_stats())


def _nest(flat: dict[str, int]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        *path, leaf = key.split(".")
        node = nested
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def memory_cached(device: Device = None) -> int:
    """Deprecated name of memory_reserved (as in torch.cuda)."""
    return memory_reserved(device)


def max_memory_cached(device: Device = None) -> int:
    """Deprecated name of max_memory_reserved (as in torch.cuda)."""
    return max_memory_reserved(device)


def reset_max_memory_cached(device: Device = None) -> None:
    """Deprecated name of reset_peak_memory_stats (as in torch.cuda)."""
    reset_peak_memory_stats(device)


def reset_accumulated_host_memory_stats() -> None:
    """Resets the pinned host allocator's allocated/freed totals."""
    torch.ops.neuron.reset_host_memory_stats(False)


def reset_peak_host_memory_stats() -> None:
    """Resets the pinned host allocator's peak counters."""
    torch.ops.neuron.reset_host_memory_stats(True)


def caching_allocator_alloc(
    size: int, device: Device = None, stream: torch.Stream | None = None
) -> int:
    """Allocates ``size`` bytes of a core's memory from the caching allocator; returns the
    address, to free with caching_allocator_delete (``stream`` is accepted for CUDA's
    signature: execution is synchronous)."""
    return torch.ops.neuron.raw_alloc(size, _index(device))


def caching_allocator_delete(mem_ptr: int) -> None:
    """Frees memory that caching_allocator_alloc returned."""
    torch.ops.neuron.raw_delete(mem_ptr)


def caching_allocator_enable(value: bool = True) -> None:
    """Turns block caching on (the default) or off; off, freed memory goes back to the host at
    once and allocations always take new memory."""
    torch.ops.neuron.set_caching(bool(value))


@contextlib.contextmanager
def caching_allocator_disabled() -> Iterator[None]:
    """Context manager that turns block caching off while it is active."""
    previous = torch.ops.neuron.caching()
    caching_allocator_enable(False)
    try:
        yield
    finally:
        caching_allocator_enable(previous)


def get_allocator_backend() -> str:
    """The allocator's name: ``"native"``, the caching allocator (the only one)."""
    return "native"


_fractions: dict[int, float] = {}


def set_per_process_memory_fraction(fraction: float, device: Device = None) -> None:
    """Limits this process to ``fraction`` of a core's HBM; allocating beyond it raises
    torch.OutOfMemoryError (the allocator first frees its cache, as when HBM is full)."""
    if not isinstance(fraction, float):
        raise TypeError(
            f"Invalid type for fraction argument, must be `float`, got {type(fraction).__name__}"
        )
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    idx = _index(device)
    torch.ops.neuron.set_memory_fraction(idx, fraction)
    _fractions[idx] = fraction


def get_per_process_memory_fraction(device: Device = None) -> float:
    """The share of a core's HBM this process may reserve (1.0 unless set)."""
    return _fractions.get(_index(device), 1.0)


def list_gpu_processes(device: Device = None) -> str:
    """The processes using a core and their device memory, as torch.cuda's listing.

    The cores are emulated in this process, so it is the only one listed."""
    idx = _index(device)
    mib = memory_reserved(idx) / (1024 * 1024)
    return f"neuron:{idx}\nprocess {os.getpid():>10d} uses {mib:>12.3f} MB neuron memory"


_CONTEXT_LEVELS = {None: 0, "state": 1, "alloc": 2, "all": 3}
_ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom")
# The small pool: segments under 1 MiB, as csrc/runtime/Allocator.cpp sizes them.
_SMALL_SEGMENT = 1 << 20
_SEGMENT_FIELDS = 6
_ENTRY_FIELDS = 7


def _record_memory_history(
    enabled: Literal["state", "all"] | bool | None = "all",
    context: Literal["state", "alloc", "all"] | None = "all",
    stacks: Literal["python", "all"] = "all",
    max_entries: int = sys.maxsize,
    device: Device = None,
    clear_history: bool = False,
    **unsupported: object,
) -> None:
    """Records the allocator's events and the stack traces of allocations, as torch.cuda's.

    ``enabled``: None stops recording, "state" keeps stack traces of live allocations, "all"
    also keeps a history of alloc/free/segment events (at most ``max_entries``, newest kept).
    ``context``: which events keep stack traces (None, "state", "alloc", "all").
    ``stacks``: "python" for Python frames, "all" to add C++ frames (slow to symbolize).
    The history covers every core (``device`` is accepted for CUDA's signature).
    """
    if unsupported:
        raise TypeError(
            f"_record_memory_history got options the neuron allocator does not have: "
            f"{sorted(unsupported)}; it takes enabled, context, stacks, max_entries, device "
            "and clear_history"
        )
    if isinstance(enabled, bool):  # the legacy signature: _record_memory_history(True)
        enabled = "all" if enabled else None
    if enabled not in (None, "state", "all"):
        raise ValueError(f"enabled must be None, 'state' or 'all', got {enabled!r}")
    if context not in _CONTEXT_LEVELS:
        raise ValueError(f"context must be None, 'state', 'alloc' or 'all', got {context!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"stacks must be 'python' or 'all', got {stacks!r}")
    if max_entries < 0:
        raise ValueError(f"max_entries must be >= 0, got {max_entries}")
    torch.ops.neuron.record_memory_history(
        enabled is not None,
        enabled == "all",
        _CONTEXT_LEVELS[context],
        stacks == "all",
        min(max_entries, 2**62),
        clear_history,
    )


def _snapshot(device: Device = None, augment_with_fx_traces: bool = False) -> dict[str, Any]:
    """The allocator's segments, blocks and recorded history in torch.cuda.memory._snapshot's
    format, which torch.cuda._memory_viz and pytorch.org/memory_viz read."""
    segs, entries, offsets, indices, files, names, lines = torch.ops.neuron.memory_snapshot()
    table = [{"filename": f, "line": n, "name": name} for f, name, n in zip(files, names, lines)]

    def frames(slot: int) -> list[dict[str, Any]]:
        return [] if slot < 0 else [table[i] for i in indices[offsets[slot] : offsets[slot + 1]]]

    segments = []
    for i in range(0, len(segs), _SEGMENT_FIELDS):
        dev, address, size, requested, active, slot = segs[i : i + _SEGMENT_FIELDS]
        in_use = size if active else 0
        block = {
            "address": address,
            "size": size,
            "requested_size": requested,
            "state": "active_allocated" if active else "inactive",
            "frames": frames(slot),
        }
        segments.append(
            {
                "device": dev,
                "address": address,
                "total_size": size,
                "allocated_size": in_use,
                "active_size": in_use,
                "requested_size": requested,
                "stream": 0,
                "segment_type": "small" if size < _SMALL_SEGMENT else "large",
                "segment_pool_id": (0, 0),
                "is_expandable": False,
                "frames": block["frames"],
                "blocks": [block],
            }
        )
    traces: list[list[dict[str, Any]]] = [[] for _ in range(device_count())]
    for i in range(0, len(entries), _ENTRY_FIELDS):
        dev, action, addr, size, time_us, free, slot = entries[i : i + _ENTRY_FIELDS]
        entry = {
            "action": _ACTIONS[action],
            "addr": addr,
            "frames": frames(slot),
            "size": size,
            "stream": 0,
            "time_us": time_us,
            "compile_context": "",
            "user_metadata": "",
        }
        if _ACTIONS[action] == "oom":
            entry["device_free"] = free
        traces[dev].append(entry)
    return {
        "segments": segments,
        "device_traces": traces,
        "allocator_settings": {"PYTORCH_NO_NEURON_MEMORY_CACHING": False},
        "external_annotations": [],
    }


def _dump_snapshot(
    filename: str = "dump_snapshot.pickle", augment_with_fx_traces: bool = False
) -> None:
    """Pickles _snapshot() to ``filename``, for pytorch.org/memory_viz."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def memory_snapshot(mempool_id: object = None, include_traces: bool = True) -> list[dict[str, Any]]:
    """The allocator's segments on every core (torch.cuda.memory_snapshot)."""
    if mempool_id is not None:
        raise ValueError("neuron has one memory pool per core; call memory_snapshot()")
    return _snapshot()["segments"]


__all__ = [
    "OutOfMemoryError",
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "caching_allocator_disabled",
    "caching_allocator_enable",
    "empty_cache",
    "get_allocator_backend",
    "get_per_process_memory_fraction",
    "host_memory_stats",
    "host_memory_stats_as_nested_dict",
    "list_gpu_processes",
    "max_memory_allocated",
    "max_memory_cached",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_cached",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "reset_accumulated_host_memory_stats",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_host_memory_stats",
    "reset_peak_memory_stats",
    "set_per_process_memory_fraction",
]
