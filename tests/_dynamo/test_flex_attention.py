"""FlexAttention on neuron tensors, eager and compiled, forward and backward, against the CPU.

The reference is the same call on CPU tensors, run eagerly: PyTorch's dense implementation of
flex attention, which is also what runs eagerly on neuron, so eager results must be identical
bit for bit. PyTorch refuses the backward on CPU tensors (Inductor cannot compile it for the
CPU), so the reference lifts that check while it runs. Compiled graphs fuse and reorder the
same math, which moves results by a few ulps of the dtype.
"""

import dataclasses
import math

import pytest
import torch
from pyrun import run_python
from torch import nn
from torch.nn.attention import flex_attention as flex_module
from torch.nn.attention.flex_attention import (
    AuxRequest,
    and_masks,
    create_block_mask,
    flex_attention,
)

# Compiled against the eager CPU reference: a few ulps in float32 (more in a head-bias gradient
# summed over 131,072 scores), and PyTorch's default bfloat16 tolerance (two ulps).
COMPILED_TOLERANCE = {
    # A bias gradient sums thousands of score gradients; Inductor's parallel reduction order
    # moves it by up to ~2e-5 relative between runs.
    torch.float32: dict(rtol=1e-4, atol=1e-4),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-5),
}
# Inductor keeps values in float32 across autocast's casts to bfloat16 within a fused kernel
# (its emulate_precision_casts is off), so compiled results under autocast differ from eager's
# by up to two bfloat16 ulps of the largest values (measured: 0.031 in gradients up to 5.2).
AUTOCAST_COMPILED_TOLERANCE = dict(rtol=1.6e-2, atol=4e-2)
EXACT = dict(rtol=0, atol=0)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def sliding_window(b, h, q_idx, kv_idx):
    return (kv_idx <= q_idx) & (q_idx - kv_idx < 48)


def relative_position(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx) * 0.05


def soft_cap(score, b, h, q_idx, kv_idx):
    return 8 * torch.tanh(score / 8)


def same_document(documents):
    """Tokens attend within their document; ``documents`` holds each token's document id."""

    def mask(b, h, q_idx, kv_idx):
        return documents[b, q_idx] == documents[b, kv_idx]

    return mask


def head_bias_score(head_bias):
    """A learned bias per head: a captured buffer that is trained."""

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + head_bias[h]

    return score_mod


@dataclasses.dataclass(frozen=True)
class Case:
    """One attention problem: shapes, and the score_mod and mask_mod it applies."""

    name: str
    q_heads: int
    kv_heads: int
    q_len: int
    kv_len: int
    trained: tuple = ("q", "k", "v")  # the tensors whose gradients are compared

    def __str__(self):
        return self.name

    def mods(self, tensors):
        """The score_mod and mask_mod, capturing the tensors of one run (CPU or neuron)."""
        return {
            "relative_position_causal": (relative_position, causal),
            "head_bias_sliding_window_gqa": (
                head_bias_score(tensors["head_bias"]),
                sliding_window,
            ),
            "soft_cap_documents": (
                soft_cap,
                and_masks(causal, same_document(tensors["documents"])),
            ),
            "cross_lengths_gqa": (None, None),
        }[self.name]


CASES = [
    Case("relative_position_causal", 4, 4, 256, 256),
    Case("head_bias_sliding_window_gqa", 4, 2, 256, 256, ("q", "k", "v", "head_bias")),
    Case("soft_cap_documents", 2, 2, 200, 200),
    Case("cross_lengths_gqa", 2, 1, 64, 320),
]


def make_tensors(case, dtype, batch=2, head_dim=16):
    """CPU leaves: q, k, v, a head bias to train, document ids, and the output gradients."""
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(dtype)

    starts = torch.rand(batch, case.kv_len, generator=g) < 0.02
    return {
        "q": randn(batch, case.q_heads, case.q_len, head_dim),
        "k": randn(batch, case.kv_heads, case.kv_len, head_dim),
        "v": randn(batch, case.kv_heads, case.kv_len, head_dim),
        "head_bias": torch.randn(case.q_heads, generator=g),
        "documents": starts.int().cumsum(1).int(),
        "grad_out": randn(batch, case.q_heads, case.q_len, head_dim),
        "grad_lse": torch.randn(batch, case.q_heads, case.q_len, generator=g),
    }


def attend(case, tensors, attention, device, backward=True):
    """Moves the tensors to ``device`` and returns the output, lse and trained gradients."""
    on_device = {
        name: t.to(device).requires_grad_(backward and name in case.trained)
        for name, t in tensors.items()
    }
    score_mod, mask_mod = case.mods(on_device)
    block_mask = None
    if mask_mod is not None:
        batch = tensors["q"].shape[0]
        block_mask = create_block_mask(mask_mod, batch, None, case.q_len, case.kv_len, device)
    out, aux = attention(
        on_device["q"],
        on_device["k"],
        on_device["v"],
        score_mod=score_mod,
        block_mask=block_mask,
        enable_gqa=case.q_heads != case.kv_heads,
        return_aux=AuxRequest(lse=True),
    )
    results = {"out": out, "lse": aux.lse}
    if backward:
        grads = torch.autograd.grad(
            (out, aux.lse),
            [on_device[name] for name in case.trained],
            (on_device["grad_out"], on_device["grad_lse"]),
        )
        results.update({f"grad_{name}": grad for name, grad in zip(case.trained, grads)})
    return results


def on_cpu_with_backward(run):
    """Runs ``run()`` with PyTorch's refusal of flex attention's backward on CPU lifted."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flex_module, "_validate_device", lambda query, key, value: None)
        return run()


def assert_close_to(results, expected, tolerance):
    assert results.keys() == expected.keys()
    for name, value in results.items():
        assert value.device.type == "neuron", name
        assert value.dtype == expected[name].dtype, name
        torch.testing.assert_close(
            value.cpu(), expected[name], **tolerance, msg=lambda m, name=name: f"{name}: {m}"
        )


@pytest.fixture
def deterministic():
    """Deterministic algorithms: the gradient of a captured buffer is summed by
    ``index_put(accumulate=True)``, whose CPU kernel otherwise adds in parallel, in an order
    that varies from run to run (as much on the CPU alone as between CPU and neuron)."""
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(previous)


@pytest.mark.graph_calls("none")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_eager_forward_and_backward_are_the_cpus_bit_for_bit(case, dtype, deterministic):
    tensors = make_tensors(case, dtype)
    results = attend(case, tensors, flex_attention, "neuron")
    expected = on_cpu_with_backward(lambda: attend(case, tensors, flex_attention, "cpu"))
    assert_close_to(results, expected, EXACT)


@pytest.mark.parametrize(
    "case,dtype",
    [(case, torch.float32) for case in CASES[1:]] + [(CASES[1], torch.bfloat16)],
    ids=str,
)
def test_compiled_forward_and_backward_match_the_cpu(case, dtype):
    tensors = make_tensors(case, dtype)
    compiled = torch.compile(flex_attention, backend="neuron", fullgraph=True)
    results = attend(case, tensors, compiled, "neuron")
    expected = on_cpu_with_backward(lambda: attend(case, tensors, flex_attention, "cpu"))
    assert_close_to(results, expected, COMPILED_TOLERANCE[dtype])


def test_compiled_inference_with_the_default_backend_matches_the_cpu():
    case, dtype = CASES[2], torch.bfloat16
    tensors = make_tensors(case, dtype)
    with torch.no_grad():
        results = attend(case, tensors, torch.compile(flex_attention), "neuron", backward=False)
        expected = attend(case, tensors, flex_attention, "cpu", backward=False)
    assert_close_to(results, expected, COMPILED_TOLERANCE[dtype])


@pytest.mark.parametrize(
    "compiled",
    [pytest.param(False, marks=pytest.mark.graph_calls("none")), True],
    ids=["eager", "compiled"],
)
def test_autocast_casts_as_cpu_autocast_does(compiled, deterministic):
    case = CASES[0]
    tensors = make_tensors(case, torch.float32)
    attention = torch.compile(flex_attention, backend="neuron") if compiled else flex_attention
    with torch.autocast("neuron", dtype=torch.bfloat16):
        results = attend(case, tensors, attention, "neuron")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = on_cpu_with_backward(lambda: attend(case, tensors, flex_attention, "cpu"))
    assert results["out"].dtype == torch.bfloat16
    assert_close_to(results, expected, AUTOCAST_COMPILED_TOLERANCE if compiled else EXACT)


class TorchTitanAttention(nn.Module):
    """Attention as TorchTitan 0.3.0 calls FlexAttention (torchtitan/models/common/attention.py):
    projections in (batch, seq, heads, head_dim), transposed views into flex attention compiled
    once with the default backend and TorchTitan's Inductor options, GQA, an explicit scale."""

    compiled_flex_attention = torch.compile(
        flex_attention,
        options={
            "wrap_inductor_compiled_regions": True,
            "max_autotune": True,
            "coordinate_descent_tuning": True,
            "triton.cudagraphs": False,
        },
    )

    def __init__(self, dim=64, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wkv = nn.Linear(dim, 2 * kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x, block_mask):
        batch, seq, _ = x.shape
        q = self.wq(x).view(batch, seq, self.heads, self.head_dim)
        k, v = self.wkv(x).view(batch, seq, 2 * self.kv_heads, self.head_dim).chunk(2, dim=2)
        out, aux = TorchTitanAttention.compiled_flex_attention(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            score_mod=None,
            block_mask=block_mask,
            scale=1 / math.sqrt(self.head_dim),
            enable_gqa=True,
            return_aux=AuxRequest(lse=False),
            kernel_options={},
        )
        assert aux.lse is None
        return self.wo(out.transpose(1, 2).reshape(batch, seq, -1))


def packed_documents_mask(positions):
    """TorchTitan's causal document mask: a document starts where ``positions`` is 0."""
    documents = torch.cumsum((positions == 0).int(), dim=1) - 1
    return and_masks(causal, same_document(documents))


@pytest.mark.filterwarnings("ignore:torch.compile's mode and options configure Inductor")
@pytest.mark.parametrize("model_compiled", [False, True], ids=["eager_model", "compiled_model"])
def test_torchtitan_attention_trains_as_on_the_cpu(model_compiled):
    torch.manual_seed(0)
    model, x = TorchTitanAttention(), torch.randn(2, 256, 64)
    lengths = [[100, 156], [256, 0]]
    positions = torch.cat([torch.cat([torch.arange(n) for n in row])[None] for row in lengths])
    make_block_mask = torch.compile(create_block_mask)

    def run(device):
        layer = TorchTitanAttention().to(device)
        layer.load_state_dict(model.state_dict())
        block_mask = make_block_mask(
            packed_documents_mask(positions.to(device)),
            2,
            None,
            256,
            256,
            device=device,
            BLOCK_SIZE=128,
            separate_full_blocks=True,
        )
        forward = torch.compile(layer) if model_compiled and device == "neuron" else layer
        out = forward(x.to(device), block_mask)
        out.square().sum().backward()
        return {"out": out, **{f"grad_{n}": p.grad for n, p in layer.named_parameters()}}

    results = run("neuron")
    # The CPU reference runs eagerly: Inductor compiles no flex attention backward for the CPU.
    with torch.compiler.set_stance("force_eager"):
        expected = on_cpu_with_backward(lambda: run("cpu"))
    assert_close_to(results, expected, COMPILED_TOLERANCE[torch.float32])


@pytest.mark.graph_calls("none")
def test_device_check_is_replaced_when_flex_attention_is_first_imported():
    result = run_python(
        "import sys, torch\n"
        "name = 'torch.nn.attention.flex_attention'\n"
        "print(name in sys.modules)\n"
        "from torch.nn.attention.flex_attention import flex_attention\n"
        "q = torch.randn(1, 1, 8, 4, device='neuron', requires_grad=True)\n"
        "flex_attention(q, q, q).sum().backward()\n"
        "print(q.grad.device)\n"
        "try:\n"
        "    flex_attention(*[torch.randn(1, 1, 8, 4, requires_grad=True)] * 3)\n"
        "except NotImplementedError as e:\n"
        "    print(e)\n"
    )
    assert result.returncode == 0, result.stderr
    # Not imported by `import torch`; once imported, neuron passes and the CPU keeps
    # PyTorch's own check.
    assert result.stdout.splitlines() == [
        "False",
        "neuron:0",
        "FlexAttention does not support backward on CPU. Please set the input requires_grad "
        "to False or use another device.",
    ]
