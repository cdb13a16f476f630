"""A small training step compiled with the neuron backend, run in this or a fresh process."""

import json
import os
import subprocess
import sys

import compile_checks
import torch

import torch_neuronx._dynamo as neuron_dynamo


def run():
    """Compiles and runs forward and backward; returns correctness and cache outcomes."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()).to("neuron")
    x = torch.randn(4, 8, device="neuron")
    out = torch.compile(model, backend="neuron", options={"model_name": "mlp"})(x)
    out.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ref = model(x)
    ref.sum().backward()
    ok = torch.allclose(out.cpu(), ref.cpu(), atol=1e-5) and all(
        torch.allclose(g.cpu(), p.grad.cpu(), atol=1e-5) for g, p in zip(grads, model.parameters())
    )
    metrics = neuron_dynamo.get_dynamo_metrics()
    return {
        "ok": ok,
        "compile_time_s": metrics["compile_time_s"],
        "hits": {s["kind"]: s["cache_hit"] for s in metrics["graphs"][0]["subgraphs"]},
    }


def start(cache_dir):
    """Runs ``run`` in a fresh interpreter that uses ``cache_dir``."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = f"import sys; sys.path.insert(0, {here!r}); import mlp_job; mlp_job.main()"
    env = {**os.environ, "TORCH_NEURONX_NEFF_CACHE_DIR": str(cache_dir)}
    return subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def result(proc):
    """What a process made by ``start`` reported."""
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-4000:]
    return json.loads(out.strip().splitlines()[-1])


def main():
    """``run`` in a process of its own, which the suite's check of graph calls does not reach."""
    with compile_checks.logging_graph_calls() as calls:
        outcome = run()
    compile_checks.check_graph_calls(calls, "compiled")
    print(json.dumps(outcome))
