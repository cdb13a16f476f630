"""Compiled graphs keep eager's guarantees: Trainium's policies apply, and memory may move."""

import textwrap

import pytest
import torch
from pyrun import run_python

import torch_neuronx


def run_checked(code, expected, env=None):
    """Runs `code` in a fresh interpreter, checking its compiled graphs' calls as the suite
    does in this process (compile_checks)."""
    wrapped = (
        "import compile_checks\n"
        "with compile_checks.logging_graph_calls() as calls:\n"
        f"{textwrap.indent(code, '    ')}\n"
        f"compile_checks.check_graph_calls(calls, {expected!r})\n"
    )
    return run_python(wrapped, env=env, timeout=300)


def _grad_after_storage_moves(device, backend):
    """The gradient of a function that saves (a view of) its parameter for the backward, when
    the parameter's storage gets new memory between forward and backward, as FSDP2 does."""
    gen = torch.Generator().manual_seed(0)
    p = torch.nn.Parameter(torch.randn(8, 6, generator=gen).to(device))
    x = torch.randn(4, 8, generator=gen).to(device)

    def f(x, p):
        return (x @ p.t().t()).sin().sum() + (p.t() * 2).cos().sum()

    loss = (torch.compile(f, backend=backend, fullgraph=True) if backend else f)(x, p)
    data = p.detach().clone()
    nbytes = p.untyped_storage().nbytes()
    p.untyped_storage().resize_(0)
    # Likely to take the freed block, so stale reads of it would see these values.
    decoy = torch.full((8, 6), 123.0, device=device)
    p.untyped_storage().resize_(nbytes)
    p.data.copy_(data)
    loss.backward()
    del decoy
    return p.grad


def test_saved_parameters_follow_their_storage():
    grad = _grad_after_storage_moves("neuron", "neuron")
    assert grad.device.type == "neuron"
    inductor_on_cpu = _grad_after_storage_moves("cpu", "inductor")
    torch.testing.assert_close(grad.cpu(), inductor_on_cpu, rtol=0, atol=0)
    torch.testing.assert_close(grad.cpu(), _grad_after_storage_moves("cpu", None))


def test_64bit_policy_applies_inside_compiled_graphs():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, device="neuron")
    add_tiny = lambda x: x + 1e-10  # noqa: E731
    compiled = torch.compile(add_tiny, backend="neuron")(x)
    assert compiled.dtype == torch.float64
    assert torch.equal(compiled.cpu(), add_tiny(x).cpu())
    assert torch.equal(compiled.cpu(), x.cpu())  # 1e-10 is below float32 precision at 1 and 2

    big = torch.tensor([2**30], device="neuron")
    times_four = torch.compile(lambda i: i * 4, backend="neuron")
    with pytest.raises(
        RuntimeError,
        match=r"int64 value 4294967296 from aten::mul.Tensor in a "
        r"compiled graph does not fit in int32",
    ):
        times_four(big)
    assert times_four(torch.tensor([2**20], device="neuron")).item() == 2**22


@pytest.mark.graph_calls("none")
def test_native_64bit_policy_keeps_full_precision_when_compiled():
    result = run_checked(
        "import torch\n"
        "x = torch.tensor([1.0], dtype=torch.float64, device='neuron')\n"
        "y = torch.compile(lambda x: x + 1e-10, backend='neuron')(x)\n"
        "print(y.item() - 1.0 > 0, torch.equal(y, x + 1e-10))\n",
        "compiled",
        env={"TORCH_NEURONX_64BIT": "native"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]


def test_cpu_fallback_ops_in_compiled_graphs_are_tracked():
    a = torch.randn(4, 4, device="neuron") + 4 * torch.eye(4, device="neuron")
    solve = torch.compile(lambda a: torch.linalg.inv(a) @ a, backend="neuron", fullgraph=True)
    torch_neuronx.clear_op_tracking()
    for _ in range(3):
        torch.testing.assert_close(solve(a).cpu(), torch.eye(4), atol=1e-5, rtol=0)
    assert torch_neuronx.get_fallback_ops() == ["aten::linalg_inv_ex"]
    counters = torch_neuronx.metrics.counters()
    assert counters["FallbackOp::aten::linalg_inv_ex"] == 3
    assert counters["CompiledFallbackOp::aten::linalg_inv_ex"] == 3


@pytest.mark.graph_calls("none")
def test_cpu_fallback_in_compiled_graphs_warns_once_and_obeys_the_switch():
    code = (
        "import torch\n"
        "a = torch.eye(3, device='neuron') * 2\n"
        "inv = lambda a: torch.linalg.inv(a) @ a\n"
        "compiled = torch.compile(inv, backend='neuron', fullgraph=True)\n"
        "for run in (compiled, compiled, inv):\n"
        "    try:\n"
        "        run(a)\n"
        "        print('ran')\n"
        "    except RuntimeError as e:\n"
        "        print('refused:', str(e).splitlines()[0])\n"
    )
    enabled = run_checked(code, "compiled")
    assert enabled.returncode == 0, enabled.stderr
    assert enabled.stdout.split() == ["ran"] * 3
    warnings = [line for line in enabled.stderr.splitlines() if "via CPU fallback" in line]
    assert warnings == [
        "torch_neuronx WARNING: Operator 'aten::linalg_inv_ex' executed via CPU "
        "fallback (in a compiled graph)"
    ]

    # Refused before the graph runs, as eager refuses before the op runs.
    disabled = run_checked(code, "none", env={"NEURON_FALLBACK_ENABLED": "0"})
    assert disabled.returncode == 0, disabled.stderr
    lines = disabled.stdout.splitlines()
    assert len(lines) == 3 and len(set(lines)) == 1, lines
    assert lines[0].startswith(
        "refused: Operator 'aten::linalg_inv_ex' has no native neuron "
        "implementation and the CPU fallback is disabled"
    )


def test_64bit_results_without_values_keep_eager_strides():
    x = torch.zeros(2, 3, 0)
    min_indices = torch.compile(lambda t: torch.min(t, 0).indices, backend="neuron", fullgraph=True)
    out = min_indices(x.to("neuron"))
    assert out.stride() == torch.min(x, 0).indices.stride() and out.shape == (3, 0)


def test_narrowed_64bit_results_keep_eager_strides_on_size_one_dims():
    # Inductor lays out the int64 result contiguously, (2, 2, 1, 1); eager keeps the input's
    # strides, (2, 2, 1, 2), and so must the narrowing that follows it in the graph.
    x = torch.zeros(1, 1, 1, 2).permute(0, 1, 3, 2)
    ones = torch.compile(
        lambda t: torch.ones_like(t, dtype=torch.int64), backend="neuron", fullgraph=True
    )
    out = ones(x.to("neuron"))
    expected = torch.ones_like(x, dtype=torch.int64)
    assert out.stride() == expected.stride() == (2, 2, 1, 2)
    assert torch.equal(out.cpu(), expected)
