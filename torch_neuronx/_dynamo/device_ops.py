"""Custom ops with a neuron kernel and no host kernel, inside graphs compiled for the host.

A compiled graph runs every op on host aliases of device memory (compiler.py). An op that
another library registered for the neuron device only (vLLM registers its attention ops for the
platform's dispatch key; a user's ``torch.library.custom_op(device_types="neuron")``) has no
kernel for those aliases. The first graph that calls one gives it a host kernel that, while a
neuron graph runs, views its host arguments as neuron tensors over the same memory (no copy),
calls the op's neuron kernel as eager would, and hands the results back as host aliases;
mutations stay in place, the memory being the same. Outside a graph, host tensors are not
device memory, and the kernel refuses them as the missing kernel would have. A host tensor the
graph was called with is no device memory either: the op gets it as it would in eager.
"""

import torch
from torch.utils._pytree import tree_map

from torch_neuronx._dynamo import runtime

_libraries: dict[str, torch.library.Library] = {}


def has_host_kernel(op: torch._ops.OpOverload) -> bool:
    """Whether `op` has a kernel for host tensors (its own or a composite one)."""
    return any(
        torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key)
        for key in ("CPU", "CompositeExplicitAutograd", "CompositeImplicitAutograd")
    )


def has_device_kernel_only(op: torch._ops.OpOverload) -> bool:
    """Whether `op` (not aten's or prims') can run on neuron tensors but not on host ones."""
    if op.namespace in ("aten", "prims") or has_host_kernel(op):
        return False
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "PrivateUse1")


def add_host_kernel(op: torch._ops.OpOverload) -> None:
    """Gives `op`, which has a neuron kernel only, the host kernel compiled graphs call."""
    library = _libraries.get(op.namespace)
    if library is None:
        library = _libraries[op.namespace] = torch.library.Library(op.namespace, "IMPL")
    overload = op._opname if op._overloadname == "default" else f"{op._opname}.{op._overloadname}"
    library.impl(overload, _on_device(op), "CPU")


def _on_device(op):
    def run(*args, **kwargs):
        if not runtime.graph_running():
            raise NotImplementedError(
                f"{op.name()} has no CPU kernel: it runs on neuron tensors (and on the host "
                "views of them inside graphs compiled for neuron); move its inputs to neuron"
            )
        core = torch.neuron.current_device()

        def to_device(value):
            if isinstance(value, torch.Tensor) and value.device.type == "cpu":
                alias = torch.ops.neuron.to_device_alias(value, core)
                # Not device memory (a host tensor the graph was called with): as in eager.
                return alias if alias.data_ptr() == value.data_ptr() else value
            return value

        def to_host(value):
            if isinstance(value, torch.Tensor) and value.device.type == "neuron":
                return torch.ops.neuron.as_cpu(value)
            return value

        args, kwargs = tree_map(to_device, (args, kwargs))
        return tree_map(to_host, op(*args, **kwargs))

    return run
