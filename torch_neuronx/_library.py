"""Loads the C++ runtime and registers the ``neuron`` device with PyTorch."""

import logging
import os
import sys

import torch

_SO_PREFIX = "_C."


def _library_path():
    import torch_neuronx

    for folder in torch_neuronx.__path__:
        for name in sorted(os.listdir(folder)):
            if name.startswith(_SO_PREFIX) and name.endswith(".so"):
                return os.path.join(folder, name)
    raise ImportError(
        "torch_neuronx's C++ extension is not built. Run `make install` (or "
        "`pip install --no-build-isolation -e .`) in the torchneuron checkout."
    )


def other_privateuse1_backend():
    """The name of another backend that already owns PrivateUse1, or None."""
    name = torch._C._get_privateuse1_backend_name()
    return None if name in ("privateuseone", "neuron") else name


def yield_to(backend):
    """Leaves PrivateUse1 to ``backend``: nothing is loaded or registered."""
    logging.getLogger("torch_neuronx").warning(
        "PrivateUse1 is already the %r device of another backend: torch_neuronx leaves it "
        "registered and creates no neuron device (torch.neuron). Import torch_neuronx first, "
        "or run without the other backend, to use neuron.",
        backend,
    )


def load():
    """Loads _C once (it registers the allocator, guard, hooks and kernels) and tells it which
    platform to emulate, before anything asks for a device."""
    if not hasattr(torch.ops.neuron, "route"):
        torch.ops.load_library(_library_path())
        from torch_neuronx import _platforms as platforms

        platforms.configure_device()


def register_device_module(module):
    """Names PrivateUse1 ``neuron``, installs ``torch.neuron`` and routes ATen ops."""
    if torch._C._get_privateuse1_backend_name() != "neuron":
        torch.utils.rename_privateuse1_backend("neuron")
    if not hasattr(torch, "neuron"):
        torch._register_device_module("neuron", module)
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )
    from torch_neuronx import _op_policy as op_policy

    torch.ops.neuron.route(
        op_policy.cpu_fallback_ops(),
        op_policy.boolean_mask_ops(),
        op_policy.device_selecting_ops(),
        op_policy.host_composite_ops(),
        op_policy.fp8_data_ops(),
        op_policy.native_namespaces(),
    )
    torch.ops.neuron.set_fusable(*op_policy.fusable_ops())
    # The emulated cores compute on the host's CPU threads. A backward pass handed to a
    # per-device autograd thread would run a second OpenMP team that contends with this
    # thread's; running it on the calling thread, as CPU tensors do, keeps one team.
    torch._C._set_multithreading_enabled(False)
    sys.modules.setdefault("torch.neuron", module)
    _format_values_on_host()


def _format_values_on_host():
    """Makes print() format a neuron tensor's values from a zero-copy host view."""
    # Torch formats a tensor with ops on its device (masked_select, .double(), .half()).
    # Printing is not the user's computation: it must not be tracked as a CPU fallback, nor meet
    # the 64-bit or FP8 policies, nor fail under NEURON_FALLBACK_ENABLED=0. Torch itself moves
    # xla and lazy tensors to the CPU before formatting them.
    format_values = torch._tensor_str._tensor_str
    if getattr(format_values, "_neuron_host_view", False):
        return

    def format_host_values(tensor, indent):
        if tensor.device.type == "neuron":
            torch.ops.neuron.run_queue("read")
            tensor = torch.ops.neuron.as_cpu(tensor.detach())
        return format_values(tensor, indent)

    format_host_values._neuron_host_view = True
    torch._tensor_str._tensor_str = format_host_values
