"""TorchNeuron's top-level device API: ``torch_neuronx.current_device()``, ``Stream``,
``synchronize()``, ``memory_*``... are torch.neuron's own objects.

Documented at AWS's torch.neuron reference (awsdocs-neuron .../torch/reference/api/
torch-neuron-module.html), the memory-profiling guide (.../torch/guides/
memory-profiling-guide.html: ``torch_neuronx.memory_*``) and used by AWS's multi-node
data-parallel example (``torch_neuronx.current_device()``) and the Neuron Explorer multi-rank
profiling example (``torch_neuronx.Stream``, ``torch_neuronx.stream``,
``torch_neuronx.synchronize``)."""

import pytest
import torch
from pyrun import run_python

import torch_neuronx
from torch_neuronx.neuron import DEVICE_API


@pytest.mark.parametrize("name", DEVICE_API)
def test_each_name_is_torch_neuron_s_object(name):
    assert getattr(torch_neuronx, name) is getattr(torch.neuron, name)
    assert name in torch_neuronx.__all__


def test_current_and_set_device_are_the_device_module_s():
    before = torch_neuronx.current_device()
    try:
        torch_neuronx.set_device(2)
        assert torch_neuronx.current_device() == torch.neuron.current_device() == 2
        assert torch.empty(1, device="neuron").device == torch.device("neuron:2")
        with torch_neuronx.device(1):
            assert torch.accelerator.current_device_index() == 1
        assert torch_neuronx.current_device() == 2
    finally:
        torch_neuronx.set_device(before)
    assert torch_neuronx.device_count() == torch.accelerator.device_count()
    assert torch_neuronx.get_device_properties(0).total_memory == 24 * 2**30


def test_work_on_a_torch_neuronx_stream_matches_the_cpu():
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    side = torch_neuronx.Stream(torch.device("neuron"))
    with torch_neuronx.stream(side):
        assert torch_neuronx.current_stream() == side
        out = a.to("neuron") @ b.to("neuron")
    assert torch_neuronx.current_stream() == torch_neuronx.default_stream()
    event = torch_neuronx.Event()
    event.record(side)
    torch_neuronx.synchronize()
    assert event.query()
    torch.testing.assert_close(out.cpu(), a @ b)


def test_memory_functions_count_a_tensor():
    torch_neuronx.empty_cache()
    base = torch_neuronx.memory_allocated()
    torch_neuronx.reset_peak_memory_stats()
    x = torch.empty(1 << 20, device="neuron")
    assert torch_neuronx.memory_allocated() == base + (4 << 20)
    assert torch_neuronx.max_memory_allocated() == base + (4 << 20)
    assert torch_neuronx.memory_reserved() >= torch_neuronx.memory_allocated()
    assert torch_neuronx.memory_stats()["allocated_bytes.all.current"] == base + (4 << 20)
    assert "Allocated memory" in torch_neuronx.memory_summary()
    del x
    assert torch_neuronx.memory_allocated() == base


def test_runtime_initialised_on_first_use_only():
    out = run_python(
        "import torch, torch_neuronx\n"
        "print(torch_neuronx.is_neuron_runtime_initialized())\n"
        "torch.ones(1, device='neuron')\n"
        "print(torch_neuronx.is_neuron_runtime_initialized(), torch.neuron.is_initialized())"
    )
    assert out.stdout.split() == ["False", "True", "True"], out.stderr


def test_another_privateuse1_backend_imported_first_keeps_the_device():
    """The torch.neuron reference: "If another PrivateUse1 backend was imported first,
    torch_neuronx leaves the device registration to that backend and torch.neuron is not
    created." The explicit import (autoload off) neither raises nor takes PrivateUse1."""
    out = run_python(
        "import types, torch\n"
        "torch.utils.rename_privateuse1_backend('otherdev')\n"
        "module = types.ModuleType('otherdev')\n"
        "module.is_available = lambda: False\n"
        "torch._register_device_module('otherdev', module)\n"
        "import torch_neuronx\n"
        "print(hasattr(torch, 'neuron'), torch._C._get_privateuse1_backend_name(),\n"
        "      torch.device('otherdev:0'), torch_neuronx.__all__)\n"
        "try:\n"
        "    torch_neuronx.current_device()\n"
        "except AttributeError as e:\n"
        "    print(e)\n",
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "False otherdev otherdev:0 []"
    assert "PrivateUse1 is the 'otherdev' device of a backend imported before" in lines[1]
    assert "leaves it registered and creates no neuron device" in out.stderr


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_kernel_overrideable_selects_the_fused_attention(causal):
    """TorchNeuron routes scaled_dot_product_attention to the overrideable fused kernel
    (_scaled_dot_product_fused_attention_overrideable), so ``sdpa_kernel(OVERRIDEABLE)``
    selects it; gradients flow as without the context."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (torch.randn(2, 4, 16, 8, requires_grad=True) for _ in range(3))
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    expected.sum().backward()
    dq, q.grad = q.grad, None
    qn, kn, vn = (t.detach().to("neuron").requires_grad_() for t in (q, k, v))
    with sdpa_kernel(SDPBackend.OVERRIDEABLE):
        out = torch.nn.functional.scaled_dot_product_attention(qn, kn, vn, is_causal=causal)
    out.sum().backward()
    torch.testing.assert_close(out.detach().cpu(), expected.detach())
    torch.testing.assert_close(qn.grad.cpu(), dq)
    with sdpa_kernel(SDPBackend.OVERRIDEABLE):
        torch.nn.functional.scaled_dot_product_attention(qn, kn, vn)
        # The call's stand-in kernels are enabled only during it.
        assert not torch.backends.cuda.math_sdp_enabled()
        assert not torch.backends.cuda.flash_sdp_enabled()
