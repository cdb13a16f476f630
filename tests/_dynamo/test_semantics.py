"""TorchNeuron's torch.compile rules: static shapes, mode, options, fallback, CPU inputs."""

import re

import pytest
import torch
import torch._dynamo
import torch._inductor.config
from compile_checks import assert_matches
from pyrun import run_python

import torch_neuronx._dynamo as neuron_dynamo
from torch_neuronx._dynamo.backend import StaticShapeError


def scale_shift(x):
    return torch.relu(x) * 2 + 1


@pytest.mark.graph_calls("none")
def test_backend_resolves_by_name_through_the_entry_point():
    result = run_python(
        "import sys, torch\n"
        "print('torch_neuronx._dynamo.backend' in sys.modules, 'torch._dynamo' in sys.modules)\n"
        "from torch._dynamo.backends.registry import list_backends, lookup_backend\n"
        "print('neuron' in list_backends(), lookup_backend('neuron').__module__)\n"
    )
    assert result.returncode == 0, result.stderr
    # import torch loads neither the backend nor Dynamo; the name alone finds the backend.
    assert result.stdout.split() == ["False", "False", "True", "torch_neuronx._dynamo.backend"]


@pytest.mark.graph_calls("none")
def test_dynamo_device_interface_is_registered():
    from torch._dynamo.device_interface import get_interface_for_device

    interface = get_interface_for_device("neuron")
    assert interface is get_interface_for_device(torch.device("neuron", 0))
    assert interface.device_count() == torch.neuron.device_count()
    assert interface.current_device() == torch.neuron.current_device()
    assert not interface.is_triton_capable()


def test_default_backend_selects_neuron_for_neuron_graphs_only():
    compiled = torch.compile(scale_shift)
    x = torch.randn(4, 3, device="neuron")
    assert_matches(compiled(x), scale_shift(x))
    assert neuron_dynamo.get_dynamo_metrics()["num_graphs"] == 1
    cpu = torch.randn(4, 3)
    torch.testing.assert_close(compiled(cpu), scale_shift(cpu))  # Inductor's graph
    assert neuron_dynamo.get_dynamo_metrics()["num_graphs"] == 1


def test_default_backend_inductor_settings_warn_on_neuron_graphs():
    x = torch.randn(4, 3, device="neuron")
    with pytest.warns(UserWarning, match="configure Inductor, which does not compile for neuron"):
        out = torch.compile(scale_shift, mode="max-autotune-no-cudagraphs")(x)
    assert_matches(out, scale_shift(x))


@pytest.mark.graph_calls("none")
@pytest.mark.parametrize("how", ["dynamic=True", "mark_dynamic"])
def test_symbolic_shapes_are_rejected(how):
    x = torch.randn(6, 3, device="neuron")
    if how == "mark_dynamic":
        torch._dynamo.mark_dynamic(x, 0)
    compiled = torch.compile(scale_shift, backend="neuron", dynamic=how == "dynamic=True")
    with pytest.raises(Exception, match="static shapes") as info:
        compiled(x)
    assert "pad or bucket" in str(info.value)
    # Dynamo reports backend errors wrapped in BackendCompilerFailed.
    assert isinstance(getattr(info.value, "inner_exception", info.value), StaticShapeError)


def test_new_input_shape_recompiles_statically():
    compiled = torch.compile(scale_shift, backend="neuron")
    for rows in (4, 6, 4):
        x = torch.randn(rows, 3, device="neuron")
        assert_matches(compiled(x), scale_shift(x))
    metrics = neuron_dynamo.get_dynamo_metrics()
    assert metrics["num_graphs"] == 2
    assert metrics["num_recompiles"] == 1
    assert [g["recompile"] for g in metrics["graphs"]] == [False, True]


@pytest.mark.graph_calls("none")
def test_fullgraph_raises_on_graph_break():
    def fn(x):
        torch._dynamo.graph_break()
        return x + 1

    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch.compile(fn, backend="neuron", fullgraph=True)(torch.ones(2, device="neuron"))


def test_other_modes_warn_and_compile_in_default_mode():
    x = torch.randn(4, 3, device="neuron")
    with pytest.warns(UserWarning, match="does not support mode='max-autotune'"):
        out = torch.compile(scale_shift, backend="neuron", mode="max-autotune")(x)
    assert_matches(out, scale_shift(x))
    assert neuron_dynamo.get_dynamo_metrics()["graphs"][0]["subgraphs"]


def test_model_name_names_cache_entries_and_graphs(session_cache):
    x = torch.randn(4, 3, device="neuron")
    torch.compile(scale_shift, backend="neuron", options={"model_name": "my model"})(x)
    assert neuron_dynamo.get_dynamo_metrics()["graphs"][0]["name"].startswith("my_model_")
    assert any(p.name.startswith("my_model-inference-") for p in session_cache.iterdir())


@pytest.fixture
def failing_compiler(monkeypatch, tmp_path):
    """Makes C++ compiles fail, as a broken toolchain would."""
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path))
    with torch._inductor.config.patch({"cpp.cxx": ("/nonexistent/c++",)}):
        yield


def odd_fn(x):
    # Constants of its own, so no kernel of another test is reused.
    return torch.tanh(x) * 0.123 + 4.56


@pytest.mark.graph_calls("none")
def test_compile_failure_raises_by_default(monkeypatch, failing_compiler):
    monkeypatch.delenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", raising=False)
    with pytest.raises(Exception, match="No working C\\+\\+ compiler") as info:
        torch.compile(odd_fn, backend="neuron")(torch.randn(3, device="neuron"))
    assert "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0" in "".join(info.value.__notes__)


@pytest.mark.graph_calls("eager")
@pytest.mark.parametrize("env, options", [("0", None), ("1", {"fallback_execution": True})])
def test_compile_failure_runs_eagerly_when_fallback_is_on(
    monkeypatch, failing_compiler, env, options
):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", env)
    x = torch.randn(3, device="neuron")
    with pytest.warns(UserWarning, match="runs it eagerly"):
        out = torch.compile(odd_fn, backend="neuron", options=options)(x)
    assert_matches(out, odd_fn(x))
    assert neuron_dynamo.get_dynamo_metrics()["num_fallbacks"] == 1


def test_cpu_inputs_are_taken_as_device_inputs():
    x = torch.randn(5, 3)
    out = torch.compile(scale_shift, backend="neuron")(x)
    assert_matches(out, scale_shift(x))


@pytest.mark.parametrize(
    "fn",
    [
        # Inductor's constant folding saw the reshaped constant as shape [1] beside a device
        # tensor and failed to compile (found by make fuzz).
        lambda x: torch.maximum(torch.zeros_like(x), torch.tensor([0.5]).reshape(())),
        lambda x: torch.ones_like(x) * torch.tensor(3, dtype=torch.int32) - torch.tensor(0.5),
        lambda x: torch.where(x > 0, x, torch.tensor(-1.0)),
    ],
    ids=["folded-maximum", "promoting", "where"],
)
def test_cpu_scalar_tensors_in_pointwise_ops_compile_as_eager_takes_them(fn):
    x = torch.randn(4, 3)
    out = torch.compile(fn, backend="neuron")(x.to("neuron"))
    expected = fn(x)
    assert out.dtype == expected.dtype
    assert_matches(out, expected, rtol=0, atol=0)


def test_cpu_inputs_raise_when_autocopy_is_disabled(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", "1")
    compiled = torch.compile(scale_shift, backend="neuron")
    with pytest.raises(RuntimeError, match="Input tensor at index 0 is on cpu device"):
        compiled(torch.randn(5, 3))
    x = torch.randn(5, 3, device="neuron")
    assert_matches(compiled(x), scale_shift(x))


def test_debug_dir_keeps_graphs_and_code_only_when_asked(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(tmp_path))
    x = torch.randn(4, 3, device="neuron", requires_grad=True)
    torch.compile(scale_shift, backend="neuron")(x).sum().backward()
    assert not any(tmp_path.iterdir())
    torch._dynamo.reset()
    monkeypatch.setenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1")
    torch.compile(scale_shift, backend="neuron", options={"model_name": "kept"})(x)
    # One job directory per graph (AWS's "What are Neuron Compiler artifacts?"):
    # proc_<rank>/<model>_<compile id>_<time>_<pid>/
    (job,) = (tmp_path / "proc_0").iterdir()
    assert re.fullmatch(r"kept_\d+_\d+_[\d-]+_\d+", job.name), job.name
    assert sorted(p.name for p in job.iterdir()) == [
        "backward.fx.txt",
        "backward.py",
        "compiler_args.txt",
        "dynamo.fx.txt",
        "forward.fx.txt",
        "forward.py",
    ]
    assert "cpp_fused" in (job / "forward.py").read_text()
    args = dict(line.split("=", 1) for line in (job / "compiler_args.txt").read_text().split())
    assert args["model_name"] == "kept" and args["platform"] == "trn2"
    assert args["64bit_policy"] == "narrow" and args["torch"] == torch.__version__


def test_set_stance_applies_to_neuron_graphs():
    compiled = torch.compile(scale_shift, backend="neuron")
    compiled(torch.randn(4, 3, device="neuron"))
    with torch.compiler.set_stance("fail_on_recompile"):
        with pytest.raises(Exception, match="fail_on_recompile"):
            compiled(torch.randn(7, 3, device="neuron"))
    with torch.compiler.set_stance("force_eager"):
        x = torch.randn(9, 3, device="neuron")
        assert_matches(compiled(x), scale_shift(x))
    assert neuron_dynamo.get_dynamo_metrics()["num_graphs"] == 1


@torch.library.custom_op("neuron_compile_test::device_only", mutates_args=(), device_types="neuron")
def device_only(x: torch.Tensor) -> torch.Tensor:
    assert x.device.type == "neuron", "a neuron kernel must see neuron tensors"
    return x * 2


@device_only.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op(
    "neuron_compile_test::device_only_add_", mutates_args=("out",), device_types="neuron"
)
def device_only_add_(out: torch.Tensor, x: torch.Tensor) -> None:
    assert out.device.type == "neuron" and x.device.type == "neuron"
    out.add_(x)


@device_only_add_.register_fake
def _(out, x):
    return None


@pytest.mark.graph_calls("compiled", kernel_ops=("aten::mul.Tensor", "aten::add_.Tensor"))
def test_custom_op_with_a_neuron_kernel_only_runs_inside_the_graph_on_device_memory():
    # As vLLM registers its attention ops: for the platform's dispatch key only.
    def program(x, acc):
        y = device_only(x.sin()) + 1
        device_only_add_(acc, y)
        return y.cos(), acc * 3

    x, acc = torch.randn(5, 3), torch.randn(5, 3)
    expected = program(x.to("neuron"), acc.to("neuron"))
    x_n, acc_n = x.to("neuron"), acc.to("neuron")
    acc_ptr = acc_n.data_ptr()
    out = torch.compile(program, backend="neuron", fullgraph=True)(x_n, acc_n)
    for got, want in zip(out, expected):
        assert_matches(got, want)
    assert acc_n.data_ptr() == acc_ptr
    assert_matches(acc_n, acc.to("neuron") + (x.sin() * 2 + 1).to("neuron"))
    assert neuron_dynamo.get_dynamo_metrics()["num_fallbacks"] == 0
    # Host tensors outside a graph are no device memory: the op still refuses them.
    with pytest.raises(NotImplementedError, match="device_only has no CPU kernel"):
        device_only(torch.ones(2))


_NO_KERNEL = torch.library.Library("neuron_compile_test", "FRAGMENT")
_NO_KERNEL.define("no_kernel(Tensor x) -> Tensor")
_NO_KERNEL.impl("no_kernel", torch.empty_like, "Meta")


@pytest.mark.graph_calls("none")
def test_custom_op_without_a_host_or_neuron_kernel_is_a_compile_failure(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    x = torch.randn(3, device="neuron")
    compiled = torch.compile(
        lambda t: torch.ops.neuron_compile_test.no_kernel(t) + 1, backend="neuron"
    )
    # The graph runs eagerly then, where the op fails as it does without compiling.
    with (
        pytest.warns(UserWarning, match="no_kernel has no CPU or neuron kernel"),
        pytest.raises(NotImplementedError, match="no_kernel' is not supported on the neuron"),
    ):
        compiled(x)
