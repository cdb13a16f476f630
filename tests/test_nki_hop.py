"""``torch_neuronx.nki_hop``, the import path of TorchNeuron's NKI custom-operator API.

Documented at AWS's "How to work with NKI" guide (awsdocs-neuron .../torch/guides/
how-to-work-with-nki.html): ``from torch_neuronx.nki_hop import nki_op`` registers a launcher
as a custom op, ``wrap_nki`` makes a kernel callable from torch code."""

import torch

import nki
import nki.language as nl
import torch_neuronx
from torch_neuronx.nki_hop import nki_op, wrap_nki


@nki.jit
def _scaled_exp_kernel(x, scale):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.exp(nl.load(x)), scale))
    return out


@nki_op("nki_hop_tests::scaled_exp", mutates_args=())
def scaled_exp(x: torch.Tensor) -> torch.Tensor:
    return _scaled_exp_kernel(x, 0.5)


def test_nki_hop_names_are_the_integration_functions():
    assert nki_op is torch_neuronx.nki_op is nki.torch_integration.nki_op
    assert wrap_nki is torch_neuronx.wrap_nki is nki.torch_integration.wrap_nki


def test_nki_op_from_nki_hop_runs_on_neuron_and_compiles():
    x = torch.randn(64, 32)
    expected = 0.5 * torch.exp(x)
    torch.testing.assert_close(scaled_exp(x.to("neuron")).cpu(), expected)
    compiled = torch.compile(lambda t: scaled_exp(t) + 1, backend="neuron", fullgraph=True)
    torch.testing.assert_close(compiled(x.to("neuron")).cpu(), expected + 1)


def test_wrap_nki_from_nki_hop():
    x = torch.randn(128, 16)
    out = wrap_nki(_scaled_exp_kernel)(x.to("neuron"), 3.0)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), 3.0 * torch.exp(x))
