"""The Trainium platforms: one table, and one name rule, for NKI and for the device runtime
(torch_neuronx reads it from here: nki stands below torch_neuronx and imports nothing of it)."""

import dataclasses
import os

GiB = 1 << 30

# The AWS documents each number below comes from (the references of nki_spec.md §4).
SDK = "https://github.com/aws-neuron/aws-neuron-sdk/blob/master/"
SOURCES = {
    "trn1-arch": SDK + "nki/guides/architecture/trainium_inferentia2_arch.rst",
    "trn2-arch": SDK + "nki/guides/architecture/trainium2_arch.rst",
    "trn3-arch": SDK + "nki/guides/architecture/trainium3_arch.rst",
    "trn2-chip": SDK + "about-neuron/arch/neuron-hardware/trainium2.rst",
    "trn3-chip": SDK + "about-neuron/arch/neuron-hardware/trainium3.rst",
    "trn2-instance": SDK + "about-neuron/arch/neuron-hardware/trn2-arch.rst",
    "trn3-instance": SDK + "about-neuron/arch/neuron-hardware/trn3-arch.rst",
    "core-v3": SDK + "about-neuron/arch/neuron-hardware/neuron-core-v3.rst",
    "dma": SDK + "nki/deep-dives/nki-dma-bandwidth-guide.rst",
}


@dataclasses.dataclass(frozen=True)
class Platform:
    """One Trainium generation as AWS documents it; rates are per physical NeuronCore unless
    named. The runtime takes its capacities, the NKI cost model and `torchneuron estimate`
    their rates."""

    name: str
    core_version: int  # the NeuronCore generation; "gen<version>" is an alias of the name
    hbm_per_chip: int  # bytes
    physical_cores: int  # NeuronCores per chip
    # TorchNeuron runs PyTorch on trn2 and trn3; trn1 is a target for NKI kernels only.
    torch_device: bool
    tensor_tflops: dict  # dense, by dtype class ("fp8", "16bit", "tf32", "fp32")
    pe_ghz: float  # Tensor engine clock
    vector_ghz: float
    vector_elements: tuple  # per cycle: (2-byte dtypes, others)
    scalar_ghz: float
    scalar_elements: tuple  # per cycle: (2-byte dtypes, others)
    gpsimd_ghz: float
    hbm_tb_s: float  # per chip
    dma_gb_s: float  # per core: 16 DMA engines
    link_tb_s: float  # chip-to-chip NeuronLink, per chip
    instance: str
    instance_chips: int
    sources: dict  # which document (a key of SOURCES) gives each group of numbers

    def hbm_bytes_per_s(self, lnc):
        """HBM bandwidth of one logical core: the chip's, shared evenly by its cores."""
        return self.hbm_tb_s * 1e12 / self.physical_cores * lnc


PLATFORMS = {
    p.name: p
    for p in (
        Platform(
            "trn1",
            2,
            32 * GiB,
            2,
            torch_device=False,
            tensor_tflops={},  # NKI kernels only: the cost model counts Tensor engine cycles
            pe_ghz=2.8,
            vector_ghz=1.12,
            vector_elements=(256, 256),  # no faster rate for 2-byte types on NeuronCore-v2
            scalar_ghz=1.4,
            scalar_elements=(128, 128),
            gpsimd_ghz=1.4,
            hbm_tb_s=0.82,
            dma_gb_s=272.0,  # 16 engines x 17 B/ns
            link_tb_s=0.768,  # assumed: 384 GB/s per core, which no page here documents
            instance="trn1.32xlarge",
            instance_chips=16,
            sources=dict.fromkeys(("cores", "vector", "scalar", "hbm", "dma"), "trn1-arch"),
        ),
        Platform(
            "trn2",
            3,
            96 * GiB,
            8,
            torch_device=True,
            # 158 FP8, 79 BF16/FP16/TF32, 20 FP32 dense TFLOPS per core.
            tensor_tflops={"fp8": 158.0, "16bit": 79.0, "tf32": 79.0, "fp32": 20.0},
            pe_ghz=2.4,
            vector_ghz=0.96,
            vector_elements=(512, 256),
            scalar_ghz=1.2,
            scalar_elements=(128, 128),
            gpsimd_ghz=1.2,
            hbm_tb_s=2.9,  # the chip page (the NKI guide says 3 TB/s)
            dma_gb_s=368.0,  # 16 engines x 23 B/ns
            link_tb_s=1.28,  # NeuronLink-v3
            instance="trn2.48xlarge",
            instance_chips=16,  # a 4x4 torus
            sources={
                "cores": "trn2-chip",
                "tensor": "trn2-arch",
                "vector": "trn2-arch",
                "scalar": "core-v3",
                "hbm": "trn2-chip",
                "dma": "dma",
                "link": "trn2-chip",
                "instance": "trn2-instance",
            },
        ),
        Platform(
            "trn3",
            4,
            144 * GiB,
            8,
            torch_device=True,
            # 315 MXFP8/MXFP4, 79 BF16, 20 FP32 dense TFLOPS per core. TF32 is not listed per
            # core (the chip page gives it the BF16 rate), nor is plain FP8 (taken at MXFP8's).
            tensor_tflops={"fp8": 315.0, "16bit": 79.0, "tf32": 79.0, "fp32": 20.0},
            pe_ghz=2.4,
            vector_ghz=1.2,
            vector_elements=(512, 256),
            scalar_ghz=1.2,
            scalar_elements=(256, 128),
            gpsimd_ghz=1.2,
            hbm_tb_s=4.9,  # the chip page (the NKI guide says 4.7)
            dma_gb_s=528.0,  # 16 engines x 33 B/ns
            link_tb_s=2.56,  # NeuronLink-v4
            # A Trn3 Gen1 UltraServer is 4 servers of 16 chips; one server is the instance
            # here (its instance type name is not documented).
            instance="Trn3 Gen1 server",
            instance_chips=16,
            sources={
                "cores": "trn3-chip",
                "tensor": "trn3-arch",
                "vector": "trn3-arch",
                "scalar": "trn3-arch",
                "hbm": "trn3-chip",
                "dma": "dma",
                "link": "trn3-chip",
                "instance": "trn3-instance",
            },
        ),
    )
}


# The variable that names the platform, and the platform it names when unset.
VARIABLE = "NEURON_PLATFORM_TARGET_OVERRIDE"
DEFAULT = "trn2"


def resolve(name=None):
    """The platform called `name` (or its generation), in any case; None reads
    NEURON_PLATFORM_TARGET_OVERRIDE (default trn2)."""
    key = (name or os.environ.get(VARIABLE) or DEFAULT).strip().lower()
    for platform in PLATFORMS.values():
        if key in (platform.name, f"gen{platform.core_version}"):
            return platform
    source = f"{VARIABLE}={key!r}" if name is None else repr(name)
    raise ValueError(
        f"{source} is not a Trainium platform; use one of {', '.join(PLATFORMS)} "
        "(or gen2, gen3, gen4)"
    )
