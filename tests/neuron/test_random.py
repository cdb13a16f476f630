import pytest
import torch


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
