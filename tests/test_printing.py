"""Printing a neuron tensor is not computation: it runs no device op and works under every
setting (NEURON_FALLBACK_ENABLED=0, TORCH_NEURONX_64BIT=error)."""

import pytest
from pyrun import run_python

PRINT_EVERYTHING = """
import torch, torch_neuronx
values = [
    torch.randn(3, 4, device="neuron", requires_grad=True) * 2,
    torch.randn(2000, device="neuron"),
    torch.randn(3, device="neuron", dtype=torch.bfloat16),
    torch.zeros(2, dtype=torch.float8_e4m3fn, device="neuron"),
    torch.randn(2, dtype=torch.complex64).to("neuron").conj(),
    torch.tensor([1.5, float("nan"), float("inf")], device="neuron"),
    torch.empty(0, 3, device="neuron"),
]
torch_neuronx.clear_op_tracking()
cpu = [repr(v.detach().cpu()) for v in values]
for v, c in zip(values, cpu):
    text = repr(v)
    assert "device='neuron:0'" in text, text
    assert text.split("device=")[0].replace(" ", "").replace("\\n", "").rstrip(",") in \\
        c.replace(" ", "").replace("\\n", ""), (text, c)
print(torch_neuronx.get_fallback_ops(), torch_neuronx.get_executed_ops())
"""


@pytest.mark.parametrize(
    "env",
    [{}, {"NEURON_FALLBACK_ENABLED": "0"}, {"TORCH_NEURONX_64BIT": "error"}],
    ids=["default", "fallback_disabled", "64bit_error"],
)
def test_printing_runs_no_device_op(env):
    result = run_python(PRINT_EVERYTHING, env=env)
    assert result.returncode == 0, result.stderr
    # Only .cpu() ran: the copies are counted elsewhere, no op is.
    assert result.stdout.split("\n")[0] == "[] []", result.stdout
    assert "via CPU fallback" not in result.stderr
    assert "64-bit data reached" not in result.stderr
