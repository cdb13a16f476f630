"""``torch.compile(backend="neuron")``: the Dynamo backend, its compile cache and metrics.

Only ``metrics`` is imported here, so that ``torch_neuronx`` can re-export it without paying
for Dynamo and Inductor at ``import torch``.
"""

from torch_neuronx._dynamo.metrics import counters, get_dynamo_metrics, reset_dynamo_metrics

__all__ = ["counters", "get_dynamo_metrics", "reset_dynamo_metrics"]
