"""Op tiers: which ops fall back to the CPU, by principle, and what that looks like."""

import ast

import pytest
import torch
from pyrun import run_python

import torch_neuronx
from torch_neuronx import _op_policy as op_policy


def _fallback_runs(fn, *cpu_args):
    """Runs fn on neuron copies and on the CPU; returns (neuron result, cpu result, fallback
    ops)."""
    torch_neuronx.clear_op_tracking()
    dev = fn(*[a.to("neuron") for a in cpu_args])
    ops = torch_neuronx.get_fallback_ops()
    return dev, fn(*cpu_args), ops


def _same(a, b):
    if isinstance(a, (tuple, list)):
        return all(_same(x, y) for x, y in zip(a, b))
    return torch.equal(a.cpu(), b)


@pytest.mark.parametrize(
    "fn, op",
    [
        (lambda x: torch.nonzero(x > 0), "aten::nonzero"),
        (lambda x: torch.unique(x.round(), return_counts=True), "aten::_unique2"),
        (lambda x: torch.masked_select(x, x > 0), "aten::masked_select"),
        (lambda x: torch.argwhere(x), "aten::nonzero"),
        (lambda x: torch.bincount((x.abs() * 3).long().flatten()), "aten::bincount"),
        (
            lambda x: torch.repeat_interleave(x[0], (x[1].abs() * 3).long()),
            "aten::repeat_interleave.Tensor",
        ),
        (lambda x: x[x > 0], "aten::index.Tensor"),
    ],
)
def test_data_dependent_shapes_fall_back(fn, op):
    torch.manual_seed(0)
    dev, cpu, ops = _fallback_runs(fn, torch.randn(4, 5))
    assert _same(dev, cpu)
    assert op in ops


def test_boolean_mask_index_put_falls_back_and_writes_through():
    x = torch.randn(4, 5)
    n = x.to("neuron")
    torch_neuronx.clear_op_tracking()
    n[n > 0] = 0.0
    x[x > 0] = 0.0
    assert torch.equal(n.cpu(), x)
    assert "aten::_index_put_impl_" in torch_neuronx.get_fallback_ops()
    torch_neuronx.clear_op_tracking()
    n[torch.tensor([0, 2])] = 1.0
    assert torch_neuronx.get_fallback_ops() == []


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: torch.linalg.solve(a @ a.T + 4 * torch.eye(4, device=a.device), a),
        lambda a: torch.linalg.svd(a),
        lambda a: torch.linalg.qr(a),
        lambda a: torch.linalg.cholesky(a @ a.T + 4 * torch.eye(4, device=a.device)),
        lambda a: torch.linalg.inv(a @ a.T + 4 * torch.eye(4, device=a.device)),
        lambda a: torch.linalg.det(a),
        lambda a: torch.linalg.eigh(a + a.T),
        lambda a: torch.linalg.lu_factor(a),
        lambda a: torch.linalg.pinv(a),
    ],
)
def test_linear_algebra_falls_back(fn):
    torch.manual_seed(1)
    dev, cpu, ops = _fallback_runs(fn, torch.randn(4, 4))
    assert _same(dev, cpu)
    assert ops, "a decomposition or solver runs through the CPU fallback"


def test_spectral_ops_fall_back():
    dev, cpu, ops = _fallback_runs(lambda x: torch.fft.rfft(x).abs(), torch.randn(16))
    assert _same(dev, cpu) and "aten::_fft_r2c" in ops
    dev, cpu, ops = _fallback_runs(lambda x: torch.fft.ifft(torch.fft.fft(x)).real, torch.randn(8))
    assert _same(dev, cpu) and "aten::_fft_c2c" in ops


def test_fp8_scaled_matmul_is_in_the_fallback_tier():
    assert "_scaled_mm" in op_policy.cpu_fallback_ops_by_principle()["fp8_scaled_matmul"]


def test_in_place_and_views_through_the_fallback():
    x = torch.randn(6, 6)
    a = x @ x.T + 6 * torch.eye(6)
    n = a.to("neuron")
    out = torch.empty(0, device="neuron")
    torch.linalg.cholesky(n, out=out)
    assert torch.equal(out.cpu(), torch.linalg.cholesky(a))
    view = n[1:5, 1:5]
    assert torch.equal(torch.linalg.det(view).cpu(), torch.linalg.det(a[1:5, 1:5]))


def test_fallback_copies_are_counted():
    torch_neuronx.metrics.clear_counters()
    x = torch.randn(1000, device="neuron")
    torch.nonzero(x > 0)
    c = torch_neuronx.metrics.counters()
    assert c["FallbackOp::aten::nonzero"] == 1
    assert c["DeviceToHostCopies"] >= 1 and c["HostToDeviceCopies"] >= 1
    assert c["DeviceToHostBytes"] >= 1000


def test_one_warning_per_fallback_op():
    code = (
        "import torch\nx = torch.randn(8, device='neuron')\n"
        "for _ in range(3):\n    torch.nonzero(x)\n    torch.fft.fft(x)\n"
    )
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("Operator 'aten::nonzero' executed via CPU fallback") == 1
    assert out.stderr.count("Operator 'aten::_fft_r2c' executed via CPU fallback") == 1


FALLBACK_LOG_RECORDS = """
import logging, torch

class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.seen = []

    def emit(self, record):
        self.seen.append((record.name, record.levelname, record.getMessage()))

records = Records()
logging.getLogger("torch_neuronx").addHandler(records)
a = torch.randn(4, 4, device="neuron") + 4 * torch.eye(4, device="neuron")
for _ in range(3):
    torch.linalg.inv(a)
print(records.seen)
"""


def test_fallback_warning_goes_through_the_logger_once():
    # A fresh process: the warning is given once per op and process.
    out = run_python(FALLBACK_LOG_RECORDS)
    assert out.returncode == 0, out.stderr
    assert ast.literal_eval(out.stdout.strip()) == [
        ("torch_neuronx", "WARNING", "Operator 'aten::linalg_inv_ex' executed via CPU fallback")
    ]


def test_disabled_fallback_raises():
    out = run_python(
        "import torch\nx = torch.randn(4, device='neuron')\n"
        "print(x[torch.tensor([0, 1])].shape)\ntorch.nonzero(x)",
        env={"NEURON_FALLBACK_ENABLED": "0"},
    )
    assert "torch.Size([2])" in out.stdout
    assert "RuntimeError: Operator 'aten::nonzero'" in out.stderr
    assert "CPU fallback is disabled (NEURON_FALLBACK_ENABLED=0)" in out.stderr


def test_policy_file_can_be_overridden(tmp_path):
    policy = tmp_path / "p.json"
    policy.write_text(
        '{"cpu_fallback": {"only_tanh": {"include": ["tanh"]}},'
        ' "cpu_fallback_with_boolean_mask": {"include": []},'
        ' "fp8_data_movement": {"include": []}}'
    )
    out = run_python(
        "import torch, torch_neuronx\nx = torch.randn(4, device='neuron')\n"
        "torch.tanh(x); torch.nonzero(x)\nprint(torch_neuronx.get_fallback_ops())",
        env={"TORCH_NEURONX_OP_POLICY": str(policy)},
    )
    assert out.stdout.strip() == "['aten::tanh']", out.stderr


def test_executed_ops_tracking():
    torch_neuronx.clear_op_tracking()
    x = torch.randn(3, device="neuron")
    torch.relu(x)
    assert "aten::relu" in torch_neuronx.get_executed_ops()
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_executed_ops() == []
