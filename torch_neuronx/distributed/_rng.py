"""DTensor random ops on neuron meshes.

DTensor's default tracker moves a Philox (seed, offset) state; a NeuronCore's generator is
the host's mt19937, which has no offsets. This tracker keeps the guarantees DTensor relies on:
replicas of a shard draw the same numbers, different shards draw different ones, and every
rank leaves a random op with the same generator state.
"""

import contextlib

import torch
from torch.distributed.tensor import _random


class NeuronRNGTracker(_random.OffsetBasedRNGTracker):
    """Seeds each random op's shard from (a draw of the shared generator, the shard's offset)."""

    def __init__(self):
        _random._RNGStateTracker.__init__(self, torch.device("neuron"))

    @contextlib.contextmanager
    def _distribute_region(self, spec, generator=None):
        if not self.distribute_region_enabled or spec.mesh.device_type != "neuron":
            yield
            return
        start, _ = self._compute_rng_offsets(spec)
        device = torch.device("neuron", torch.neuron.current_device())
        # The draw advances the shared state identically on every rank; int32, as Trainium has
        # no int64 (and mt19937 seeds are 32-bit anyway).
        draw = torch.randint(2**31 - 1, (1,), dtype=torch.int32, device=device, generator=generator)
        base = int(draw.item())
        with torch.random.fork_rng(devices=[device], device_type="neuron"):
            torch.neuron.manual_seed(base + start)
            yield


def install():
    """Makes DTensor use NeuronRNGTracker unless a tracker is already in place."""
    if _random._rng_tracker is None:
        _random._rng_tracker = NeuronRNGTracker()
