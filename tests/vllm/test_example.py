"""examples/serving/offline.py runs as written, on the neuron device; `torchneuron check` finds
it ready and `torchneuron estimate` estimates its decode steps."""

import json
import pathlib
import subprocess
import sys

import pytest
from vllm_runs import RUN_TIMEOUT_S, vllm_env
from vllm_tiny import PROMPTS

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "serving" / "offline.py"


def test_offline_example_serves_every_prompt_from_neuron_memory(tiny_model):
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), tiny_model],
        env=vllm_env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    # vLLM logs to stdout too.
    lines = proc.stdout.splitlines()
    served = [line.split(" -> ")[0] for line in lines if " -> " in line]
    assert served == [repr(p) for p in PROMPTS]
    (memory,) = [line for line in lines if line.startswith("neuron memory allocated: ")]
    allocated = float(memory.removeprefix("neuron memory allocated: ").removesuffix(" GiB"))
    assert allocated >= 1.0, "the 1 GiB KV cache is in neuron memory"


def test_torchneuron_check_finds_the_offline_example_ready_with_no_fallback(tiny_model):
    torchneuron = pathlib.Path(sys.executable).parent / "torchneuron"
    proc = subprocess.run(
        [str(torchneuron), "check", "--fail-on", "warning", str(EXAMPLE), tiny_model],
        env=vllm_env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "**Verdict: ready** (0 blocker(s), 0 warning(s))" in proc.stdout
    assert " 0 CPU-fallback calls" in proc.stdout


def test_torchneuron_estimate_reports_decode_tokens_per_second_of_the_offline_example(tiny_model):
    torchneuron = pathlib.Path(sys.executable).parent / "torchneuron"
    proc = subprocess.run(
        [str(torchneuron), "estimate", "--json", str(EXAMPLE), tiny_model],
        env=vllm_env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    # 16 tokens per prompt: one from the prefill, 15 from decode steps of all 4 prompts.
    assert report["step"].startswith("the last of 15 decode step(s)")
    assert report["tokens_per_step"] == len(PROMPTS)
    config = json.loads((pathlib.Path(tiny_model) / "config.json").read_text())
    hidden, inner, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    heads, kv_heads, head = (
        config[k] for k in ("num_attention_heads", "num_key_value_heads", "head_dim")
    )
    per_layer = hidden * (heads + 2 * kv_heads) * head + heads * head * hidden + 3 * hidden * inner
    gemm_flops = 2 * len(PROMPTS) * (config["num_hidden_layers"] * per_layer + hidden * vocab)
    rates = {}
    for platform in ("trn2", "trn3"):
        summary = report["platforms"][platform]
        ops = summary["ops"]
        gemms = [
            name for name in ops if name.startswith(("_C.onednn_mm", "_C.weight_packed_linear"))
        ]
        assert sum(ops[name]["flops"] for name in gemms) == gemm_flops
        attention = ops["vllm.unified_attention_with_output.default"]
        assert attention["engine"] == "TensorE" and attention["flops"] > 0
        (core,) = [s for s in summary["scopes"] if s["scope"] == "NeuronCore"]
        assert core["tokens_per_s"] == pytest.approx(len(PROMPTS) / summary["step_time_s"])
        rates[platform] = core["tokens_per_s"]
    assert rates["trn3"] > rates["trn2"]
