"""Eager-mode cost of the emulated device against CPU PyTorch, measured in one run.

(a) per-op overhead of small ops: neuron time minus CPU time, in microseconds (target <= 0.3);
    then what each switchable hook of the op path adds to an op when it is on, so that a
    regression in one of them names itself;
(b) training-step time of the demo model on neuron over CPU (target <= 1.03).
CPU and neuron are measured alternately, and the median of several rounds is reported, so that
load from other processes affects both sides alike.
"""

import contextlib
import os
import statistics
import sys
import time

import torch
from targets import verdict

from torch_neuronx import adaptive_eager

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from tiny_gpt import TinyGPT, batches

SMALL_OPS = {
    "add": lambda a, b: a + b,
    "mul_": lambda a, b: a.mul_(1.0),
    "relu": lambda a, b: torch.relu(a),
    "sum": lambda a, b: a.sum(),
    "matmul 4x4": lambda a, b: a.view(4, 4) @ b.view(4, 4),
    "where": lambda a, b: torch.where(a > 0, a, b),
    "view": lambda a, b: a.view(4, 4),
    "index": lambda a, b: a[2:10],
}


def per_op_us(fn, a, b, iters):
    for _ in range(200):
        fn(a, b)
    start = time.perf_counter()
    for _ in range(iters):
        fn(a, b)
    return (time.perf_counter() - start) / iters * 1e6


def overheads(rounds=7, iters=5000):
    torch.set_num_threads(1)
    inputs = {d: (torch.randn(16, device=d), torch.randn(16, device=d)) for d in ("cpu", "neuron")}
    rows = []
    for name, fn in SMALL_OPS.items():
        samples = {"cpu": [], "neuron": []}
        for _ in range(rounds):
            for device in ("cpu", "neuron"):
                samples[device].append(per_op_us(fn, *inputs[device], iters))
        cpu, neuron = statistics.median(samples["cpu"]), statistics.median(samples["neuron"])
        rows.append((name, cpu, neuron, neuron - cpu))
    torch.set_num_threads(os.cpu_count() or 1)
    return rows


@contextlib.contextmanager
def observed():
    """What `torchneuron check` turns on: the runtime's events (fallbacks, random draws, ...)
    reach Python, here a listener that drops them."""
    if not hasattr(torch.ops.neuron, "observe"):
        library = torch.library.Library("neuron", "FRAGMENT")
        library.define("observe(str kind, str op, str detail, int[] values) -> ()")
        library.impl("observe", lambda kind, op, detail, values: None, "CompositeImplicitAutograd")
        LISTENERS.append(library)
    torch.ops.neuron.set_observing(True)
    try:
        yield
    finally:
        torch.ops.neuron.set_observing(False)


@contextlib.contextmanager
def memory_history():
    """Memory snapshots' record of live allocations, without stack traces."""
    torch.neuron.memory._record_memory_history("state", context=None)
    try:
        yield
    finally:
        torch.neuron.memory._record_memory_history(None)


# The listener's library, kept alive for the process: dropping it would undefine the op.
LISTENERS = []
# Each hook's switch, on for the block; adaptive eager sees ops too small to queue.
HOOKS = {
    "adaptive eager (op not queued)": lambda: adaptive_eager.enabled(True),
    "check's op events": observed,
    "memory history (state)": memory_history,
}


def hook_costs(rounds=7, iters=5000):
    """Microseconds each hook adds to ``a + b`` on 16-element neuron tensors when on."""
    torch.set_num_threads(1)
    a, b = torch.randn(16, device="neuron"), torch.randn(16, device="neuron")
    add = SMALL_OPS["add"]
    rows = []
    for name, switch in HOOKS.items():
        plain, hooked = [], []
        for _ in range(rounds):
            plain.append(per_op_us(add, a, b, iters))
            with switch():
                hooked.append(per_op_us(add, a, b, iters))
        rows.append((name, statistics.median(hooked) - statistics.median(plain)))
    torch.set_num_threads(os.cpu_count() or 1)
    return rows


def training_step_ratio(steps=10, rounds=9):
    models, opts, data = {}, {}, {}
    for device in ("cpu", "neuron"):
        torch.manual_seed(0)
        models[device] = TinyGPT(d=128, layers=2, seq=64).to(device)
        opts[device] = torch.optim.AdamW(models[device].parameters(), lr=1e-3)
        data[device] = [(x.to(device), y.to(device)) for x, y in batches(steps, batch=8, seq=64)]

    def run(device):
        start = time.perf_counter()
        for x, y in data[device]:
            loss = models[device](x, y)
            opts[device].zero_grad(set_to_none=True)
            loss.backward()
            opts[device].step()
        loss.item()
        return (time.perf_counter() - start) / steps

    for device in ("cpu", "neuron"):
        run(device)
    # Paired rounds: each ratio compares runs made moments apart, so slow drifts in machine
    # load cancel; the median ratio is reported.
    times = {"cpu": [], "neuron": []}
    for i in range(rounds):
        order = ("cpu", "neuron") if i % 2 == 0 else ("neuron", "cpu")
        for device in order:
            times[device].append(run(device))
    ratios = [n / c for n, c in zip(times["neuron"], times["cpu"])]
    return (
        statistics.median(times["cpu"]),
        statistics.median(times["neuron"]),
        statistics.median(ratios),
    )


def main():
    print("(a) per-op overhead, 16-element float32 tensors, 1 thread (median of 7 rounds)")
    print(f"{'op':<12}{'cpu us':>10}{'neuron us':>12}{'overhead us':>14}")
    rows = overheads()
    for name, cpu, neuron, over in rows:
        print(f"{name:<12}{cpu:>10.2f}{neuron:>12.2f}{over:>14.2f}")
    mean = statistics.mean(r[3] for r in rows)
    met = verdict("per-op overhead, 16-element ops", mean, 0.3, at_most=True, unit="us")
    print(f"{'mean':<12}{'':>22}{mean:>14.2f}   target <= 0.3 us: {met}")
    print("    what a hook adds to add when on (median of 7 rounds)")
    for name, added in hook_costs():
        print(f"    {name:<34}{added:>8.2f} us")
    cpu, neuron, ratio = training_step_ratio()
    print(
        "\n(b) TinyGPT training step (d=128, 2 layers, seq 64, batch 8, AdamW; median of 9 "
        "paired rounds)"
    )
    print(
        f"cpu {cpu * 1e3:.2f} ms, neuron {neuron * 1e3:.2f} ms, ratio neuron/cpu {ratio:.3f}"
        f"   target <= 1.03: {verdict('eager training step vs CPU', ratio, 1.03, at_most=True)}"
    )


if __name__ == "__main__":
    main()
