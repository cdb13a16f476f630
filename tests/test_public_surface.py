"""torch_neuronx's public surface is pinned: the names of ``torch_neuronx.__all__`` and the
public modules. Everything else is internal, named with a leading underscore (a module, or a
package and all it holds), so that plumbing does not read as API (docs/architecture.md)."""

import importlib
import pathlib

import torch_neuronx
from torch_neuronx import neuron

ROOT = pathlib.Path(torch_neuronx.__file__).resolve().parent

# TorchNeuron's documented names (docs/fidelity.md) and this emulator's own additions
# (get_rng_source and friends, estimate), beside torch.neuron's device API re-exported on top.
TOP_LEVEL = {
    "NeuronConfig",
    "NeuronProfiler",
    "ProfileMode",
    "adaptive_eager",
    "clear_op_tracking",
    "distributed",
    "estimate",
    "get_dynamo_metrics",
    "get_executed_ops",
    "get_fallback_ops",
    "get_rng_source",
    "metrics",
    "neuron",
    "nki",
    "nki_op",
    "profiler",
    "profiling",
    "reset_dynamo_metrics",
    "rng_source",
    "set_rng_source",
    "wrap_nki",
}

# Modules a user imports by name: torch.neuron and the submodules torch.cuda has too, TorchNeuron's
# own modules, and the entry points (the CLI, the vLLM plugin). The Dynamo backend's entry point,
# torch_neuronx._dynamo.backend:neuron_backend, is a name in an internal package.
PUBLIC_MODULES = {
    "torch_neuronx",
    "torch_neuronx.adaptive_eager",
    "torch_neuronx.cli",
    "torch_neuronx.distributed",
    "torch_neuronx.metrics",
    "torch_neuronx.neuron",
    "torch_neuronx.neuron.amp",
    "torch_neuronx.neuron.memory",
    "torch_neuronx.neuron.random",
    "torch_neuronx.neuron.streams",
    "torch_neuronx.nki",
    "torch_neuronx.nki_hop",
    "torch_neuronx.profiler",
    "torch_neuronx.profiling",
    "torch_neuronx.vllm",
}


def _module_names():
    for path in sorted(ROOT.rglob("*.py")):
        parts = ["torch_neuronx", *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        yield parts


def test_all_is_the_listed_names_and_the_device_api():
    assert set(torch_neuronx.__all__) == TOP_LEVEL | set(neuron.DEVICE_API)
    assert len(torch_neuronx.__all__) == len(set(torch_neuronx.__all__))


def test_every_public_name_resolves():
    unresolved = [name for name in torch_neuronx.__all__ if not hasattr(torch_neuronx, name)]
    assert unresolved == []


def test_no_public_module_beyond_the_listed_ones():
    public = {
        ".".join(parts)
        for parts in _module_names()
        if not any(part.startswith("_") for part in parts)
    }
    assert public == PUBLIC_MODULES


def test_every_public_module_imports():
    for name in sorted(PUBLIC_MODULES):
        importlib.import_module(name)
