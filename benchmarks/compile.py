"""torch.compile(backend="neuron") on a GPT-style training step: speed and compile cache.

Prints, from one run:
  1. compiled neuron vs eager neuron step time (target: at least 1.3x faster), with its bound:
     eager neuron vs Inductor on the CPU (compiled neuron code is Inductor's, on host memory),
     and eager on the CPU for comparison;
  2. compiled neuron vs torch.compile(backend="inductor") on CPU (target: at most 1.10x its time);
  3. cold vs warm compile time, each in a fresh process (target: warm at least 10x faster).

The model is examples/tiny_gpt.py's TinyGPT (d=128, 2 layers, seq 64, batch 8); the optimizer
(SGD) runs eagerly in every variant, so the variants differ only in how the model runs. The
variants are timed in interleaved rounds and each keeps its best round, so that load from
other processes on the machine affects them alike. Compile times are medians over several
fresh processes: cold ones each on an empty cache, warm ones on the first cold one's cache.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from targets import verdict

import torch_neuronx._dynamo as neuron_dynamo

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from tiny_gpt import TinyGPT, batches

CONFIG = dict(vocab=64, d=128, heads=4, layers=2, seq=64)
BATCH = 8


def make_step(device, backend):
    """A training step on ``device``, with the model compiled by ``backend`` (None: eager)."""
    torch.manual_seed(0)
    model = TinyGPT(**CONFIG).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    forward = torch.compile(model, backend=backend, fullgraph=True) if backend else model

    def step(x, y):
        loss = forward(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return step


def step_times(variants, steps, repeats):
    """Best mean step time of each (device, backend) variant, timed in interleaved rounds."""
    x, y = next(batches(1, batch=BATCH, seq=CONFIG["seq"], vocab=CONFIG["vocab"]))
    runs = {}
    for name, (device, backend) in variants.items():
        step, xd, yd = make_step(device, backend), x.to(device), y.to(device)
        for _ in range(3):
            step(xd, yd).item()
        runs[name] = (step, xd, yd)
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(repeats):
        for name, (step, xd, yd) in runs.items():
            start = time.perf_counter()
            for _ in range(steps):
                loss = step(xd, yd)
            loss.item()
            best[name] = min(best[name], (time.perf_counter() - start) / steps)
    return best


def first_step():
    """In a fresh process: the compile cost of the first compiled step, as JSON."""
    step = make_step("neuron", "neuron")
    x, y = next(batches(1, batch=BATCH, seq=CONFIG["seq"], vocab=CONFIG["vocab"]))
    x, y = x.to("neuron"), y.to("neuron")
    start = time.perf_counter()
    step(x, y).item()
    first = time.perf_counter() - start
    steady = []
    for _ in range(3):
        start = time.perf_counter()
        step(x, y).item()
        steady.append(time.perf_counter() - start)
    metrics = neuron_dynamo.get_dynamo_metrics()
    print(
        json.dumps(
            {
                "compile_s": first - statistics.median(steady),
                "hits": metrics["cache_hits"],
                "misses": metrics["cache_misses"],
            }
        )
    )


def compile_in_fresh_process(cache_dir, threads):
    env = {**os.environ, "TORCH_NEURONX_NEFF_CACHE_DIR": cache_dir}
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--first-step", f"--threads={threads}"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def compile_times(runs):
    """Median compile time of fresh-process runs, with every sample and the cache outcome."""
    samples = [r["compile_s"] for r in runs]
    hits, misses = {r["hits"] for r in runs}, {r["misses"] for r in runs}
    detail = ", ".join(f"{t:.2f}" for t in samples)
    return (
        statistics.median(samples),
        f"median of {len(samples)}: {detail}; "
        f"{'/'.join(map(str, sorted(misses)))} cache misses, "
        f"{'/'.join(map(str, sorted(hits)))} hits",
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cold", type=int, default=2, help="fresh processes on empty caches")
    parser.add_argument("--warm", type=int, default=3, help="fresh processes on a filled cache")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--first-step", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.first_step:
        return first_step()

    print(
        f"TinyGPT {CONFIG}, batch {BATCH}, {args.threads} threads; "
        f"best of {args.repeats} interleaved rounds of {args.steps} steps"
    )
    with tempfile.TemporaryDirectory(prefix="neff-cache-") as root:
        caches = [os.path.join(root, str(i)) for i in range(args.cold)]
        cold = [compile_in_fresh_process(cache, args.threads) for cache in caches]
        warm = [compile_in_fresh_process(caches[0], args.threads) for _ in range(args.warm)]
        os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = caches[0]
        times = step_times(
            {
                "eager": ("neuron", None),
                "compiled": ("neuron", "neuron"),
                "inductor": ("cpu", "inductor"),
                "cpu eager": ("cpu", None),
            },
            args.steps,
            args.repeats,
        )
    eager, compiled, inductor = times["eager"], times["compiled"], times["inductor"]
    # Compiled neuron code is Inductor's C++ for the CPU, on the same memory: at best it runs as
    # fast as Inductor on the CPU, so that is the most compiling can gain over eager neuron.
    bound = eager / inductor
    (cold_s, cold_detail), (warm_s, warm_detail) = compile_times(cold), compile_times(warm)

    print(f"eager neuron            {eager * 1e3:8.2f} ms/step")
    print(f"compiled neuron         {compiled * 1e3:8.2f} ms/step")
    print(f"inductor on CPU         {inductor * 1e3:8.2f} ms/step")
    print(f"eager on CPU            {times['cpu eager'] * 1e3:8.2f} ms/step")
    print(f"compile, cold process   {cold_s:8.2f} s  ({cold_detail})")
    print(f"compile, warm process   {warm_s:8.2f} s  ({warm_detail})")
    speedup, vs_inductor, cache_gain = eager / compiled, compiled / inductor, cold_s / warm_s
    met = verdict("compiled step vs eager neuron", speedup, 1.3, at_most=False)
    print(
        f"1. compiled vs eager neuron:    {speedup:5.2f}x faster   (target >= 1.30x: {met}; "
        f"bound {bound:.2f}x: eager neuron vs Inductor on the CPU)"
    )
    met = verdict("compiled step vs Inductor on CPU", vs_inductor, 1.1, at_most=True)
    print(f"2. compiled neuron vs inductor: {vs_inductor:5.2f}x its time (target <= 1.10x: {met})")
    met = verdict("cold vs warm compile", cache_gain, 10, at_most=False)
    print(f"3. cold vs warm compile:        {cache_gain:5.2f}x faster   (target >= 10x: {met})")


if __name__ == "__main__":
    main()
