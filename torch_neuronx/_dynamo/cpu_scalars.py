"""0-d CPU tensors in pointwise ops on device tensors, as eager takes them.

Eager reads a 0-d CPU tensor beside device tensors as a scalar (TensorIterator's CPU-scalar
rule). Inductor's joint-graph constant folding evaluates pointwise ops on one-element
stand-ins of shape [1] for uniform values, where that rule no longer applies, so
``torch.maximum(torch.zeros_like(x), torch.tensor([0.0]).reshape(()))`` failed to compile with
"Expected all tensors to be on the same device". This joint-graph pass copies such scalars to
the device first: a 0-d tensor promotes alike on either device, so values and dtypes are those
of eager, and after the graph is retargeted to the host the copy is a host copy Inductor fuses.
"""

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files


def _value(arg):
    value = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    return value if isinstance(value, torch.Tensor) else None


def _device_of_operands(node):
    for arg in node.args:
        value = _value(arg)
        if value is not None and value.device.type == "neuron":
            return value.device
    return None


def _is_cpu_scalar(arg):
    value = _value(arg)
    return value is not None and value.device.type == "cpu" and value.dim() == 0


class CpuScalarsToDevice(CustomGraphPass):
    """Inductor's ``joint_custom_pre_pass``: runs before its constant folding."""

    def __call__(self, graph: torch.fx.Graph) -> None:
        for node in list(graph.nodes):
            if (
                node.op != "call_function"
                or not isinstance(node.target, torch._ops.OpOverload)
                or torch.Tag.pointwise not in node.target.tags
            ):
                continue
            device = _device_of_operands(node)
            if device is None:
                continue
            node.args = tuple(
                _copied_to(graph, node, arg, device) if _is_cpu_scalar(arg) else arg
                for arg in node.args
            )

    def uuid(self) -> bytes:
        return get_hash_for_files((__file__,))


def _copied_to(graph, user, scalar, device):
    with graph.inserting_before(user):
        copy = graph.call_function(torch.ops.prims.device_put.default, (scalar, device))
    copy.meta["val"] = scalar.meta["val"].to(device)
    return copy
