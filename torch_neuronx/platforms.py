"""The Trainium platforms: one table, and one name rule, for the device runtime and for NKI."""

import dataclasses

import torch

from torch_neuronx import config

GiB = 1 << 30


@dataclasses.dataclass(frozen=True)
class Platform:
    name: str
    core_version: int  # the NeuronCore generation; "gen<version>" is an alias of the name
    hbm_per_chip: int  # bytes
    physical_cores: int  # NeuronCores per chip
    # TorchNeuron runs PyTorch on trn2 and trn3; trn1 is a target for NKI kernels only.
    torch_device: bool


PLATFORMS = {
    p.name: p
    for p in (
        Platform("trn1", 2, 32 * GiB, 2, torch_device=False),
        Platform("trn2", 3, 96 * GiB, 8, torch_device=True),
        Platform("trn3", 4, 144 * GiB, 8, torch_device=True),
    )
}


def resolve(name=None):
    """The platform called `name` (or its generation), in any case; None reads
    NEURON_PLATFORM_TARGET_OVERRIDE (default trn2)."""
    variable = "NEURON_PLATFORM_TARGET_OVERRIDE"
    key = (name or config.text(variable)).strip().lower()
    for platform in PLATFORMS.values():
        if key in (platform.name, f"gen{platform.core_version}"):
            return platform
    source = f"{variable}={key!r}" if name is None else repr(name)
    raise ValueError(
        f"{source} is not a Trainium platform; use one of {', '.join(PLATFORMS)} "
        "(or gen2, gen3, gen4)"
    )


def configure_device():
    """Tells the runtime which platform it emulates; a bad choice is raised at first use, so
    that `import torch` keeps working for CPU code."""
    try:
        platform = resolve()
        if not platform.torch_device:
            devices = [p.name for p in PLATFORMS.values() if p.torch_device]
            raise ValueError(
                f"NEURON_PLATFORM_TARGET_OVERRIDE={platform.name!r} is a target for "
                f"NKI kernels only; the neuron device emulates {' or '.join(devices)}"
            )
    except ValueError as e:
        torch.ops.neuron.set_platform("", 0, 0, str(e))
        return
    torch.ops.neuron.set_platform(platform.name, platform.hbm_per_chip, platform.physical_cores, "")
