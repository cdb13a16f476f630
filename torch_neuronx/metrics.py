"""Counters of what ran on the emulated device: native and fallback ops by name, host/device
copies, allocations, out-of-memory errors and 64-bit narrowing; and metrics, timed samples such
as each compiled graph's compile time (TorchNeuron's ``torch_neuronx.metrics`` API).

Counting always runs (it costs an addition). With metrics enabled (TORCH_NEURONX_METRICS_ENABLED=1
or ``set_enabled(True)``) the tables TORCH_NEURONX_ENABLED_METRIC_TABLES names are written at
exit as CSV files into TORCH_NEURONX_METRICS_DIR (default: the system temporary directory):
``counters`` (every counter) and ``graph_stats`` (one row per compiled Dynamo graph).
"""

import atexit
import csv
import os
import tempfile
import time
from collections.abc import Callable

import torch

from torch_neuronx import _config
from torch_neuronx._dynamo import metrics as _dynamo_metrics

_sources = []
_enabled = False


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


def get_metric_names() -> list[str]:
    """Names of the metrics that have samples."""
    return sorted(_metric_samples())


def get_metric_data(name: str) -> dict | None:
    """One metric's samples and their sum (None when it has none):
    ``{"accumulator", "total_samples", "samples", "repr"}``."""
    samples = _metric_samples().get(name)
    if not samples:
        return None
    total = sum(samples)
    return {
        "accumulator": total,
        "total_samples": len(samples),
        "samples": samples,
        "repr": f"{total:.6f}s over {len(samples)} samples",
    }


def _metric_samples():
    graphs = _dynamo_metrics.get_dynamo_metrics()["graphs"]
    subgraphs = [s for g in graphs for s in g["subgraphs"] if not s["cache_hit"]]
    out = {
        "DynamoCompilationTime": [g["compile_time_s"] for g in graphs],
        "NeffCompilationTime": [s["compile_time_s"] for s in subgraphs],
    }
    return {name: samples for name, samples in out.items() if samples}


def report_filtered(counter_names: list[str] | None = None, metric_names: list[str] | None = None):
    """The report of the named counters and metrics only."""
    values = counters()
    rows = [(name, values.get(name, 0)) for name in counter_names or []]
    width = max([len(k) for k, _ in rows] + [len(m) for m in metric_names or []] + [7])
    lines = [f"{'Counter':<{width}}  {'Value':>12}", "-" * (width + 14)]
    lines += [f"{k:<{width}}  {v:>12}" for k, v in rows]
    for name in metric_names or []:
        data = get_metric_data(name)
        lines.append(f"{name:<{width}}  {data['repr'] if data else 'no samples'}")
    return "\n".join(lines) + "\n"


def clear_metrics() -> None:
    """Forgets every metric's samples (the compiled graphs' records)."""
    _dynamo_metrics.reset_dynamo_metrics()


def clear_all() -> None:
    """Resets every counter and metric."""
    clear_counters()
    clear_metrics()


def get_compilation_metrics() -> dict:
    """The compiler's counters and metrics: graphs, recompiles, cache hits, compile times."""
    out = dict(_dynamo_metrics.counters())
    for name in get_metric_names():
        data = get_metric_data(name)
        out[name] = {k: data[k] for k in ("accumulator", "total_samples", "repr")}
    return out


def _graph_rows():
    header = ["name", "compile_id", "recompile", "fallback", "cache_hit", "compile_time_s"]
    graphs = _dynamo_metrics.get_dynamo_metrics()["graphs"]
    return [header] + [[g[k] for k in header] for g in graphs]


# The tables TORCH_NEURONX_ENABLED_METRIC_TABLES can name, each as the rows of its CSV.
_TABLES = {
    "counters": lambda: [["counter", "value"], *sorted(counters().items())],
    "graph_stats": _graph_rows,
}


def write_csv(path: str, table: str = "counters") -> None:
    """Writes one table (``counters``: name,value rows; ``graph_stats``) to ``path``."""
    if table not in _TABLES:
        raise ValueError(f"no metric table {table!r}; the tables are {', '.join(_TABLES)}")
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(_TABLES[table]())


def _enabled_tables():
    names = [t.strip() for t in _config.get("TORCH_NEURONX_ENABLED_METRIC_TABLES").split(",")]
    unknown = [t for t in names if t and t not in _TABLES]
    if unknown:
        raise ValueError(
            f"TORCH_NEURONX_ENABLED_METRIC_TABLES names {', '.join(unknown)}; the tables are "
            f"{', '.join(_TABLES)}"
        )
    return [t for t in names if t]


def _write_at_exit():
    if not _enabled:
        return
    directory = _config.get("TORCH_NEURONX_METRICS_DIR") or tempfile.gettempdir()
    os.makedirs(directory, exist_ok=True)
    stamp = f"{os.getpid()}_{int(time.time())}"
    for table in _enabled_tables():
        name = "metrics" if table == "counters" else table
        write_csv(os.path.join(directory, f"torch_neuronx_{name}_{stamp}.csv"), table)


def is_enabled() -> bool:
    """Whether the metric tables are written at exit (TORCH_NEURONX_METRICS_ENABLED)."""
    return _enabled


def set_enabled(enabled: bool) -> None:
    """Turns writing the metric tables at exit on or off; counting itself always runs."""
    global _enabled
    _enabled = bool(enabled)
    if _enabled:
        _enabled_tables()  # a bad table name fails here, not at exit


set_enabled(_config.get("TORCH_NEURONX_METRICS_ENABLED"))
atexit.register(_write_at_exit)
