"""One test per patch point of torch_neuronx/vllm/_patches.py: the unpatched vLLM function still
needs the patch (so a vLLM release that fixes it makes the test fail, and the patch can go),
and the patched one gives the CPU's result on neuron tensors."""

import pytest
import torch
from vllm import _custom_ops

from torch_neuronx.vllm import VLLM_VERSION
from torch_neuronx.vllm import _patches as patches


def test_the_patches_are_pinned_to_the_installed_vllm():
    assert patches.installed_vllm_version().split("+")[0] == VLLM_VERSION


def _onednn(x, weight, bias):
    handler = _custom_ops.create_onednn_mm(weight.t(), 32)
    return handler, (handler, x, bias)


def _packed(x, weight, bias):
    packed = torch.ops._C.convert_weight_packed(weight)
    return packed, (x, packed, weight.shape[0], bias)


CASES = {
    "onednn_mm": (_onednn, torch.float32),
    "weight_packed_linear_cpu": (_packed, torch.bfloat16),
}


@pytest.mark.parametrize("name", sorted(patches.PATCHED))
def test_patched_gemm_allocates_beside_its_input_and_matches_the_cpu(name):
    make_args, dtype = CASES[name]
    original = getattr(_custom_ops, name)
    assert original is not patches.PATCHED[name], "this process must see vLLM's own function"
    torch.manual_seed(0)
    x, weight, bias = torch.randn(5, 64, dtype=dtype), torch.randn(32, 64, dtype=dtype), None
    _keep, cpu_args = make_args(x, weight, bias)
    expected = original(*cpu_args)
    _keep_neuron, neuron_args = make_args(x.to("neuron"), weight.to("neuron"), bias)
    with pytest.raises(RuntimeError, match="same device"):
        original(*neuron_args)
    result = patches.PATCHED[name](*neuron_args)
    assert result.device.type == "neuron"
    assert torch.equal(result.cpu(), expected)
