import pytest
import torch
from pyrun import run_python

import torch_neuronx


def test_same_seed_same_sequence_and_cpu_parity():
    torch.manual_seed(7)
    a = torch.randn(100, device="neuron")
    torch.manual_seed(7)
    b = torch.randn(100, device="neuron")
    torch.manual_seed(7)
    c = torch.randn(100)
    assert torch.equal(a, b)
    assert torch.equal(a.cpu(), c)


def test_manual_seed_seeds_every_core():
    torch.manual_seed(3)
    a = torch.rand(10, device="neuron:0")
    b = torch.rand(10, device="neuron:2")
    assert torch.equal(a.cpu(), b.cpu())
    assert torch.neuron.initial_seed() == 3


def test_rng_state_round_trip():
    torch.neuron.manual_seed_all(11)
    state = torch.neuron.get_rng_state()
    assert state.device.type == "cpu" and state.dtype == torch.uint8
    a = torch.rand(5, device="neuron")
    torch.neuron.set_rng_state(state)
    assert torch.equal(torch.rand(5, device="neuron"), a)
    states = torch.neuron.get_rng_state_all()
    assert len(states) == 4
    b = torch.rand(5, device="neuron:1")
    torch.neuron.set_rng_state_all(states)
    assert torch.equal(torch.rand(5, device="neuron:1"), b)


def test_neuron_generators_are_isolated_from_cpu():
    torch.manual_seed(0)
    cpu_state = torch.get_rng_state()
    torch.rand(100, device="neuron")
    torch.nn.functional.dropout(torch.ones(100, device="neuron"), 0.5)
    q = torch.ones(1, 1, 4, 8, device="neuron")
    torch.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert torch.equal(torch.get_rng_state(), cpu_state)


def test_explicit_generator():
    g = torch.Generator(device="neuron").manual_seed(5)
    a = torch.randn(8, device="neuron", generator=g)
    b = torch.randn(8, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a.cpu(), b)
    assert g.device.type == "neuron"


def test_fork_rng():
    torch.manual_seed(1)
    with torch.random.fork_rng(device_type="neuron"):
        a = torch.rand(3, device="neuron")
    b = torch.rand(3, device="neuron")
    assert torch.equal(a, b)


def test_seed_functions():
    s = torch.neuron.seed()
    assert torch.neuron.initial_seed() == s
    torch.neuron.seed_all()
    torch.neuron.manual_seed(42)
    assert torch.neuron.initial_seed() == 42


@pytest.mark.parametrize("seed", [2**63, 2**64 - 1, -1, -(2**63), 7])
def test_every_seed_torch_takes(seed):
    # torch takes any int from -2**63 to 2**64 - 1 (negative ones wrap), and torch.seed() draws
    # from the whole uint64 range; seeding torch seeds every neuron core.
    torch.manual_seed(seed)
    expected = torch.initial_seed()
    assert torch.neuron.initial_seed() == expected
    a = torch.rand(4, device="neuron")
    torch.neuron.manual_seed(seed)
    assert torch.equal(torch.rand(4, device="neuron"), a)
    torch.neuron.manual_seed_all(expected)
    assert torch.neuron.initial_seed() == expected


def test_random_seeds_and_torch_errors_for_the_rest():
    for _ in range(64):  # half of the draws are >= 2**63
        assert torch.seed() == torch.neuron.initial_seed()
    assert 0 <= torch.neuron.seed() < 2**64
    for seed in (2**64, -(2**63) - 1):
        with pytest.raises(ValueError, match="Overflow"):
            torch.manual_seed(seed)


@pytest.mark.skipif(
    not hasattr(torch._C, "_accelerator_getDefaultGenerator"),
    reason="torch 2.13 has no binding for a PrivateUse1 default generator",
)
def test_default_generators_are_the_cores_generators():
    gens = torch.neuron.default_generators
    assert "default_generators" in torch.neuron.__all__
    assert [g.device for g in gens] == [torch.device("neuron", i) for i in range(4)]
    gens[2].manual_seed(123)
    with torch.neuron.device(2):
        assert torch.neuron.initial_seed() == 123
    assert torch.equal(torch.rand(5, device="neuron:2").cpu(), torch.rand(5, generator=_cpu(123)))
    torch.neuron.manual_seed_all(9)
    assert [g.initial_seed() for g in gens] == [9] * 4
    assert torch.neuron.default_generators is gens


@pytest.mark.skipif(
    hasattr(torch._C, "_accelerator_getDefaultGenerator"), reason="torch >= 2.14 has it"
)
def test_default_generators_on_torch_2_13_say_why():
    assert not hasattr(torch.neuron, "default_generators")
    with pytest.raises(AttributeError, match="torch 2.13 gives Python no way"):
        torch.neuron.default_generators


def _cpu(seed):
    return torch.Generator().manual_seed(seed)


# The random source (torch_neuronx/_rng.py): "cpu" makes the cores' default generators the CPU's.


def _program(device):
    """A training-like sequence of draws: CPU data, then device dropout and noise."""
    torch.manual_seed(5)
    batch = torch.randint(0, 100, (4,))
    x = torch.ones(64, device=device)
    mask = torch.nn.functional.dropout(x, 0.5)
    noise = torch.randn(8, device=device)
    after = torch.rand(3)
    return [t.cpu() for t in (batch, mask, noise, after)]


def test_cpu_source_draws_the_cpu_programs_numbers_in_order():
    cpu = _program("cpu")
    with torch_neuronx.rng_source("cpu"):
        shared = _program("neuron")
    own = _program("neuron")
    assert all(torch.equal(a, b) for a, b in zip(cpu, shared))
    # The device's own stream draws other masks, and leaves the CPU stream alone.
    assert not torch.equal(own[1], cpu[1])
    torch.manual_seed(5)
    torch.randint(0, 100, (4,))
    assert torch.equal(own[0], cpu[0]) and torch.equal(own[3], torch.rand(3))
    assert torch_neuronx.get_rng_source() == "device"


def test_cpu_source_state_calls_act_on_the_one_stream():
    with torch_neuronx.rng_source("cpu"):
        torch.manual_seed(9)
        expected = torch.rand(4)
        torch.neuron.manual_seed(9)
        assert torch.equal(torch.rand(4, device="neuron").cpu(), expected)
        state = torch.neuron.get_rng_state()
        assert torch.equal(state, torch.get_rng_state())
        a = torch.rand(4, device="neuron")
        torch.set_rng_state(state)
        assert torch.equal(torch.rand(4, device="neuron"), a)


def test_cpu_source_keeps_fork_rng_and_checkpoint_replay_coherent():
    def block(x):
        return torch.nn.functional.dropout(x, 0.5) * 3

    with torch_neuronx.rng_source("cpu"):
        x = torch.randn(256, device="neuron", requires_grad=True)
        with torch.random.fork_rng(devices=[0], device_type="neuron"):
            inside = torch.rand(4, device="neuron")
        assert torch.equal(torch.rand(4, device="neuron"), inside)
        torch.manual_seed(1)
        out = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
        out.sum().backward()
    # The recomputed mask equals the forward's: the gradient is 3 / (1 - 0.5) exactly where out
    # kept x.
    kept = out.detach() != 0
    assert torch.equal(x.grad[kept].cpu(), torch.full((int(kept.sum()),), 6.0))
    assert torch.equal(x.grad[~kept].cpu(), torch.zeros(int((~kept).sum())))


def test_user_generators_keep_their_own_stream_under_the_cpu_source():
    with torch_neuronx.rng_source("cpu"):
        g = torch.Generator(device="neuron").manual_seed(4)
        torch.manual_seed(0)
        a = torch.rand(5, device="neuron", generator=g)
        b = torch.rand(5, generator=torch.Generator().manual_seed(4))
        assert torch.equal(a.cpu(), b)
        # g's draws took nothing from the CPU stream: the default draws start where seed 0 does.
        drawn = torch.rand(2, device="neuron").cpu()
        torch.manual_seed(0)
        assert torch.equal(drawn, torch.rand(2))


def test_unknown_random_source_is_refused_with_the_choices():
    with pytest.raises(RuntimeError, match="'gpu' is not a random source; use 'device'"):
        torch_neuronx.set_rng_source("gpu")
    result = run_python(
        "import torch; torch.ones(1, device='neuron').bernoulli_()",
        env={"TORCH_NEURONX_RNG": "host"},
    )
    assert (
        result.returncode != 0
        and "TORCH_NEURONX_RNG='host' is not a random source" in result.stderr
    )


def test_int64_random_draws_fit_in_int32_and_keep_the_stream_in_step():
    """transformers' continuous batching draws a seed with torch.randint(0, 2**32 - 1, int64)."""
    torch.manual_seed(3)
    cpu = torch.randint(0, 2**32 - 1, (64,), dtype=torch.int64)
    cpu_next = torch.rand(3)
    with torch_neuronx.rng_source("cpu"):
        torch.manual_seed(3)
        drawn = torch.randint(0, 2**32 - 1, (64,), dtype=torch.int64, device="neuron").cpu()
        after = torch.rand(3)
    assert drawn.min() >= 0 and drawn.max() < 2**31
    # The CPU's draws, folded into [0, 2**31): the same numbers left the generator.
    assert torch.equal(drawn, cpu % 2**31) and torch.equal(after, cpu_next)
    low = torch.empty(1000, dtype=torch.int64, device="neuron").random_(-(2**40), 2**40).cpu()
    assert low.min() >= -(2**31) and low.max() < 2**31
    assert torch.empty(8, dtype=torch.int64, device="neuron").random_().cpu().max() < 2**31
