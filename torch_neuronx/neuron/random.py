"""Per-core random number generators."""

import torch

from torch_neuronx.neuron.device import _index, device_count


def manual_seed(seed):
    """Seeds the current NeuronCore's generator."""
    torch.ops.neuron.manual_seed(_index(), int(seed))


def manual_seed_all(seed):
    """Seeds every NeuronCore's generator."""
    for i in range(device_count()):
        torch.ops.neuron.manual_seed(i, int(seed))


def seed():
    """Seeds the current NeuronCore's generator from a random number."""
    return torch.ops.neuron.seed(_index())


def seed_all():
    """Seeds every NeuronCore's generator with one random number."""
    s = seed()
    manual_seed_all(s)


def initial_seed():
    """The seed of the current NeuronCore's generator."""
    return torch.ops.neuron.initial_seed(_index())


def get_rng_state(device="neuron"):
    """The generator state of a NeuronCore as a CPU ByteTensor."""
    return torch.ops.neuron.get_rng_state(_index(device))


def set_rng_state(new_state, device="neuron"):
    """Restores a generator state produced by get_rng_state."""
    torch.ops.neuron.set_rng_state(_index(device), new_state.detach().to("cpu", torch.uint8))


def get_rng_state_all():
    """The generator states of every NeuronCore."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states):
    """Restores the states produced by get_rng_state_all."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)
