import pytest
import torch
from torch import nn


def test_autocast_policy_matches_cuda_lists():
    a = torch.randn(8, 8)
    n = a.to("neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        mm = n @ n
        soft = torch.softmax(n, -1)
        added = n + n
        lin = nn.functional.linear(n, n)
    assert mm.dtype == torch.bfloat16 and lin.dtype == torch.bfloat16
    assert soft.dtype == torch.float32 and added.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = a @ a
    assert torch.equal(mm.cpu(), ref)


def test_float16_autocast_and_disabled_region():
    n = torch.randn(4, 4, device="neuron")
    with torch.autocast("neuron", dtype=torch.float16):
        assert (n @ n).dtype == torch.float16
        with torch.autocast("neuron", enabled=False):
            assert (n @ n).dtype == torch.float32
    with torch.neuron.amp.autocast():
        assert (n @ n).dtype == torch.bfloat16


def test_bce_is_banned_like_cuda():
    p = torch.rand(4, device="neuron")
    with (
        torch.autocast("neuron", dtype=torch.float16),
        pytest.raises(RuntimeError, match="unsafe to autocast"),
    ):
        nn.functional.binary_cross_entropy(p, p)


def _scaler_run(device, inf_step=None):
    """Three GradScaler steps; at `inf_step` one gradient is made inf. Returns the final
    parameters and, per step, whether it left the parameters as they were and the scale."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device)
    x = torch.randn(8, 16).to(device)
    history = []
    for step in range(3):
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        opt.zero_grad()
        scaler.scale(loss).backward()
        if step == inf_step:
            model[0].weight.grad[0, 0] = float("inf")
        before = [p.detach().clone() for p in model.parameters()]
        scaler.step(opt)
        scaler.update()
        skipped = all(torch.equal(a, p) for a, p in zip(before, model.parameters()))
        history.append((skipped, scaler.get_scale()))
    return [p.detach().cpu() for p in model.parameters()], history


@pytest.mark.parametrize(
    "inf_step, history",
    [
        (None, [(False, 65536.0)] * 3),
        # An inf gradient skips that step and halves the scale (backoff_factor 0.5).
        (1, [(False, 65536.0), (True, 32768.0), (False, 32768.0)]),
    ],
)
def test_grad_scaler_training_matches_cpu(inf_step, history):
    neuron_params, neuron_history = _scaler_run("neuron", inf_step)
    cpu_params, cpu_history = _scaler_run("cpu", inf_step)
    assert neuron_history == cpu_history == history
    for a, b in zip(neuron_params, cpu_params):
        assert torch.equal(a, b)
    assert isinstance(torch.neuron.amp.GradScaler(), torch.amp.GradScaler)
