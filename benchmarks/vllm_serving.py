"""Serving throughput of vLLM on the emulated neuron device against stock vLLM on the CPU, in
one run: output tokens/s offline (vllm.LLM) and through the OpenAI server, and their ratio
(neuron over CPU; above 1 is faster). The model is the serving tests' tiny random-init Llama,
so the numbers measure vLLM's and the device's overheads, not model FLOPs.

Run in the serving lane: .venv-vllm/bin/python benchmarks/vllm_serving.py
"""

import concurrent.futures
import json
import os
import sys
import tempfile
import time

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support")
)
from vllm_runs import STOCK_ENV, openai_server, post, vllm_env

PROMPTS = 16
MAX_TOKENS = 64
ROUNDS = 3
REPEATS = 2


def offline_worker(model):
    """In the measured process: output tokens/s of vllm.LLM, the best of ROUNDS batches."""
    import vllm
    from vllm_tiny import PROMPTS as BASE

    llm = vllm.LLM(model=model, dtype="bfloat16", seed=0, max_model_len=256, enforce_eager=True)
    prompts = [BASE[i % len(BASE)] + f" {i}" for i in range(PROMPTS)]
    params = vllm.SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True)
    llm.generate(prompts, params, use_tqdm=False)
    best = 0.0
    for _ in range(ROUNDS):
        start = time.perf_counter()
        outputs = llm.generate(prompts, params, use_tqdm=False)
        elapsed = time.perf_counter() - start
        best = max(best, sum(len(o.outputs[0].token_ids) for o in outputs) / elapsed)
    print("RESULT " + json.dumps(best))


def offline(model, env):
    import subprocess

    proc = subprocess.run(
        [sys.executable, __file__, "--offline-worker", model],
        env=vllm_env(**env),
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the offline run failed:\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def server(model, env, log):
    """Output tokens/s of PROMPTS concurrent /v1/completions requests, the best of ROUNDS."""
    with openai_server(model, log, "--dtype", "bfloat16", **env) as base:

        def complete(i):
            body = {"model": model, "prompt": f"the quick brown fox {i}", "temperature": 0.0,
                    "max_tokens": MAX_TOKENS, "ignore_eos": True}  # fmt: skip
            with post(base + "/v1/completions", body) as response:
                return json.load(response)["usage"]["completion_tokens"]

        best = 0.0
        with concurrent.futures.ThreadPoolExecutor(PROMPTS) as pool:
            list(pool.map(complete, range(PROMPTS)))
            for _ in range(ROUNDS):
                start = time.perf_counter()
                tokens = sum(pool.map(complete, range(PROMPTS)))
                best = max(best, tokens / (time.perf_counter() - start))
        return best


def main():
    import vllm_tiny

    with tempfile.TemporaryDirectory() as folder:
        model = vllm_tiny.write_model(folder)
        sides = {"vLLM-CPU": STOCK_ENV, "neuron": {}}
        results = {name: {"offline": 0.0, "server": 0.0} for name in sides}
        # The sides alternate, the best of each kept, so that load from other processes
        # weighs on both alike.
        for _ in range(REPEATS):
            for name, env in sides.items():
                best = results[name]
                best["offline"] = max(best["offline"], offline(model, env))
                log = os.path.join(folder, f"server-{name}.log")
                best["server"] = max(best["server"], server(model, env, log))
    print(
        f"{PROMPTS} prompts x {MAX_TOKENS} tokens, bfloat16, output tokens/s "
        f"(best of {REPEATS} alternating runs x {ROUNDS} batches)"
    )
    print(f"{'':10}{'vLLM-CPU':>12}{'neuron':>12}{'ratio':>8}")
    for kind in ("offline", "server"):
        cpu, neuron = results["vLLM-CPU"][kind], results["neuron"][kind]
        print(f"{kind:10}{cpu:12.1f}{neuron:12.1f}{neuron / cpu:8.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--offline-worker"]:
        offline_worker(sys.argv[2])
    else:
        main()
