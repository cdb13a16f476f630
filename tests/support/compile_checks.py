"""Checks shared by the compiler tests: compiled graphs ran as compiled code, results match.

Eager execution on neuron tensors gives nearly the values of a compiled graph, so comparing
values cannot tell whether the backend's generated code ran or the graph ran eagerly. The op
counters can: generated code runs on host aliases of device memory, whereas every eager op on
neuron tensors counts as a ``NativeOp::`` in ``torch_neuronx.metrics`` (what
``torch_neuronx.get_executed_ops()`` lists). ``logging_graph_calls`` records, for every run of a
graph that the neuron backend compiled, forward and backward, the neuron ops that ran eagerly
meanwhile; ``check_graph_calls`` judges them. tests/conftest.py does both around every test of
the suite; a test's ``graph_calls`` marker says what it expects.
"""

import contextlib
import dataclasses
import functools

import torch

_NATIVE_OP = "NativeOp::"
# The autograd node through which AOTAutograd runs a compiled backward graph.
_COMPILED_BACKWARD = "CompiledFunctionBackward"
EXPECTATIONS = ("compiled", "eager", "none")


@dataclasses.dataclass
class GraphCall:
    """One run of the forward or the backward of a graph compiled by the neuron backend."""

    part: str
    eager_ops: list  # neuron ops that ran eagerly during it, e.g. ["aten::addmm"]


def _native_op_counts():
    # Imported here, not at the top, so that tests/conftest.py can import this module in a
    # session without the neuron device (TORCH_DEVICE_BACKEND_AUTOLOAD=0).
    from torch_neuronx import metrics

    return {
        name: value for name, value in metrics.counters().items() if name.startswith(_NATIVE_OP)
    }


def _ops_since(before, expected=None):
    """The neuron ops that ran since the counts ``before``, beyond ``expected`` runs of some."""
    expected = expected or {}
    return sorted(
        op
        for name, value in _native_op_counts().items()
        if value - before.get(name, 0) > expected.get(op := name[len(_NATIVE_OP) :], 0)
        and not _is_view(op)
    )


def _is_view(name):
    """Whether op ``name`` (e.g. "aten::unfold") is a view. AOTAutograd replays eagerly the views
    of inputs that a compiled graph returns; they compute nothing."""
    namespace, _, op = name.partition("::")
    base, _, overload = op.partition(".")
    packet = getattr(getattr(torch.ops, namespace), base, None)
    return packet is not None and getattr(packet, overload or "default").is_view


def _log_backward_runs(node, calls):
    """Logs every run of ``node``, a compiled backward, with the neuron ops it ran eagerly."""
    before = []

    def start(grad_outputs):
        # Outputs that got no gradient (a model's logits when only its loss is backpropagated)
        # get zeros from autograd after this hook, before the compiled backward runs: one eager
        # zero_ each, on any device, outside the graph.
        zero_filled = sum(g is None for g in grad_outputs)
        before.append((_native_op_counts(), {"aten::zero_": zero_filled}))

    def finish(grad_inputs, grad_outputs):
        calls.append(GraphCall("backward", _ops_since(*before.pop())))

    node.register_prehook(start)
    node.register_hook(finish)


def _log_backwards_of(outputs, inputs, calls):
    """Logs the compiled backwards that ``outputs`` of one call of a compiled graph hang from.

    The walk stops at the autograd history of ``inputs``, made before this call by eager code or
    by earlier calls, so each compiled backward is logged once, by the call that made it.
    """
    earlier = {t.grad_fn for t in inputs if isinstance(t, torch.Tensor) and t.grad_fn}
    pending = [t.grad_fn for t in outputs if isinstance(t, torch.Tensor) and t.grad_fn]
    seen = set()
    while pending:
        node = pending.pop()
        if node is None or node in seen or node in earlier:
            continue
        seen.add(node)
        if type(node).__name__ == _COMPILED_BACKWARD:
            _log_backward_runs(node, calls)
        else:
            pending.extend(next_node for next_node, _ in node.next_functions)


def logging_backend(compiler, calls):
    """A Dynamo backend that compiles with the backend ``compiler`` and appends a ``GraphCall``
    to ``calls`` for every run of what it compiled."""

    # wraps keeps the backend's signature and the tags that Dynamo's registry gave it.
    @functools.wraps(compiler)
    def compile_graph(gm, example_inputs, **kwargs):
        compiled = compiler(gm, example_inputs, **kwargs)

        def run(*args):
            before = _native_op_counts()
            outputs = compiled(*args)
            calls.append(GraphCall("forward", _ops_since(before)))
            _log_backwards_of(outputs, args, calls)
            return outputs

        return run

    return compile_graph


@contextlib.contextmanager
def logging_graph_calls():
    """Yields a list that gets a ``GraphCall`` for every run of a graph that the neuron backend
    compiles meanwhile, whether picked by name or by the default backend for neuron tensors."""
    from torch._dynamo.backends import registry

    from torch_neuronx._dynamo import backend

    compile_for_neuron = registry.lookup_backend("neuron")
    calls = []
    logged = logging_backend(compile_for_neuron, calls)
    # backend="neuron" finds the registry's entry; the default backend imports the function
    # from its module when a graph has neuron tensors.
    registry._COMPILER_FNS["neuron"] = backend.neuron_backend = logged
    try:
        yield calls
    finally:
        registry._COMPILER_FNS["neuron"] = backend.neuron_backend = compile_for_neuron


def _describe(calls):
    return "; ".join(
        f"{c.part} #{i}: {c.eager_ops or 'compiled code only'}" for i, c in enumerate(calls)
    )


def check_graph_calls(calls, expected=None, kernel_ops=()):
    """Asserts what the logged ``calls`` ran.

    ``expected`` is "compiled" (at least one call, and every forward and backward ran the
    generated code, with no eager neuron op), "eager" (at least one call, and every one ran eager
    neuron ops: the backend's fallback execution), "none" (no compiled graph ran in this
    process), or None: any calls there are ran the generated code. ``kernel_ops`` are the eager
    ops that the neuron kernels of custom ops in the graph run (device_ops.py), not counted.
    """
    assert expected in (None, *EXPECTATIONS), expected
    eager = [c for c in calls if set(c.eager_ops) - set(kernel_ops)]
    if expected == "none":
        assert not calls, f"a compiled graph ran where none was expected: {_describe(calls)}"
    elif expected == "eager":
        assert calls and len(eager) == len(calls), (
            f"graphs were expected to run eagerly (fallback execution): {_describe(calls)}"
        )
    else:
        assert calls or expected is None, "no graph compiled by the neuron backend ran"
        assert not eager, (
            f"graphs compiled by the neuron backend ran eager neuron ops instead of their "
            f"generated code: {_describe(calls)}"
        )


def assert_matches(actual, expected, rtol=1e-5, atol=1e-5):
    """``actual`` is a neuron tensor holding ``expected``'s values within float32 tolerance."""
    assert actual.device.type == "neuron", actual.device
    torch.testing.assert_close(actual.cpu(), expected.cpu(), rtol=rtol, atol=atol)


def assert_same_as_inductor_on_cpu(actual, expected):
    """``actual``, compiled for neuron, has exactly the bits of ``expected``, the same graph
    compiled by Inductor for the CPU from the same inputs and weights.

    The neuron backend is Inductor's CPU code generator run on host aliases of device memory,
    so both run the same kernels on the same values, in the same order and with the same
    threads; no tolerance is due. Eager execution is not that reference: Inductor fuses and
    reorders float arithmetic, which moves results by a few ulps, so a graph that silently ran
    eagerly mostly fails here too.
    """
    assert actual.device.type == "neuron", actual.device
    assert expected.device.type == "cpu", expected.device
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)
