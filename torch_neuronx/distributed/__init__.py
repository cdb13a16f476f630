"""torch.distributed on NeuronCores: the ``neuron`` c10d backend, registered on import.

``init_process_group(backend="neuron")`` (or a bare ``init_process_group()``) gives neuron
tensors the C++ backend in ``torch_neuronx._C_dist``, which runs every collective on device
memory over gloo's TCP transport; CPU tensors in the same group go straight to gloo.
"""

from torch_neuronx.distributed.backend import register
from torch_neuronx.distributed.launch import bind_local_core

register()

__all__ = ["bind_local_core", "register"]
