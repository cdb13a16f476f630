"""Per-graph compile metrics of the neuron backend: compile time, cache hits, recompiles."""

import dataclasses
import threading
from typing import Any


@dataclasses.dataclass
class SubgraphMetrics:
    """One AOTAutograd graph (forward, backward or inference) turned into native code."""

    kind: str
    cache_key: str
    cache_hit: bool
    compile_time_s: float


@dataclasses.dataclass
class GraphMetrics:
    """One Dynamo graph compiled by the backend."""

    name: str
    compile_id: str
    recompile: bool
    job: str = ""  # its directory of debug artifacts (artifacts.py)
    compile_time_s: float = 0.0
    fallback: bool = False
    subgraphs: list = dataclasses.field(default_factory=list)

    @property
    def cache_hit(self):
        """True when every native subgraph came from the persistent cache."""
        return bool(self.subgraphs) and all(s.cache_hit for s in self.subgraphs)


_lock = threading.Lock()
_graphs: list[GraphMetrics] = []


def add_graph(graph):
    """Records a Dynamo graph whose compilation is starting; the caller fills it in."""
    with _lock:
        _graphs.append(graph)
    return graph


def get_dynamo_metrics() -> dict[str, Any]:
    """Everything compiled since the last reset: one entry per Dynamo graph, plus totals."""
    with _lock:
        graphs = [dict(dataclasses.asdict(g), cache_hit=g.cache_hit) for g in _graphs]
    subgraphs = [s for g in graphs for s in g["subgraphs"]]
    return {
        "graphs": graphs,
        "num_graphs": len(graphs),
        "num_recompiles": sum(g["recompile"] for g in graphs),
        "num_fallbacks": sum(g["fallback"] for g in graphs),
        "cache_hits": sum(s["cache_hit"] for s in subgraphs),
        "cache_misses": sum(not s["cache_hit"] for s in subgraphs),
        "compile_time_s": sum(g["compile_time_s"] for g in graphs),
    }


def reset_dynamo_metrics() -> None:
    """Forgets every recorded graph."""
    with _lock:
        _graphs.clear()


def counters():
    """Flat totals, named like the other ``torch_neuronx.metrics`` counters."""
    m = get_dynamo_metrics()
    return {
        "DynamoGraphs": m["num_graphs"],
        "DynamoRecompiles": m["num_recompiles"],
        "DynamoFallbacks": m["num_fallbacks"],
        "NeffCacheHits": m["cache_hits"],
        "NeffCacheMisses": m["cache_misses"],
        "DynamoCompileSeconds": m["compile_time_s"],
    }
