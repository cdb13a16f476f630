"""Per-core random number generators."""

import torch
from torch.types import Device

from torch_neuronx.neuron._device import _index, device_count

_UINT64 = 1 << 64


def _seed_bits(seed: int) -> int:
    """The uint64 seed torch would use for `seed`, as the int64 with the same bits."""
    # A CPU generator applies torch's own rule (any int from -2**63 to 2**64 - 1, negative
    # ones wrapped) and raises its own error for the rest.
    value = torch.Generator().manual_seed(int(seed)).initial_seed()
    return value - _UINT64 if value >= _UINT64 >> 1 else value


def _default_generators() -> tuple[torch.Generator, ...]:
    """The default generator of each NeuronCore, the ones ops draw from when given none."""
    return tuple(torch._C._accelerator_getDefaultGenerator(i) for i in range(device_count()))


def manual_seed(seed: int) -> None:
    """Seeds the current NeuronCore's generator."""
    torch.ops.neuron.manual_seed(_index(), _seed_bits(seed))


def manual_seed_all(seed: int) -> None:
    """Seeds every NeuronCore's generator."""
    bits = _seed_bits(seed)
    for i in range(device_count()):
        torch.ops.neuron.manual_seed(i, bits)


def seed() -> int:
    """Seeds the current NeuronCore's generator from a random number."""
    return torch.ops.neuron.seed(_index()) % _UINT64


def seed_all() -> None:
    """Seeds every NeuronCore's generator with one random number."""
    s = seed()
    manual_seed_all(s)


def initial_seed() -> int:
    """The seed of the current NeuronCore's generator."""
    return torch.ops.neuron.initial_seed(_index()) % _UINT64


def get_rng_state(device: Device = "neuron") -> torch.Tensor:
    """The generator state of a NeuronCore as a CPU ByteTensor."""
    return torch.ops.neuron.get_rng_state(_index(device))


def set_rng_state(new_state: torch.Tensor, device: Device = "neuron") -> None:
    """Restores a generator state produced by get_rng_state."""
    torch.ops.neuron.set_rng_state(_index(device), new_state.detach().to("cpu", torch.uint8))


def get_rng_state_all() -> list[torch.Tensor]:
    """The generator states of every NeuronCore."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    """Restores the states produced by get_rng_state_all."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)
