"""Counters of what ran on the emulated device: native and fallback ops by name, host/device
copies, allocations, out-of-memory errors and 64-bit narrowing.

With TORCH_NEURONX_METRICS_ENABLED=1 a CSV of every counter is written at exit into
TORCH_NEURONX_METRICS_DIR (default: the system temporary directory).
"""

import atexit
import csv
import os
import tempfile
import time
from collections.abc import Callable

import torch

from torch_neuronx import config

_sources = []


def register_source(counters: Callable[[], dict[str, int]], clear: Callable[[], None]) -> None:
    """Adds counters kept elsewhere (e.g. the compiler's): two callables, dict and reset."""
    _sources.append((counters, clear))


def _memory_counters():
    totals = {"DeviceAllocations": 0, "OutOfMemoryErrors": 0, "AllocationRetries": 0}
    for i in range(torch.neuron.device_count()):
        stats = torch.neuron.memory_stats(i)
        totals["DeviceAllocations"] += stats.get("allocation.all.allocated", 0)
        totals["OutOfMemoryErrors"] += stats.get("num_ooms", 0)
        totals["AllocationRetries"] += stats.get("num_alloc_retries", 0)
    return totals


def counters() -> dict[str, int]:
    """Every counter as {name: value}."""
    names, values = torch.ops.neuron.counters()
    out = dict(zip(names, values))
    out.update(_memory_counters())
    for source, _ in _sources:
        out.update(source())
    return out


def get_counter_names() -> list[str]:
    """Names of the counters that have a value."""
    return sorted(name for name, value in counters().items() if value)


def get_counter_value(name: str) -> int:
    """The value of one counter (0 when it never fired)."""
    return counters().get(name, 0)


def clear_counters() -> None:
    """Resets every counter."""
    torch.ops.neuron.clear_counters()
    for i in range(torch.neuron.device_count()):
        torch.neuron.reset_accumulated_memory_stats(i)
    for _, clear in _sources:
        clear()


def report(prefix: str = "") -> str:
    """A readable table of the counters whose names start with ``prefix``."""
    rows = sorted((k, v) for k, v in counters().items() if v and k.startswith(prefix))
    width = max([len(k) for k, _ in rows] + [7])
    lines = [f"{'Counter':<{width}}  {'Value':>12}", "-" * (width + 14)]
    lines += [f"{k:<{width}}  {v:>12}" for k, v in rows]
    return "\n".join(lines) + "\n"


def write_csv(path: str) -> None:
    """Writes every counter to ``path`` as name,value rows."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["counter", "value"])
        writer.writerows(sorted(counters().items()))


def _write_at_exit():
    directory = config.get("TORCH_NEURONX_METRICS_DIR") or tempfile.gettempdir()
    os.makedirs(directory, exist_ok=True)
    write_csv(
        os.path.join(directory, f"torch_neuronx_metrics_{os.getpid()}_{int(time.time())}.csv")
    )


if config.get("TORCH_NEURONX_METRICS_ENABLED"):
    atexit.register(_write_at_exit)
