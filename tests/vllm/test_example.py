"""examples/serving/offline.py runs as written, on the neuron device, and `torchneuron check`
finds it ready."""

import pathlib
import subprocess
import sys

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
