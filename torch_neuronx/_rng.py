"""Where random ops on neuron tensors draw their numbers from: TORCH_NEURONX_RNG at start, these
functions after (csrc/runtime/Generator.h).

"device" (the default): each NeuronCore's default generator has its own stream, as on Trainium,
so the same seed gives other dropout masks than on the CPU. "cpu": the cores' default generators
are the CPU's default generator, so a program draws the numbers it would draw on a CPU-only
machine, in program order; seeding and RNG-state calls on the device act on that one stream.
Generators the program makes itself (``torch.Generator(device="neuron")``) keep their own state
either way. ``torchneuron parity`` runs the neuron side with "cpu"."""

import contextlib
from collections.abc import Iterator

import torch

SOURCES = ("device", "cpu")


def get_rng_source() -> str:
    """'device' or 'cpu': where random ops on neuron tensors draw from now."""
    return torch.ops.neuron.rng_source()


def set_rng_source(source: str) -> None:
    """Makes random ops on neuron tensors draw from ``source`` ('device' or 'cpu') from now on."""
    torch.ops.neuron.set_rng_source(source)


@contextlib.contextmanager
def rng_source(source: str) -> Iterator[None]:
    """Draws from ``source`` inside the block, then from the previous source again."""
    previous = get_rng_source()
    set_rng_source(source)
    try:
        yield
    finally:
        set_rng_source(previous)
