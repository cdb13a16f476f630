"""``torch.compile(model)`` on neuron tensors compiles with the neuron backend.

TorchNeuron selects its backend automatically when a graph runs on a Neuron device. The
default backend, Inductor, has no neuron device, so a graph with neuron inputs, parameters or
buffers goes to the neuron backend instead; every other graph still goes to Inductor.
"""

import functools
import warnings

import torch
from torch.utils import _pytree as pytree


def _on_neuron(gm, example_inputs):
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    tensors += [*gm.parameters(), *gm.buffers()]
    # A graph may create its neuron tensors itself, with no tensor inputs (create_block_mask).
    for node in gm.graph.nodes:
        tensors += [
            v
            for v in pytree.tree_leaves(node.meta.get("example_value"))
            if isinstance(v, torch.Tensor)
        ]
    return any(t.device.type == "neuron" for t in tensors)


def install():
    """Makes torch.compile's default (Inductor) backend hand neuron graphs to the neuron one."""
    inductor = torch._TorchCompileInductorWrapper
    compile_with_inductor = inductor.__call__

    @functools.wraps(compile_with_inductor)
    def compile_graph(self, gm, example_inputs, **kwargs):
        if not _on_neuron(gm, example_inputs):
            return compile_with_inductor(self, gm, example_inputs, **kwargs)
        from torch_neuronx._dynamo.backend import neuron_backend

        if self.config:
            warnings.warn(
                "torch.compile's mode and options configure Inductor, which does not compile "
                "for neuron devices; this graph is compiled by the neuron backend in its default "
                f"mode, without {sorted(self.config)}. Pass backend='neuron' and its options "
                "(model_name, fallback_execution) to choose them.",
                stacklevel=2,
            )
        return neuron_backend(gm, example_inputs)

    inductor.__call__ = compile_graph
