"""Offline serving on the emulated neuron device: vllm.LLM with torchneuron's vLLM plugin.

Run in the serving lane (`make install-vllm`):
    .venv-vllm/bin/python examples/serving/offline.py [MODEL_DIR]
Without MODEL_DIR it writes a tiny random-init Llama (and a tokenizer trained here) to a
temporary folder. The plugin is vLLM's platform plugin: nothing in this script names it.
"""

import os
import sys
import tempfile

# One process (the engine in this one), a small KV cache, no thread pinning: an example's needs.
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")

import torch
import vllm

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "support"))
import vllm_tiny


def main(model: str) -> None:
    llm = vllm.LLM(model=model, dtype="bfloat16", max_model_len=256, enforce_eager=True)
    params = vllm.SamplingParams(temperature=0.0, max_tokens=16)
    for output in llm.generate(vllm_tiny.PROMPTS, params):
        print(f"{output.prompt!r} -> {output.outputs[0].text!r}")
    print(f"neuron memory allocated: {torch.neuron.memory_allocated() / 2**30:.2f} GiB")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(vllm_tiny.write_model(folder))
