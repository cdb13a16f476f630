"""Per-target hardware parameters of NKI kernels: capacities for validation, rates for the
cost model. Platform names and aliases follow platforms.py."""

from dataclasses import dataclass

from .platforms import PLATFORMS, resolve

KiB = 1024


@dataclass(frozen=True)
class Target:
    """One NeuronCore generation: capacities for validation, rates for the cost model. The
    documented clocks and bandwidths are the platform's (platforms.py)."""

    name: str  # a platform of platforms.py
    sbuf_partition_bytes: int  # physical SBUF bytes per partition
    psum_partition_bytes: int = 16 * KiB
    psum_banks: int = 8
    # DMA cost of one descriptor (contiguous run), in bytes of bandwidth: fitted to the
    # measured matmul tutorial versions (nki/README.md, calibration).
    descriptor_bytes: int = 512

    @property
    def platform(self):
        return PLATFORMS[self.name]

    @property
    def generation(self):
        """The NeuronCore version: 2, 3 or 4."""
        return self.platform.core_version

    @property
    def pe_ghz(self):
        return self.platform.pe_ghz

    @property
    def vector_ghz(self):
        return self.platform.vector_ghz

    @property
    def scalar_ghz(self):
        return self.platform.scalar_ghz

    @property
    def gpsimd_ghz(self):
        return self.platform.gpsimd_ghz

    @property
    def narrow_speedup(self):
        """The Vector engine's rate on 2-byte types relative to the others."""
        wide, other = self.platform.vector_elements
        return wide / other

    @property
    def scalar_16bit_double_rate(self):
        wide, other = self.platform.scalar_elements
        return wide > other

    @property
    def dma_bytes_per_ns(self):
        """All 16 DMA engines of a core (GB/s is bytes per ns)."""
        return self.platform.dma_gb_s

    @property
    def link_bytes_per_ns(self):
        """Chip-to-chip bandwidth per NeuronCore (collectives)."""
        return self.platform.link_tb_s * 1e3 / self.platform.physical_cores

    @property
    def psum_bank_bytes(self):
        return self.psum_partition_bytes // self.psum_banks

    def moving_fmax(self, dst_itemsize):
        """Largest moving free size of nc_matmul: one PSUM bank before NC-v4, all banks after."""
        if self.generation < 4:
            return 512
        return self.psum_partition_bytes // dst_itemsize


TARGETS = {
    "trn1": Target("trn1", 192 * KiB, descriptor_bytes=1200),
    "trn2": Target("trn2", 224 * KiB),
    "trn3": Target("trn3", 256 * KiB),
}


def get(name=None):
    """A target by platform name or alias (platforms.py's rule); None reads
    NEURON_PLATFORM_TARGET_OVERRIDE (default trn2)."""
    if isinstance(name, Target):
        return name
    return TARGETS[resolve(name).name]
