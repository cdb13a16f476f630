"""Loads the C++ runtime and registers the ``neuron`` device with PyTorch."""

import os
import sys

import torch

_SO_PREFIX = "_C."


def _library_path():
    here = os.path.dirname(__file__)
    for name in sorted(os.listdir(here)):
        if name.startswith(_SO_PREFIX) and name.endswith(".so"):
            return os.path.join(here, name)
    raise ImportError(
        "torch_neuronx's C++ extension is not built. Run `make install` (or "
        "`pip install --no-build-isolation -e .`) in the torchneuron checkout."
    )


def load():
    """Loads _C once; it registers the allocator, guard, hooks and kernels."""
    if not hasattr(torch.ops.neuron, "route"):
        torch.ops.load_library(_library_path())


def register_device_module(module):
    """Names PrivateUse1 ``neuron``, installs ``torch.neuron`` and routes ATen ops."""
    if torch._C._get_privateuse1_backend_name() != "neuron":
        torch.utils.rename_privateuse1_backend("neuron")
    if not hasattr(torch, "neuron"):
        torch._register_device_module("neuron", module)
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )
    from torch_neuronx import op_policy

    torch.ops.neuron.route(op_policy.cpu_fallback_ops(), op_policy.boolean_mask_ops(),
                           op_policy.fp8_data_ops())
    # The emulated cores compute on the host's CPU threads. A backward pass handed to a
    # per-device autograd thread would run a second OpenMP team that contends with this
    # thread's; running it on the calling thread, as CPU tensors do, keeps one team.
    torch._C._set_multithreading_enabled(False)
    sys.modules.setdefault("torch.neuron", module)
