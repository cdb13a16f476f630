"""Eager execution on neuron tensors against the CPU results for the same inputs."""

import threading

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils._pytree import tree_flatten


def same(neuron_result, cpu_result):
    """Every output of `neuron_result` is on neuron and bit-identical to the CPU's, with its
    dtype, shape and strides; the two have the same structure (tuples, named tuples, lists)."""
    neuron_leaves, neuron_structure = tree_flatten(neuron_result)
    cpu_leaves, cpu_structure = tree_flatten(cpu_result)
    assert neuron_structure == cpu_structure, (neuron_structure, cpu_structure)
    for i, (n, c) in enumerate(zip(neuron_leaves, cpu_leaves)):
        assert n.device.type == "neuron", f"output {i} is on {n.device}"
        assert (n.dtype, n.shape, n.stride()) == (c.dtype, c.shape, c.stride()), i
        assert torch.equal(n.cpu(), c), f"output {i} differs"
    return True


OPS = {
    "add": lambda x, y: x + y,
    "mul_scalar": lambda x, y: x * 3.5,
    "matmul": lambda x, y: x @ y.T,
    "sum_dim": lambda x, y: x.sum(1),
    "softmax": lambda x, y: torch.softmax(x, -1),
    "log_softmax": lambda x, y: F.log_softmax(x, 0),
    "layer_norm": lambda x, y: F.layer_norm(x, (x.shape[-1],)),
    "gelu": lambda x, y: F.gelu(x),
    "where": lambda x, y: torch.where(x > 0, x, y),
    "cumsum": lambda x, y: torch.cumsum(x, 1),
    "sort": lambda x, y: torch.sort(x, 1),
    "topk": lambda x, y: torch.topk(x, 3),
    "cat": lambda x, y: torch.cat([x, y], 0),
    "gather": lambda x, y: torch.gather(x, 1, torch.zeros_like(x, dtype=torch.long)),
    "index_select": lambda x, y: x.index_select(0, torch.tensor([0, 2]).to(x.device)),
    "clamp": lambda x, y: x.clamp(-0.5, 0.5),
    "argmax": lambda x, y: x.argmax(1),
    "var_mean": lambda x, y: torch.var_mean(x, 1),
    "einsum": lambda x, y: torch.einsum("ij,kj->ik", x, y),
    "pow": lambda x, y: x.abs().pow(y),
}


def test_same_requires_placement_every_output_and_the_layout():
    x = torch.randn(4, 6)
    n = x.to("neuron")
    assert same((n, torch.sort(n, 1)), (x, torch.sort(x, 1)))
    wrong = {
        "a result on the CPU": (x.clone(), x),
        "a wrong second output": ((n, n + 1), (x, x)),
        "a missing output": ((n,), (x, x)),
        "a named tuple's wrong indices": (
            torch.return_types.sort((n, torch.zeros(4, 6, dtype=torch.long, device="neuron"))),
            torch.return_types.sort((x, torch.zeros(4, 6, dtype=torch.long) + 1)),
        ),
        "other strides": (n.t().contiguous().t(), x),
    }
    for case, (neuron_result, cpu_result) in wrong.items():
        with pytest.raises(AssertionError):
            same(neuron_result, cpu_result)
            pytest.fail(f"same() accepted {case}")


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_bit_identical_to_cpu(name):
    torch.manual_seed(0)
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    assert same(OPS[name](x.to("neuron"), y.to("neuron")), OPS[name](x, y))


def test_views_alias_device_memory():
    base = torch.zeros(4, 4, device="neuron")
    base[1].add_(1)
    base.t()[2].mul_(0).add_(5)
    base.unfold(0, 2, 2)[0].fill_(-1)
    ref = torch.zeros(4, 4)
    ref[1].add_(1)
    ref.t()[2].mul_(0).add_(5)
    ref.unfold(0, 2, 2)[0].fill_(-1)
    assert torch.equal(base.cpu(), ref)
    v = base.view(16)
    assert v._base is base and v.data_ptr() == base.data_ptr()
    d = base.diagonal()
    d.zero_()
    assert base[3, 3].item() == 0


def test_in_place_and_out_keep_identity():
    x = torch.randn(5, device="neuron")
    ptr = x.data_ptr()
    y = x.relu_()
    assert y is x and x.data_ptr() == ptr
    out = torch.empty(0, device="neuron")
    r = torch.add(x, 1, out=out)
    assert r is out and out.shape == (5,)
    assert torch.equal(out.cpu(), x.cpu() + 1)
    big = torch.empty(0, device="neuron")
    torch.cat([x, x], out=big)
    assert big.shape == (10,) and torch.equal(big.cpu(), torch.cat([x.cpu(), x.cpu()]))


def test_device_mixing_raises_like_cuda():
    n = torch.ones(3, device="neuron")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*cpu"):
        n + torch.ones(3)
    with pytest.raises(RuntimeError, match="same device.*neuron:1"):
        n + torch.ones(3, device="neuron:1")
    assert torch.equal((n + torch.tensor(2.0)).cpu(), torch.full((3,), 3.0))
    assert (n * torch.tensor(2)).device.type == "neuron"
    idx = torch.tensor([0, 2])
    assert torch.equal(n[idx].cpu(), torch.ones(2))


def test_setitem_from_an_overlapping_0d_tensor_takes_the_device_path():
    # ATen's indexing assignment fills from a 0-d CPU source, and expands and copies from any
    # other device's (as on CUDA), where the overlap check refuses a source under the written
    # elements: the same refusal the CPU gives that copy.
    def overlapping(device):
        scalar = torch.zeros((), device=device)
        return scalar, scalar.unfold(0, 1, 1)

    scalar, view = overlapping("cpu")
    view[...] = scalar
    with pytest.raises(RuntimeError, match="refer to a single memory location") as on_cpu:
        view.copy_(scalar.expand(1))
    scalar, view = overlapping("neuron")
    with pytest.raises(RuntimeError, match="refer to a single memory location") as on_neuron:
        view[...] = scalar
    assert str(on_neuron.value) == str(on_cpu.value)
    view[...] = scalar.clone()
    assert torch.equal(view.cpu(), torch.zeros(1))


def test_op_without_cpu_kernel_is_a_clear_error():
    x = torch.randn(1, 1, 4, 4, device="neuron")
    w = torch.randn(1, 1, 1, 1, device="neuron")
    with pytest.raises(NotImplementedError, match="'aten::cudnn_convolution' is not supported"):
        torch.ops.aten.cudnn_convolution(x, w, [0, 0], [1, 1], [1, 1], 1, False, False, False)
    assert (x + 1).shape == x.shape


def _module_parity(make, inputs, train=True):
    torch.manual_seed(0)
    cpu = make()
    dev = make()
    dev.load_state_dict(cpu.state_dict())
    dev.to("neuron")
    cpu.train(train)
    dev.train(train)
    xs = [i.clone().requires_grad_(i.is_floating_point()) for i in inputs]
    xn = [i.to("neuron").requires_grad_(i.is_floating_point()) for i in inputs]
    out_c, out_n = cpu(*xs), dev(*xn)
    assert same(out_n, out_c)
    # The loss takes every floating output (an LSTM's output and its final states).
    for outputs in (out_c, out_n):
        sum(
            t.float().pow(2).sum() for t in tree_flatten(outputs)[0] if t.is_floating_point()
        ).backward()
    for pc, pn in zip(cpu.parameters(), dev.parameters()):
        assert same(pn.grad, pc.grad)
    for a, b in zip(xn, xs):
        if b.grad is not None:
            assert same(a.grad, b.grad)


@pytest.mark.parametrize(
    "kind",
    [
        "conv2d",
        "conv_transpose",
        "batchnorm",
        "lstm",
        "gru",
        "rnn",
        "lstm_cell",
        "embedding",
        "maxpool",
        "groupnorm",
    ],
)
def test_module_forward_backward_bit_identical(kind):
    torch.manual_seed(1)
    cases = {
        "conv2d": (lambda: nn.Conv2d(3, 8, 3, padding=1), [torch.randn(2, 3, 8, 8)]),
        "conv_transpose": (
            lambda: nn.ConvTranspose2d(3, 4, 3, stride=2),
            [torch.randn(2, 3, 5, 5)],
        ),
        "batchnorm": (lambda: nn.BatchNorm2d(3), [torch.randn(4, 3, 5, 5)]),
        "lstm": (lambda: nn.LSTM(6, 8, 2, batch_first=True), [torch.randn(3, 5, 6)]),
        "gru": (lambda: nn.GRU(6, 8, bidirectional=True), [torch.randn(5, 3, 6)]),
        "rnn": (lambda: nn.RNN(6, 8), [torch.randn(5, 3, 6)]),
        "lstm_cell": (lambda: nn.LSTMCell(6, 8), [torch.randn(3, 6)]),
        "embedding": (lambda: nn.Embedding(10, 4), [torch.tensor([[1, 2], [3, 9]])]),
        "maxpool": (
            lambda: nn.Sequential(nn.Conv2d(2, 2, 1), nn.MaxPool2d(2)),
            [torch.randn(1, 2, 6, 6)],
        ),
        "groupnorm": (lambda: nn.GroupNorm(2, 4), [torch.randn(2, 4, 3, 3)]),
    }
    make, inputs = cases[kind]
    _module_parity(make, inputs)


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_selects_cpu_kernels(causal):
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 4, 16, 8, requires_grad=True) for _ in range(3))
    qn, kn, vn = (t.detach().to("neuron").requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    outn = F.scaled_dot_product_attention(qn, kn, vn, is_causal=causal)
    assert same(outn, out)
    out.sum().backward()
    outn.sum().backward()
    assert same(qn.grad, q.grad) and same(kn.grad, k.grad) and same(vn.grad, v.grad)


def test_double_backward():
    a = torch.randn(5, requires_grad=True)
    an = a.detach().to("neuron").requires_grad_()
    results = []
    for t in (a, an):
        (g,) = torch.autograd.grad((t.sin() * t**3).sum(), t, create_graph=True)
        (gg,) = torch.autograd.grad(g.sum(), t)
        results.append(gg)
    assert same(results[1], results[0])


def test_autograd_is_thread_safe():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)).to("neuron")
    x = torch.randn(8, 16, device="neuron")
    expected = torch.autograd.grad(model(x).sum(), list(model.parameters()))
    errors, results = [], []

    def work():
        try:
            for _ in range(20):
                grads = torch.autograd.grad(model(x).sum(), list(model.parameters()))
            results.append(grads)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for grads in results:
        assert all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(grads, expected))


def test_module_to_keeps_parameter_identity():
    model = nn.Linear(3, 3)
    weight = model.weight
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.to("neuron")
    assert model.weight is weight and weight.device.type == "neuron"
    model(torch.ones(1, 3, device="neuron")).sum().backward()
    opt.step()
    assert weight.grad.device.type == "neuron"


def test_pinned_memory_and_non_blocking_copies():
    x = torch.randn(1000)
    pinned = x.pin_memory()
    assert pinned.is_pinned() and not x.is_pinned()
    n = pinned.to("neuron", non_blocking=True)
    back = torch.empty(1000).pin_memory()
    back.copy_(n, non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(back, x)
    assert x.untyped_storage().pin_memory().is_pinned()


def test_dataloader_pin_memory():
    data = torch.utils.data.TensorDataset(torch.arange(12.0).reshape(6, 2), torch.arange(6))
    loader = torch.utils.data.DataLoader(data, batch_size=3, pin_memory=True)
    batches = [
        (x.to("neuron", non_blocking=True), y.to("neuron", non_blocking=True)) for x, y in loader
    ]
    assert all(x.is_neuron for x, _ in batches)
    assert torch.equal(torch.cat([x.cpu() for x, _ in batches]), data.tensors[0])
    assert next(iter(loader))[0].is_pinned()


def test_item_print_and_scalars():
    x = torch.tensor([[1.5, -2.0]], device="neuron")
    assert x[0, 0].item() == 1.5
    assert "device='neuron:0'" in repr(x)
    assert x.max().item() == 1.5 and bool((x > 0).any())
    assert torch.tensor(3, device="neuron").item() == 3


def test_dtypes_and_casts():
    x = torch.randn(4, 4)
    for dtype in (torch.float16, torch.bfloat16, torch.int32, torch.int8, torch.bool, torch.uint8):
        assert torch.equal(x.to("neuron").to(dtype).cpu(), x.to(dtype))
    assert torch.equal((x.to("neuron").half() @ x.to("neuron").half()).cpu(), x.half() @ x.half())


def test_overlapping_and_identical_arguments_behave_as_on_cpu():
    # A device-to-device copy between overlapping views, and an op whose arguments are one
    # tensor, must meet ATen's overlap and identity checks as on CPU.
    def overlapping_copy(device):
        a = torch.arange(4.0, device=device)
        a[1:].copy_(a[:-1])

    def self_as_source(device):
        t = torch.zeros(1, 0, device=device)
        t.index_put_((torch.tensor([0], device=device),), t)

    for run in (overlapping_copy, self_as_source):
        with pytest.raises(RuntimeError, match="some elements of the input tensor") as on_cpu:
            run("cpu")
        with pytest.raises(RuntimeError) as on_neuron:
            run("neuron")
        assert str(on_neuron.value) == str(on_cpu.value)
    x = torch.randn(5, device="neuron")
    doubled = 2 * x.cpu()
    assert torch.add(x, x, out=x) is x and torch.equal(x.cpu(), doubled)


def test_in_place_composite_passing_self_as_its_out_behaves_as_on_cpu():
    # Tensor.addr_ hands its self to addr.out as the same C++ reference, which the CPU kernel
    # tells apart from a separate out (and refuses for a 0-d self); neuron must do the same.
    def outer_into(device, shape):
        x = torch.full(shape, 2.0, device=device)
        x.addr_(torch.arange(3.0, device=device), torch.ones(2, device=device), beta=3, alpha=5)
        return x.cpu()

    with pytest.raises(RuntimeError, match="2D tensor expected") as on_cpu:
        outer_into("cpu", ())
    with pytest.raises(RuntimeError) as on_neuron:
        outer_into("neuron", ())
    assert str(on_neuron.value) == str(on_cpu.value)
    assert torch.equal(outer_into("neuron", (3, 2)), outer_into("cpu", (3, 2)))


# The ops with an unboxed host-kernel path (csrc/aten/Unboxed.cpp), in each form of argument it
# tells apart: neuron tensors, Python numbers and 0-dim CPU tensors (both reach the device as
# CPU scalars), one tensor passed twice, and two views of one storage.
UNBOXED = {
    "add": lambda x, y: x + y,
    "add_alpha": lambda x, y: torch.add(x, y, alpha=-2),
    "add_number": lambda x, y: x + 2.5,
    "add_cpu_scalar": lambda x, y: x + torch.tensor(1.25),
    "add_itself": lambda x, y: x + x,
    "add_views": lambda x, y: x[1:] + x[:-1],
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "mul_number": lambda x, y: 3 * x,
    "div": lambda x, y: x / y,
    "div_number": lambda x, y: x / 7,
    "neg": lambda x, y: -x,
    "relu": lambda x, y: torch.relu(x),
    "exp": lambda x, y: torch.exp(x),
    "tanh": lambda x, y: torch.tanh(x),
    "sigmoid": lambda x, y: torch.sigmoid(x),
    "sqrt": lambda x, y: torch.sqrt(x.abs()),
    "rsqrt": lambda x, y: torch.rsqrt(x.abs()),
    "where": lambda x, y: torch.where(x > 0, x, y),
    "sum": lambda x, y: (x.sum(), x.sum(0), x.sum(-1, keepdim=True), x.sum(1, dtype=torch.float32)),
    "mean": lambda x, y: (x.mean(0), x.mean((0, 1), keepdim=True)),
    "mm": lambda x, y: x @ y.T,
    "bmm": lambda x, y: torch.bmm(x.view(2, 3, 4), y.view(2, 4, 3)),
    "addmm": lambda x, y: torch.addmm(y[:, 0], x, y.T),
    "gelu": lambda x, y: F.gelu(x),
    "gelu_tanh": lambda x, y: F.gelu(x, approximate="tanh"),
    "softmax": lambda x, y: torch.softmax(x, -1),
    "log_softmax": lambda x, y: F.log_softmax(x, 0),
    "compare": lambda x, y: (x > 0.5, x < 0, x == 0),
    "add_": lambda x, y: x.clone().add_(y),
    "add_number_": lambda x, y: x.clone().add_(1.5),
    "sub_": lambda x, y: x.clone().sub_(y),
    "mul_": lambda x, y: x.clone().mul_(y),
    "mul_itself_": lambda x, y: x.clone().mul_(x),
    "div_": lambda x, y: x.clone().div_(y),
    "div_number_": lambda x, y: x.clone().div_(3),
    "relu_": lambda x, y: x.clone().relu_(),
    "zero_": lambda x, y: x.clone().zero_(),
    "fill_": lambda x, y: x.clone().fill_(0.75),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", UNBOXED)
def test_ops_of_the_unboxed_path_match_cpu(name, dtype):
    g = torch.Generator().manual_seed(7)
    x, y = (torch.randn(6, 4, generator=g).to(dtype) for _ in range(2))
    assert same(UNBOXED[name](x.to("neuron"), y.to("neuron")), UNBOXED[name](x, y))


def test_the_unboxed_path_keeps_integer_bool_and_in_place_semantics():
    x = torch.arange(-6, 6, dtype=torch.int32).view(3, 4)
    for fn in (
        lambda t: t + 3,
        lambda t: t * t,
        lambda t: t > 0,
        lambda t: t // 2 + t.neg(),
        lambda t: t.sum(1),
    ):
        assert same(fn(x.to("neuron")), fn(x))
    t, u = torch.ones(4, device="neuron"), torch.arange(4.0, device="neuron")
    assert t.add_(u) is t and torch.equal(t.cpu(), torch.arange(4.0) + 1)
    # Errors are the CPU's own: overlapping in-place writes and shapes; a CPU operand that is
    # not a scalar is refused as on CUDA.
    for fn in (lambda d: d[1:].add_(d[:-1]), lambda d: d.add_(torch.ones(2, 4, device=d.device))):
        with pytest.raises(RuntimeError) as on_cpu:
            fn(torch.arange(4.0))
        with pytest.raises(RuntimeError) as on_neuron:
            fn(torch.arange(4.0, device="neuron"))
        assert str(on_neuron.value) == str(on_cpu.value)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.arange(4.0, device="neuron") + torch.ones(4)
