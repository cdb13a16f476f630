"""The headline numbers of the benchmarks against their targets, for `make bench`'s table.

A benchmark prints its own details and calls ``verdict`` for each headline number; with
``TORCHNEURON_BENCH_RESULTS`` set (by benchmarks/summary.py) the number is also appended to that
file as a JSON line, so that one table can show every benchmark's numbers.
"""

import json
import os

RESULTS = "TORCHNEURON_BENCH_RESULTS"


def verdict(metric: str, value: float, target: float, *, at_most: bool, unit: str = "x") -> str:
    """'met' or 'MISSED': whether ``value`` is at most (or at least) ``target``; records it."""
    met = value <= target if at_most else value >= target
    path = os.environ.get(RESULTS)
    if path:
        row = {"metric": metric, "value": value, "target": target, "at_most": at_most}
        with open(path, "a") as f:
            f.write(json.dumps({**row, "unit": unit, "met": met}) + "\n")
    return "met" if met else "MISSED"
