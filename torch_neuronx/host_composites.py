"""Composite ops that choose kernels by device type run exactly as they do on CPU.

``lstm`` and friends would take the CUDA-style fused-cell path on any non-CPU device, and
``scaled_dot_product_attention`` would pick a different attention kernel. Here they run the
CPU implementation, autograd included, on zero-copy host views of the neuron tensors.
"""

import torch
from torch.utils._pytree import tree_map

OPS = (
    "lstm.input", "lstm.data", "gru.input", "gru.data",
    "rnn_tanh.input", "rnn_tanh.data", "rnn_relu.input", "rnn_relu.data",
    "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    "scaled_dot_product_attention",
)
_DROPOUT_ARGS = ("dropout", "dropout_p")


class _ToHost(torch.autograd.Function):
    """Neuron tensor to a zero-copy CPU view; gradients flow back to the neuron tensor."""

    @staticmethod
    def forward(ctx, t):
        ctx.device = t.device
        return torch.ops.neuron.as_cpu(t)

    @staticmethod
    def backward(ctx, grad):
        return grad.to(ctx.device)


class _ToDevice(torch.autograd.Function):
    """CPU result to a neuron tensor; gradients flow back to the CPU graph."""

    @staticmethod
    def forward(ctx, t, device):
        return t.to(device)

    @staticmethod
    def backward(ctx, grad):
        return torch.ops.neuron.as_cpu(grad), None


def _draws_randomness(schema, args, kwargs):
    for i, arg in enumerate(schema.arguments):
        if arg.name in _DROPOUT_ARGS:
            value = kwargs.get(arg.name, args[i] if i < len(args) else arg.default_value)
            if value:
                return True
    return False


class _NeuronRandomness:
    """Lets the CPU kernel draw from the neuron core's generator instead of the CPU one."""

    def __init__(self, device):
        self.index = device.index

    def __enter__(self):
        self.cpu_state = torch.get_rng_state()
        torch.set_rng_state(torch.neuron.get_rng_state(self.index))

    def __exit__(self, *exc):
        torch.neuron.set_rng_state(torch.get_rng_state(), self.index)
        torch.set_rng_state(self.cpu_state)
        return False


def _kernel(op):
    def run(*args, **kwargs):
        # Tracing (torch.compile, export) must see the op's composite, not the host call.
        if torch.compiler.is_compiling():
            return op.decompose(*args, **kwargs)
        leaves = [a for a in torch.utils._pytree.tree_leaves((args, kwargs))
                  if isinstance(a, torch.Tensor) and a.device.type == "neuron"]
        device = leaves[0].device
        to_host = _ToHost.apply if torch.is_grad_enabled() else torch.ops.neuron.as_cpu
        h_args, h_kwargs = tree_map(
            lambda a: to_host(a) if isinstance(a, torch.Tensor) and a.device.type == "neuron" else a,
            (args, kwargs))
        if _draws_randomness(op._schema, args, kwargs):
            with _NeuronRandomness(device):
                out = op(*h_args, **h_kwargs)
        else:
            out = op(*h_args, **h_kwargs)
        to_device = _ToDevice.apply if torch.is_grad_enabled() else torch.Tensor.to
        return tree_map(lambda t: to_device(t, device) if isinstance(t, torch.Tensor) else t, out)

    return run


_library = None


def register():
    """Registers the CPU-equivalent kernels for OPS (once per process)."""
    global _library
    if _library is not None:
        return
    _library = torch.library.Library("aten", "IMPL")
    for name in OPS:
        base, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops.aten, base), overload or "default")
        for key in ("AutogradPrivateUse1", "PrivateUse1"):
            _library.impl(name, _kernel(op), key)
