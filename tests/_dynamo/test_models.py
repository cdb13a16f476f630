"""Compiled models give eager's results: forward, backward, training, inference, autocast.

The models also give what Inductor compiles for the CPU from the same weights and inputs: bit
for bit (compile_checks.assert_same_as_inductor_on_cpu) unless they hold attention, which
Dynamo traces differently for the two devices.
"""

import torch
from compile_checks import assert_matches, assert_same_as_inductor_on_cpu
from tiny_gpt import TinyGPT, batches
from torch import nn

import torch_neuronx._dynamo as neuron_dynamo


def copies(make, seed=0):
    """One module from one seed three times over: to compile for neuron, to run eagerly on
    neuron, and to compile with Inductor for the CPU."""
    torch.manual_seed(seed)
    model = make().to("neuron")
    eager, on_cpu = make().to("neuron"), make()
    eager.load_state_dict(model.state_dict())
    on_cpu.load_state_dict(model.state_dict())
    return model, eager, on_cpu


def mlp():
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))


def test_mlp_forward_and_backward_match_eager_and_inductor_on_cpu():
    model, ref, on_cpu = copies(mlp)
    compiled = torch.compile(model, backend="neuron", fullgraph=True)
    x = torch.randn(8, 16, device="neuron")
    out, expected = compiled(x), ref(x)
    cpu_out = torch.compile(on_cpu, fullgraph=True)(x.cpu())
    assert_matches(out, expected)
    assert_same_as_inductor_on_cpu(out, cpu_out)
    for y in (out, expected, cpu_out):
        y.square().sum().backward()
    for p, q, c in zip(model.parameters(), ref.parameters(), on_cpu.parameters()):
        assert_matches(p.grad, q.grad, rtol=1e-4, atol=1e-5)
        assert_same_as_inductor_on_cpu(p.grad, c.grad)
    subgraphs = neuron_dynamo.get_dynamo_metrics()["graphs"][0]["subgraphs"]
    assert [s["kind"] for s in subgraphs] == ["forward", "backward"]


def test_tiny_gpt_trains_like_eager_and_inductor_on_cpu_for_20_steps():
    config = dict(vocab=32, d=32, heads=2, layers=1, seq=16)
    model, ref, on_cpu = copies(lambda: TinyGPT(**config))
    compiled = torch.compile(model, backend="neuron", fullgraph=True)
    initial = [p.detach().cpu().clone() for p in ref.parameters()]
    # SGD keeps float32 rounding differences at their size; Adam's normalisation would
    # amplify them for parameters whose gradients are near zero.
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.2, momentum=0.9)
    cpu_opt = torch.optim.SGD(on_cpu.parameters(), lr=0.2, momentum=0.9)
    losses, ref_losses, cpu_losses = [], [], []
    runs = (
        (compiled, opt, losses, "neuron"),
        (ref, ref_opt, ref_losses, "neuron"),
        (torch.compile(on_cpu, fullgraph=True), cpu_opt, cpu_losses, "cpu"),
    )
    for x, y in batches(20, batch=4, seq=16, vocab=32):
        for m, o, log, device in runs:
            loss = m(x.to(device), y.to(device))
            o.zero_grad(set_to_none=True)
            loss.backward()
            o.step()
            log.append(loss.item())
    assert all((p.cpu() - p0).abs().max() > 1e-3 for p, p0 in zip(ref.parameters(), initial))
    torch.testing.assert_close(losses, ref_losses, rtol=1e-4, atol=1e-5)
    # Not bit for bit, unlike the other models: Dynamo traces attention on neuron tensors to the
    # math decomposition of scaled_dot_product_attention and on CPU tensors to the fused CPU
    # kernel. The two round differently, by a few float32 ulps (eps 1.2e-7) per step, which 20
    # SGD steps carry along (at most 2.4e-7 in losses and parameters here); a wrong gradient
    # would move them by orders of magnitude more.
    torch.testing.assert_close(losses, cpu_losses, rtol=1e-5, atol=1e-6)
    for p, q, c in zip(model.parameters(), ref.parameters(), on_cpu.parameters()):
        assert_matches(p, q, rtol=1e-4, atol=1e-4)
        assert_matches(p, c, rtol=1e-5, atol=1e-6)
    assert neuron_dynamo.get_dynamo_metrics()["num_graphs"] == 1


def test_conv_net_in_eval_mode_matches_eager_and_inductor_on_cpu():
    def convnet():
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(8, 5),
        )

    model, ref, on_cpu = copies(convnet)
    for m in (model, ref):
        m.train()
        m(torch.randn(4, 3, 12, 12, device="neuron"))  # gives BatchNorm real running stats
        m.eval()
    ref.load_state_dict(model.state_dict())
    on_cpu.load_state_dict(model.state_dict())
    on_cpu.eval()
    compiled = torch.compile(model, backend="neuron")
    x = torch.randn(2, 3, 12, 12, device="neuron")
    with torch.no_grad():
        out = compiled(x)
        assert_matches(out, ref(x), rtol=1e-4, atol=1e-5)
        assert_same_as_inductor_on_cpu(out, torch.compile(on_cpu)(x.cpu()))
    subgraphs = neuron_dynamo.get_dynamo_metrics()["graphs"][0]["subgraphs"]
    assert [s["kind"] for s in subgraphs] == ["inference"]


def test_graph_break_gives_two_compiled_graphs():
    def fn(x):
        y = torch.sin(x) * 2
        torch._dynamo.graph_break()
        return torch.cos(y) + 1

    x = torch.randn(6, device="neuron")
    assert_matches(torch.compile(fn, backend="neuron")(x), fn(x))
    metrics = neuron_dynamo.get_dynamo_metrics()
    assert metrics["num_graphs"] == 2
    assert all(g["subgraphs"] and not g["fallback"] for g in metrics["graphs"])


def test_autocast_inside_compiled_region():
    def fn(a, b):
        with torch.autocast("neuron", dtype=torch.bfloat16):
            return torch.softmax(a @ b, dim=-1), a @ b

    a, b = torch.randn(8, 16, device="neuron"), torch.randn(16, 8, device="neuron")
    (probs, prod), (ref_probs, ref_prod) = torch.compile(fn, backend="neuron")(a, b), fn(a, b)
    assert prod.dtype == ref_prod.dtype == torch.bfloat16
    assert probs.dtype == ref_probs.dtype == torch.float32
    assert_matches(prod.float(), ref_prod.float(), rtol=1e-2, atol=1e-2)
    assert_matches(probs, ref_probs, rtol=1e-2, atol=1e-3)


calls = []


@torch.library.custom_op("neuron_compile_test::shifted_relu", mutates_args=())
def shifted_relu(x: torch.Tensor, shift: float) -> torch.Tensor:
    calls.append(x.device.type)
    return torch.relu(x) + shift


@shifted_relu.register_fake
def _(x, shift):
    return torch.empty_like(x)


def test_custom_op_stays_one_node_under_fullgraph(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1")

    def fn(x):
        return shifted_relu(x * 3, 0.5).sum(dim=0)

    x = torch.randn(5, 4, device="neuron")
    compiled = torch.compile(fn, backend="neuron", fullgraph=True)
    calls.clear()
    out = compiled(x)
    assert_matches(out, (torch.relu(x * 3) + 0.5).sum(dim=0))
    compiled(x)
    # Called once per run, by the compiled code, on host views of the device memory.
    assert calls == ["cpu", "cpu"]
    code = "".join(p.read_text() for p in tmp_path.glob("proc_0/*/*.py"))
    assert code.count("torch.ops.neuron_compile_test.shifted_relu.default(") == 1


def test_compiled_optimizer_step_matches_eager_and_inductor_on_cpu():
    model, ref, on_cpu = copies(mlp)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ref_opt = torch.optim.Adam(ref.parameters(), lr=1e-2)
    # The foreach implementation is the default for neuron parameters, not for CPU ones.
    cpu_opt = torch.optim.Adam(on_cpu.parameters(), lr=1e-2, foreach=True)
    runs = (
        (model, opt, torch.compile(opt.step, backend="neuron"), "neuron"),
        (ref, ref_opt, ref_opt.step, "neuron"),
        (on_cpu, cpu_opt, torch.compile(cpu_opt.step), "cpu"),
    )
    x = torch.randn(8, 16, device="neuron")
    for _ in range(3):
        for m, o, run, device in runs:
            o.zero_grad()
            m(x.to(device)).square().mean().backward()
            run()
    for p, q, c in zip(model.parameters(), ref.parameters(), on_cpu.parameters()):
        assert_matches(p, q, rtol=1e-4, atol=1e-5)
        assert_same_as_inductor_on_cpu(p, c)
    assert neuron_dynamo.get_dynamo_metrics()["num_graphs"] >= 1


def test_in_place_updates_and_views_of_inputs():
    def fn(x, buf):
        buf.add_(x)
        return buf[1:], x.t()

    x = torch.randn(3, 4, device="neuron")
    buf = torch.zeros(3, 4, device="neuron")
    tail, xt = torch.compile(fn, backend="neuron")(x, buf)
    assert_matches(buf, x)
    assert_matches(tail, x[1:])
    tail.fill_(7)  # still a view of buf, as in eager
    assert (buf[1:].cpu() == 7).all()
    assert xt.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_device_constants_created_inside_the_graph():
    def fn(x):
        offsets = torch.tensor([1.0, 2.0, 3.0], device=x.device)
        return x * offsets + torch.arange(3, device=x.device)

    x = torch.randn(2, 3, device="neuron")
    assert_matches(torch.compile(fn, backend="neuron", fullgraph=True)(x), fn(x))
