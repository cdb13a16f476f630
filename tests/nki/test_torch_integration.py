"""nki_op and wrap_nki: eager, FakeTensor, torch.compile (one node), autograd, in-place ops."""

import pytest
import torch
from nkitest_utils import requires_neuron, requires_neuron_backend
from pyrun import run_python
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

import nki
import nki.language as nl
from nki.torch_integration import nki_op, wrap_nki


@nki.jit
def softplus_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.softplus(nl.load(x)))
    return out


@nki.jit
def sigmoid_kernel(x, out):
    nl.store(out, nl.sigmoid(nl.load(x)))


@nki.jit
def axpy_kernel(x, y, alpha):
    """Returns alpha * x + y and also overwrites y with it."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    r = nl.add(nl.multiply(nl.load(x), alpha), nl.load(y))
    nl.store(out, r)
    nl.store(y, r)
    return out


@nki_op("nki_tests::softplus", mutates_args=())
def softplus(x: torch.Tensor) -> torch.Tensor:
    return softplus_kernel(x)


def _softplus_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _softplus_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * torch.sigmoid(x)


softplus.register_autograd(_softplus_backward, setup_context=_softplus_setup)


@nki_op("nki_tests::sigmoid_out", mutates_args={"out"})
def sigmoid_out(x: torch.Tensor, out: torch.Tensor) -> None:
    sigmoid_kernel(x, out)


def op_nodes(fn, *args):
    """Dynamo graph nodes calling custom ops, after a fullgraph compile of ``fn``."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch.compile(fn, backend=backend, fullgraph=True)(*args)
    return [
        n
        for g in graphs
        for n in g.graph.nodes
        if n.op == "call_function" and "nki" in str(n.target)
    ]


def test_nki_op_eager():
    x = torch.randn(128, 64)
    torch.testing.assert_close(softplus(x), torch.nn.functional.softplus(x))


def test_nki_op_fake_tensor_support():
    with FakeTensorMode():
        out = softplus(torch.empty(32, 16, dtype=torch.bfloat16))
    assert isinstance(out, FakeTensor) and out.shape == (32, 16) and out.dtype == torch.bfloat16


def test_nki_op_is_one_node_under_compile():
    x = torch.randn(64, 32)
    nodes = op_nodes(lambda t: softplus(t) * 2, x)
    assert [str(n.target) for n in nodes] == ["nki_tests.softplus.default"]
    compiled = torch.compile(lambda t: softplus(t) * 2, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), 2 * torch.nn.functional.softplus(x))


def test_nki_op_autograd_eager_and_compiled():
    x = torch.randn(64, 32, requires_grad=True)
    softplus(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.sigmoid(x.detach()))
    x.grad = None
    compiled = torch.compile(
        lambda t: softplus(t).pow(2).sum(), backend="aot_eager", fullgraph=True
    )
    compiled(x).backward()
    ref = x.detach().clone().requires_grad_()
    torch.nn.functional.softplus(ref).pow(2).sum().backward()
    torch.testing.assert_close(x.grad, ref.grad)


def test_nki_op_with_mutated_argument():
    x = torch.randn(16, 8)
    out = torch.zeros(16, 8)
    sigmoid_out(x, out)
    torch.testing.assert_close(out, torch.sigmoid(x))

    def fn(t):
        buf = torch.zeros_like(t)
        sigmoid_out(t, buf)
        return buf + 1

    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), torch.sigmoid(x) + 1)


def test_wrap_nki_eager_grid_and_mutation():
    wrapped = wrap_nki(axpy_kernel)
    x, y = torch.randn(128, 32), torch.randn(128, 32)
    y0 = y.clone()
    out = wrapped(x, y, 2.0)
    torch.testing.assert_close(out, 2 * x + y0)
    torch.testing.assert_close(y, 2 * x + y0)
    torch.testing.assert_close(wrap_nki(softplus_kernel)[1](x), torch.nn.functional.softplus(x))


def test_wrap_nki_under_compile():
    wrapped = wrap_nki(axpy_kernel)

    def fn(x, y):
        y = y.clone()
        out = wrapped(x, y, 0.5)
        return out * 2, y

    x, y = torch.randn(128, 16), torch.randn(128, 16)
    out, y_new = torch.compile(fn, backend="aot_eager", fullgraph=True)(x, y)
    torch.testing.assert_close(out, 2 * (0.5 * x + y))
    torch.testing.assert_close(y_new, 0.5 * x + y)


def test_wrap_nki_accepts_launched_kernels():
    wrapped = wrap_nki(softplus_kernel[2])
    assert wrapped.grid == (2,)


@requires_neuron
def test_nki_op_on_neuron_eager():
    x = torch.randn(64, 32).to("neuron")
    out = softplus(x)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), torch.nn.functional.softplus(x.cpu()))


@requires_neuron_backend
def test_nki_op_on_neuron_compiled_is_one_node():
    x = torch.randn(64, 32).to("neuron")
    assert [str(n.target) for n in op_nodes(lambda t: softplus(t) * 2, x)] == [
        "nki_tests.softplus.default"
    ]
    compiled = torch.compile(lambda t: softplus(t) * 2, backend="neuron", fullgraph=True)
    torch.testing.assert_close(compiled(x).cpu(), 2 * torch.nn.functional.softplus(x.cpu()))


@requires_neuron
def test_wrap_nki_on_neuron():
    x, y = torch.randn(128, 32).to("neuron"), torch.randn(128, 32).to("neuron")
    y0 = y.cpu()
    out = wrap_nki(axpy_kernel)(x, y, 2.0)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), 2 * x.cpu() + y0)


@requires_neuron
def test_import_torch_neuronx_nki_is_the_nki_package():
    out = run_python(
        "import torch_neuronx.nki\n"
        "import torch_neuronx.nki.language as nl\n"
        "from torch_neuronx.nki.torch_integration import nki_op\n"
        "import nki, nki.language, nki.torch_integration\n"
        "print(torch_neuronx.nki is nki, nl is nki.language,"
        " nki_op is nki.torch_integration.nki_op)"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"] * 3


def test_nki_op_requires_annotations():
    with pytest.raises(ValueError, match="Parameter x must have a type annotation"):

        @nki_op("nki_tests::unannotated", mutates_args=())
        def bad(x):
            return softplus_kernel(x)

    assert not hasattr(torch.ops.nki_tests, "unannotated"), "a refused op must not be registered"
