"""Memory statistics of the caching allocator (CUDA's names and keys)."""

import torch
from torch.types import Device

from torch_neuronx.neuron.device import _index


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


def _format_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


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
        f" neuron:{idx} memory summary (emulated {torch.neuron.get_device_properties(idx).name})",
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
