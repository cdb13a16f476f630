"""torch.distributed on NeuronCores: the ``neuron`` c10d backend, registered on import.

``init_process_group("neuron")`` gives neuron tensors the C++ backend of
``torch_neuronx._C_dist``, which runs every collective on device memory over gloo's TCP
transport; CPU tensors of the same group go to that gloo transport untouched. A bare
``init_process_group()`` picks ``neuron`` for neuron tensors, as it picks NCCL on CUDA.
"""

from torch_neuronx.distributed._backend import register
from torch_neuronx.distributed._launch import bind_local_core

register()

__all__ = ["bind_local_core", "register"]
