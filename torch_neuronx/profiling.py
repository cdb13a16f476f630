"""``torch_neuronx.profiling``: the import path of TorchNeuron's profiling guide (Neuron Explorer,
"Capture profiles"): ``from torch_neuronx.profiling import NeuronConfig, ProfileMode,
NeuronProfiler``. The names are torch_neuronx.profiler's (docs/profiling.md)."""

from torch_neuronx.profiler import NeuronConfig, NeuronProfiler, ProfileMode

__all__ = ["NeuronConfig", "NeuronProfiler", "ProfileMode"]
