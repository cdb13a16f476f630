"""The check that every compiler test relies on catches graphs that run eagerly."""

import compile_checks
import pytest
import torch
from torch._dynamo.backends.registry import lookup_backend


@pytest.mark.graph_calls("none")  # the neuron backend compiles nothing here
def test_eager_forward_and_backward_of_a_graph_are_caught():
    # aot_eager splits graphs as the neuron backend does but runs them as eager neuron ops.
    calls = []
    backend = compile_checks.logging_backend(lookup_backend("aot_eager"), calls)
    x = torch.randn(4, 3, device="neuron", requires_grad=True)
    torch.compile(lambda t: torch.relu(t) * 2, backend=backend)(x).sum().backward()
    assert [(c.part, c.eager_ops) for c in calls] == [
        ("forward", ["aten::mul.Tensor", "aten::relu"]),
        ("backward", ["aten::mul.Tensor", "aten::threshold_backward"]),
    ]
    with pytest.raises(AssertionError, match="ran eager neuron ops instead of their generated"):
        compile_checks.check_graph_calls(calls, "compiled")
    compile_checks.check_graph_calls(calls, "eager")


@pytest.mark.graph_calls("none")
def test_a_test_that_runs_no_graph_is_caught_when_it_should():
    with pytest.raises(AssertionError, match="no graph compiled by the neuron backend ran"):
        compile_checks.check_graph_calls([], "compiled")


def test_zero_gradients_autograd_gives_unused_outputs_are_not_eager_ops():
    # Only the first output is backpropagated: autograd fills the second's gradient with zeros,
    # eagerly, before the compiled backward runs, as on any device.
    x = torch.randn(4, 3, device="neuron", requires_grad=True)
    loss, unused = torch.compile(lambda t: ((t * 2).sum(), torch.relu(t)), backend="neuron")(x)
    loss.backward()
    assert unused.requires_grad
    assert torch.equal(x.grad.cpu(), torch.full((4, 3), 2.0))
