"""The platform the device emulates. The table of Trainium platforms is NKI's
(nki/_src/platforms.py), which the runtime, the estimator and NKI's cost model all read."""

import torch

from nki._src.platforms import PLATFORMS, SDK, SOURCES, GiB, Platform, resolve

__all__ = ["GiB", "PLATFORMS", "SDK", "SOURCES", "Platform", "configure_device", "resolve"]


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
