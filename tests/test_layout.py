"""Neuron tensors have CPU's strides: moves, clones and *_like keep a permuted layout."""

import pytest
import torch


def _permuted(shape=(3, 4, 5)):
    """A dense tensor whose memory order is not its dimension order."""
    gen = torch.Generator().manual_seed(0)
    return torch.randn(shape, generator=gen).transpose(0, -1).contiguous().transpose(0, -1)


@pytest.mark.parametrize(
    "make",
    [
        lambda t: t.clone(),
        lambda t: t.clone(memory_format=torch.preserve_format),
        lambda t: torch.empty_like(t),
        lambda t: torch.zeros_like(t),
        lambda t: torch.ones_like(t),
        lambda t: torch.full_like(t, 2.0),
        lambda t: torch.rand_like(t),
        lambda t: torch.randn_like(t),
        lambda t: torch.empty_strided(t.shape, t.stride(), device=t.device),
        lambda t: t + 1,
        lambda t: t.to(torch.float16),
    ],
    ids=[
        "clone",
        "clone_preserve",
        "empty_like",
        "zeros_like",
        "ones_like",
        "full_like",
        "rand_like",
        "randn_like",
        "empty_strided",
        "add",
        "cast",
    ],
)
def test_permuted_layouts_keep_cpu_strides(make):
    t = _permuted()
    assert make(t.to("neuron")).stride() == make(t).stride() != t.contiguous().stride()


def test_reduction_over_a_cloned_permuted_tensor_is_bit_identical():
    # The clone's strides decide the order in which sum() adds, and so its bits.
    t = _permuted((7, 33, 65))
    n = t.to("neuron")
    assert n.stride() == t.stride()
    for dim in range(3):
        assert torch.equal(n.clone().add_(1.5).sum(dim).cpu(), t.clone().add_(1.5).sum(dim))
