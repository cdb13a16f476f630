"""Every example kernel against its torch reference (fp32 1e-5, bf16 1e-2), and training."""

import copy

import flash_attention
import layernorm
import matmul
import pytest
import rmsnorm
import softmax
import tensor_add
import torch
from nkitest_utils import assert_matches, requires_neuron, requires_neuron_backend

DTYPES = [torch.float32, torch.bfloat16]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_add(dtype):
    a, b = torch.randn(256, 1024, dtype=dtype), torch.randn(256, 1024, dtype=dtype)
    assert_matches(tensor_add.tensor_add(a, b), tensor_add.reference(a, b))


@pytest.mark.parametrize("dtype", DTYPES)
def test_tiled_matmul(dtype):
    lhsT = (torch.randn(256, 256) / 16).to(dtype)
    rhs = torch.randn(256, 1024, dtype=dtype)
    assert_matches(matmul.matmul_tiled(lhsT, rhs), matmul.reference(lhsT, rhs))


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_forward(dtype):
    x, w = torch.randn(300, 384, dtype=dtype), (torch.rand(384) + 0.5).to(dtype)
    assert_matches(rmsnorm.rmsnorm_fwd(x, w, 1e-6), rmsnorm.reference(x, w, 1e-6))


def test_rmsnorm_backward_kernel():
    x, w, g = torch.randn(200, 640), torch.rand(640) + 0.5, torch.randn(200, 640)
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    rmsnorm.reference(xr, wr, 1e-6).backward(g)
    dx, dw = rmsnorm.rmsnorm_bwd(x, w, g, 1e-6)
    assert_matches(dx, xr.grad)
    assert_matches(dw, wr.grad)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax(dtype):
    x = (torch.randn(200, 700) * 3).to(dtype)
    assert_matches(softmax.softmax(x), softmax.reference(x))


@pytest.mark.parametrize("dtype", DTYPES)
def test_layernorm_with_bn_stats(dtype):
    x = (torch.randn(150, 1100) * 2 + 1).to(dtype)
    gamma, beta = torch.randn(1100, dtype=dtype), torch.randn(1100, dtype=dtype)
    assert_matches(
        layernorm.layernorm(x, gamma, beta, 1e-5), layernorm.reference(x, gamma, beta, 1e-5)
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_forward(dtype, causal):
    q, k, v = (torch.randn(2, 256, 64, dtype=dtype) for _ in range(3))
    o, lse = flash_attention.flash_fwd[2](q, k, v, 0.125, causal)
    assert_matches(o, flash_attention.reference(q, k, v, causal))
    scores = (q.float() @ k.float().transpose(1, 2)) * 0.125
    if causal:
        scores = scores.masked_fill(torch.ones(256, 256).triu(1).bool(), float("-inf"))
    assert_matches(lse, torch.logsumexp(scores, -1))


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_backward(causal):
    q, k, v = (torch.randn(2, 256, 32, requires_grad=True) for _ in range(3))
    grad = torch.randn(2, 256, 32)
    flash_attention.flash_attention(q, k, v, causal).backward(grad)
    ours = [t.grad for t in (q, k, v)]
    ref = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    flash_attention.reference(*ref, causal).backward(grad)
    for mine, theirs in zip(ours, ref):
        assert_matches(mine, theirs.grad)


def _train(model, data, target, steps, compiled, backend="aot_eager"):
    """Run SGD steps; returns the gradients of every step."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step_loss = lambda: torch.nn.functional.mse_loss(model(data), target)  # noqa: E731
    if compiled:
        step_loss = torch.compile(step_loss, backend=backend, fullgraph=True)
    history = []
    for _ in range(steps):
        opt.zero_grad()
        step_loss().backward()
        history.append([p.grad.detach().cpu().clone() for p in model.parameters()])
        opt.step()
    return history


def _rmsnorm_model(use_nki):
    return torch.nn.Sequential(
        torch.nn.Linear(64, 128), rmsnorm.RMSNorm(128, use_nki=use_nki), torch.nn.Linear(128, 16)
    )


def _check_training(make_model, data, target, compiled, device="cpu", backend="aot_eager"):
    ours = make_model(True)
    ref = make_model(False)
    ref.load_state_dict(copy.deepcopy(ours.state_dict()))
    ours.to(device)
    got = _train(ours, data.to(device), target.to(device), 3, compiled, backend)
    want = _train(ref, data, target, 3, False)
    for step_got, step_want in zip(got, want):
        for g, w in zip(step_got, step_want):
            torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_rmsnorm_model_trains_like_torch(compiled):
    _check_training(_rmsnorm_model, torch.randn(4, 40, 64), torch.randn(4, 40, 16), compiled)


def _attention_model(use_nki):
    return flash_attention.TinyAttention(dim=64, heads=2, use_nki=use_nki)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_flash_attention_model_trains_like_torch(compiled):
    _check_training(_attention_model, torch.randn(1, 256, 64), torch.randn(1, 256, 64), compiled)


@requires_neuron
def test_rmsnorm_model_trains_on_neuron_eager():
    _check_training(
        _rmsnorm_model, torch.randn(4, 40, 64), torch.randn(4, 40, 16), False, device="neuron"
    )


@requires_neuron_backend
def test_rmsnorm_model_trains_on_neuron_compiled():
    _check_training(
        _rmsnorm_model,
        torch.randn(4, 40, 64),
        torch.randn(4, 40, 16),
        True,
        device="neuron",
        backend="neuron",
    )


@requires_neuron
def test_flash_attention_model_trains_on_neuron():
    _check_training(
        _attention_model, torch.randn(1, 256, 64), torch.randn(1, 256, 64), False, device="neuron"
    )
