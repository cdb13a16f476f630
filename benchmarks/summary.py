"""`make bench`: each benchmark in turn, then one table of their headline numbers and targets.

    python benchmarks/summary.py [--lane PYTHON ...] [--only NAME ...]

Each benchmark runs in a process of its own and prints its details as it goes; each headline
number it checks against a target (benchmarks/targets.py) goes into the table at the end, with
the machine it ran on. ``--lane`` also runs eager.py (the per-op overhead) with the
interpreter of another torch lane, e.g. .venv-2.13/bin/python.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from targets import RESULTS

HERE = Path(__file__).resolve().parent
BENCHMARKS = ("eager", "adaptive_eager", "nki_simulator", "compile", "collectives")


def cpu_model():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def lane_of(python):
    code = "import torch; print(torch.__version__)"
    return subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip()


def run(python, name, results):
    """Runs one benchmark, its output passed through; returns its table rows."""
    results.unlink(missing_ok=True)
    lane = lane_of(python)
    print(f"\n=== {name}.py (torch {lane}) ===", flush=True)
    start = time.perf_counter()
    env = {**os.environ, RESULTS: str(results)}
    done = subprocess.run([python, str(HERE / f"{name}.py")], env=env)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        return [{"benchmark": name, "lane": lane, "metric": f"exit status {done.returncode}"}]
    lines = results.read_text().splitlines() if results.exists() else []
    rows = [json.loads(line) for line in lines]
    return [{"benchmark": name, "lane": lane, "seconds": seconds, **row} for row in rows]


def table(rows):
    lines = [
        "| benchmark | torch | metric | measured | target | |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "value" not in r:
            lines.append(f"| {r['benchmark']} | {r['lane']} | {r['metric']} | – | – | FAILED |")
            continue
        unit = r["unit"]
        sign = "≤" if r["at_most"] else "≥"
        lines.append(
            f"| {r['benchmark']} | {r['lane']} | {r['metric']} | {r['value']:.3g} {unit} | "
            f"{sign} {r['target']:g} {unit} | {'met' if r['met'] else '**missed**'} |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lane", action="append", default=[], help="another lane's python")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, default=BENCHMARKS)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        results = Path(tmp) / "results.jsonl"
        for name in args.only:
            rows += run(sys.executable, name, results)
            if name == "eager":
                for python in args.lane:
                    rows += run(python, name, results)
    print(f"\n=== summary ===\n{table(rows)}\n")
    print(
        f"Machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"torch {torch.__version__}; load average {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after."
    )
    missed = [r for r in rows if not r.get("met", False)]
    print(f"{len(rows) - len(missed)} of {len(rows)} targets met.")


if __name__ == "__main__":
    main()
