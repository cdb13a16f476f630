"""Ops that other libraries define through torch.library run on neuron as ATen's fallback-tier
ops do: with only a CPU kernel they take the CPU-fallback tier (op_policy.json, library_ops)."""

import pytest
import torch
from pyrun import run_python

import torch_neuronx


@torch.library.custom_op("neurontest::scaled_sin", mutates_args=(), device_types="cpu")
def scaled_sin(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.sin(x) * scale


@scaled_sin.register_fake
def _scaled_sin_shape(x, scale):
    return torch.empty_like(x)


def _keep_input(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.scale = inputs[1]


def _scaled_sin_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * torch.cos(x) * ctx.scale, None


scaled_sin.register_autograd(_scaled_sin_backward, setup_context=_keep_input)


@torch.library.custom_op("neurontest::clamp_", mutates_args=("x",), device_types="cpu")
def clamp_(x: torch.Tensor, bound: float) -> None:
    x.clamp_(-bound, bound)


@torch.library.custom_op("neurontest::doubled", mutates_args=(), device_types="cpu")
def doubled(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@doubled.register_kernel("neuron")
def _doubled_on_neuron(x):
    return x + x


# Defined the way torchvision defines its ops: a schema, a CPU kernel, and a backward that is
# itself an op with only a CPU kernel.
_LIB = torch.library.Library("neurontest_lib", "DEF")
_LIB.define("cube(Tensor x) -> Tensor")
_LIB.define("cube_backward(Tensor grad, Tensor x) -> Tensor")
_LIB.define("cuda_only(Tensor x) -> Tensor")
_LIB.impl("cube", lambda x: x * x * x, "CPU")
_LIB.impl("cube_backward", lambda grad, x: grad * 3 * x * x, "CPU")
_LIB.impl("cuda_only", lambda x: x, "CUDA")


def _cube_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return torch.ops.neurontest_lib.cube_backward(grad, x)


torch.library.register_autograd(
    "neurontest_lib::cube",
    _cube_backward,
    setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0]),
)

CPU_ONLY_OPS = {
    "neurontest::scaled_sin": lambda x: scaled_sin(x, 1.5),
    "neurontest_lib::cube": torch.ops.neurontest_lib.cube,
}


def _tracked(fn, *args):
    """fn(*args) and the ops it ran: (result, fallback ops, natively executed ops)."""
    torch_neuronx.clear_op_tracking()
    result = fn(*args)
    return result, torch_neuronx.get_fallback_ops(), torch_neuronx.get_executed_ops()


@pytest.mark.parametrize("name", sorted(CPU_ONLY_OPS))
def test_cpu_only_op_matches_cpu_through_the_fallback_tier(name):
    x = torch.randn(4, 5)
    result, fallback, native = _tracked(CPU_ONLY_OPS[name], x.to("neuron"))
    assert result.device.type == "neuron"
    assert torch.equal(result.cpu(), CPU_ONLY_OPS[name](x))
    assert name in fallback
    assert name not in native


@pytest.mark.parametrize("name", sorted(CPU_ONLY_OPS))
def test_cpu_only_op_gradients_match_cpu(name):
    x = torch.randn(3, 4, requires_grad=True)
    xn = x.detach().to("neuron").requires_grad_()
    CPU_ONLY_OPS[name](x).pow(2).sum().backward()
    _, fallback, _ = _tracked(lambda: CPU_ONLY_OPS[name](xn).pow(2).sum().backward())
    assert xn.grad.device.type == "neuron"
    assert torch.equal(xn.grad.cpu(), x.grad)
    assert name in fallback


def test_backward_op_with_only_a_cpu_kernel_falls_back_too():
    xn = torch.randn(3, device="neuron", requires_grad=True)
    y = torch.ops.neurontest_lib.cube(xn).sum()
    _, fallback, _ = _tracked(y.backward)
    assert "neurontest_lib::cube_backward" in fallback


def test_mutating_op_writes_through_to_the_device_tensor_and_its_views():
    x = torch.randn(4, 6) * 3
    n = x.to("neuron")
    _, fallback, _ = _tracked(clamp_, n[:, 1::2], 1.0)
    clamp_(x[:, 1::2], 1.0)
    assert torch.equal(n.cpu(), x)
    assert fallback == ["neurontest::clamp_"]
    whole = torch.randn(5) * 3
    on_device = whole.to("neuron")
    clamp_(on_device, 0.5)
    clamp_(whole, 0.5)
    assert torch.equal(on_device.cpu(), whole)


def test_op_with_a_neuron_kernel_runs_natively():
    x = torch.randn(4)
    result, fallback, native = _tracked(doubled, x.to("neuron"))
    assert torch.equal(result.cpu(), doubled(x))
    assert fallback == []
    assert "aten::add.Tensor" in native, "the neuron kernel ran, on the device"


def test_op_without_a_cpu_kernel_is_refused_and_not_reported_as_a_fallback():
    torch_neuronx.clear_op_tracking()
    with pytest.raises(NotImplementedError, match="'neurontest_lib::cuda_only' is not supported"):
        torch.ops.neurontest_lib.cuda_only(torch.ones(2, device="neuron"))
    assert torch_neuronx.get_fallback_ops() == []


def test_pytorch_own_namespace_runs_natively():
    # FSDP2's fsdp::copy_ has CPU and CUDA kernels but none for neuron.
    import torch.distributed.fsdp

    target, source = torch.zeros(6, device="neuron"), torch.randn(6)
    _, fallback, native = _tracked(torch.ops.fsdp.copy_, target, source.to("neuron"))
    assert torch.equal(target.cpu(), source)
    assert fallback == []
    assert "fsdp::copy_" in native


@pytest.mark.graph_calls("compiled")
def test_compiled_graph_reports_the_op_as_eager_does():
    def step(x):
        return scaled_sin(x * 2, 0.5) + x

    x = torch.randn(5)
    compiled = torch.compile(step, backend="neuron", fullgraph=True)
    torch_neuronx.clear_op_tracking()
    for _ in range(2):
        assert torch.equal(compiled(x.to("neuron")).cpu(), step(x))
    assert torch_neuronx.get_fallback_ops() == ["neurontest::scaled_sin"]
    assert torch_neuronx.metrics.counters()["CompiledFallbackOp::neurontest::scaled_sin"] == 2


CHILD_OP = """
import torch, torch_neuronx

@torch.library.custom_op("childlib::twice", mutates_args=(), device_types="cpu")
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2

x = torch.ones(3, device="neuron")
for _ in range(3):
    y = twice(x)
print(y.cpu().tolist(), torch_neuronx.get_fallback_ops(), "childlib::twice" in
      torch_neuronx.get_executed_ops())
"""
WARNING = "Operator 'childlib::twice' executed via CPU fallback"


def test_fallback_warns_once_per_op():
    out = run_python(CHILD_OP)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[2.0, 2.0, 2.0] ['childlib::twice'] False"
    assert out.stderr.count(WARNING) == 1


def test_disabled_fallback_refuses_the_op():
    out = run_python(CHILD_OP, env={"NEURON_FALLBACK_ENABLED": "0"})
    assert out.returncode != 0
    assert (
        "RuntimeError: Operator 'childlib::twice' has no native neuron implementation and the "
        "CPU fallback is disabled (NEURON_FALLBACK_ENABLED=0)" in out.stderr
    )


def test_policy_file_can_name_a_library_native(tmp_path):
    policy = tmp_path / "policy.json"
    policy.write_text('{"library_ops": {"native_namespaces": ["childlib"]}}')
    out = run_python(CHILD_OP, env={"TORCH_NEURONX_OP_POLICY": str(policy)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[2.0, 2.0, 2.0] [] True"
    assert WARNING not in out.stderr


# A library loaded after import torch, whose CPU kernels stand for a plugin's device kernels.
_LATE_LIB = torch.library.Library("neurontest_late", "DEF")
_LATE_LIB.define("halved(Tensor x) -> Tensor")
_LATE_LIB.impl("halved", lambda x: x / 2, "CPU")


def test_a_namespace_named_native_at_run_time_leaves_the_fallback_tier():
    x = torch.randn(6)
    halved = torch.ops.neurontest_late.halved
    _, fallback, _ = _tracked(halved, x.to("neuron"))
    assert fallback == ["neurontest_late::halved"], "ops of other libraries fall back by default"
    torch_neuronx._op_policy.add_native_namespaces(["neurontest_late"])
    result, fallback, native = _tracked(halved, x.to("neuron"))
    assert torch.equal(result.cpu(), x / 2)
    assert fallback == []
    assert "neurontest_late::halved" in native, "the op already run takes the new tier"
    assert "neurontest_late" in torch_neuronx._op_policy.native_namespaces()
    assert not torch_neuronx._op_policy.is_library_fallback(halved.default)


@pytest.mark.parametrize("bad", ["neurontest_late", [""], ["aten"]])
def test_add_native_namespaces_refuses_what_is_not_a_library_namespace(bad):
    with pytest.raises((TypeError, ValueError), match="namespace"):
        torch_neuronx._op_policy.add_native_namespaces(bad)


# Registered for every device, as vLLM registers its attention kernels: without a neuron
# kernel the composite runs with the neuron tensors themselves.
_ANY_LIB = torch.library.Library("neurontest_any", "DEF")
_ANY_LIB.define("scaled_copy_(Tensor(a!) out, Tensor x, float scale) -> ()")
_seen_devices = []


def _scaled_copy_(out, x, scale):
    _seen_devices.append((out.device.type, x.device.type))
    out.copy_(x * scale)


_ANY_LIB.impl("scaled_copy_", _scaled_copy_, "CompositeImplicitAutograd")


def test_route_device_kernels_runs_a_catch_all_kernel_on_the_host_kernel_path():
    x = torch.randn(3, 5)
    op = torch.ops.neurontest_any.scaled_copy_
    _seen_devices.clear()
    op(torch.empty(3, 5, device="neuron"), x.to("neuron"), 3.0)
    assert _seen_devices == [("neuron", "neuron")], "unrouted, the kernel gets device tensors"
    assert torch_neuronx._op_policy.route_device_kernels(["neurontest_any::scaled_copy_"]) == 1
    assert torch_neuronx._op_policy.route_device_kernels(["neurontest_any::scaled_copy_"]) == 0
    out = torch.zeros(3, 5, device="neuron")
    _seen_devices.clear()
    _, fallback, native = _tracked(op, out, x.to("neuron"), 3.0)
    assert _seen_devices == [("cpu", "cpu")], "routed, it runs on host views of device memory"
    assert out.device.type == "neuron"
    expected = torch.zeros(3, 5)
    op(expected, x, 3.0)
    assert torch.equal(out.cpu(), expected)
    assert fallback == []
    assert "neurontest_any::scaled_copy_" in native


@pytest.mark.parametrize(
    "name, message",
    [("no_namespace", "not an op name"), ("neurontest_any::missing", "no op")],
)
def test_route_device_kernels_names_what_it_cannot_route(name, message):
    with pytest.raises(RuntimeError, match=message):
        torch_neuronx._op_policy.route_device_kernels([name])
