"""Per-target hardware parameters of NKI kernels: capacities for validation, rates for the
cost model. Platform names and aliases follow torch_neuronx/platforms.py."""

from dataclasses import dataclass

from torch_neuronx.platforms import PLATFORMS, resolve

KiB = 1024


@dataclass(frozen=True)
class Target:
    """One NeuronCore generation: capacities for validation, rates for the cost model."""

    name: str  # a platform of torch_neuronx/platforms.py
    sbuf_partition_bytes: int  # physical SBUF bytes per partition
    psum_partition_bytes: int = 16 * KiB
    psum_banks: int = 8
    pe_ghz: float = 2.4
    vector_ghz: float = 0.96
    scalar_ghz: float = 1.2
    gpsimd_ghz: float = 1.2
    dma_queue_bytes_per_ns: float = 23.0  # per DMA engine; 16 engines per NC
    dma_queues: int = 16
    scalar_16bit_double_rate: bool = False

    @property
    def generation(self):
        """The NeuronCore version: 2, 3 or 4."""
        return PLATFORMS[self.name].core_version

    @property
    def psum_bank_bytes(self):
        return self.psum_partition_bytes // self.psum_banks

    def moving_fmax(self, dst_itemsize):
        """Largest moving free size of nc_matmul: one PSUM bank before NC-v4, all banks after."""
        if self.generation < 4:
            return 512
        return self.psum_partition_bytes // dst_itemsize

    @property
    def dma_bytes_per_ns(self):
        return self.dma_queue_bytes_per_ns * self.dma_queues


TARGETS = {
    "trn1": Target("trn1", 192 * KiB),
    "trn2": Target("trn2", 224 * KiB),
    "trn3": Target(
        "trn3",
        256 * KiB,
        vector_ghz=1.2,
        dma_queue_bytes_per_ns=33.0,
        scalar_16bit_double_rate=True,
    ),
}


def get(name=None):
    """A target by platform name or alias (torch_neuronx/platforms.py's rule); None reads
    NEURON_PLATFORM_TARGET_OVERRIDE (default trn2)."""
    if isinstance(name, Target):
        return name
    return TARGETS[resolve(name).name]
