"""Profiling the neuron device: TorchNeuron's profiling names on the emulator.

``torch.profiler`` sees the emulated NeuronCores through the Kineto plugin of the C++ runtime
(csrc/runtime/KinetoProfiler.cpp): with ``ProfilerActivity.PrivateUse1`` every op executed on a
core (eager ops, CPU-fallback ops and their copies, compiled graphs, collectives, NKI kernels,
host<->device copies) is a device event with its duration, core and stream, linked to the CPU
op that launched it. "Device time" is the host time the runtime spends executing the kernel on
device memory. See docs/profiling.md.
"""

import enum
import os

import torch
from torch.profiler import ProfilerActivity, profile

# The runtime's trace channel is read where NKI launches kernels; these names are its public
# face here (docs/profiling.md).
from nki._src.device_trace import collecting, device_activity


class ProfileMode(enum.Enum):
    """What a Neuron profile records (NeuronConfig.modes)."""

    # NeuronCore kernels: eager ops, compiled graphs, NKI kernels, collectives.
    DEVICE = "device"
    # Runtime activity: transfers between host and device and within the device.
    RUNTIME = "runtime"
    # Host CPU activity: PyTorch's own CPU rows, which every profile has.
    CPU_UTIL = "cpu_util"
    # Host memory: PyTorch's CPU memory events (profile_memory=True).
    HOST_MEMORY = "host_memory"


_DEFAULT_MODES = (ProfileMode.DEVICE, ProfileMode.RUNTIME)


def _modes(modes):
    try:
        chosen = frozenset(ProfileMode(m.value if isinstance(m, ProfileMode) else m) for m in modes)
    except ValueError as e:
        names = ", ".join(m.name for m in ProfileMode)
        raise ValueError(f"{e}; NeuronConfig modes are ProfileMode.{{{names}}}") from None
    if not chosen:
        raise ValueError("NeuronConfig needs at least one ProfileMode")
    return chosen


class NeuronConfig(torch._C._profiler._ExperimentalConfig):
    """``experimental_config`` of torch.profiler.profile choosing the Neuron activity recorded.

    ``torch.profiler.profile(activities=[CPU, PrivateUse1], experimental_config=
    NeuronConfig(modes=[ProfileMode.DEVICE]))`` keeps only kernel rows; RUNTIME keeps the
    transfer rows; CPU_UTIL and HOST_MEMORY are what PyTorch's CPU rows and profile_memory=True
    record already. Other keyword arguments go to torch's _ExperimentalConfig.
    """

    def __init__(self, modes=_DEFAULT_MODES, **experimental):
        self.modes = _modes(modes)
        device = sorted(m.value for m in self.modes & {ProfileMode.DEVICE, ProfileMode.RUNTIME})
        custom = experimental.pop("custom_profiler_config", "")
        # The plugin reads its modes from Kineto's custom config ("none" keeps no neuron rows).
        marker = f"neuron_modes:{','.join(device) or 'none'}"
        super().__init__(custom_profiler_config=f"{custom} {marker}".strip(), **experimental)

    def __repr__(self):
        return f"NeuronConfig(modes={sorted(m.name for m in self.modes)})"


class NeuronProfiler:
    """A profile of the NeuronCores, written as a Perfetto/chrome://tracing trace.

    On Trainium this is the runtime's low-level profiler; on the emulator it is a torch.profiler
    session with CPU and neuron activities (the modes of NeuronConfig) whose trace goes to
    ``output_dir`` (``neuron_profile_<pid>.json``) when it stops. Use it as a context manager,
    or call start() and stop(); ``profile`` is the underlying torch.profiler.profile.
    """

    def __init__(self, output_dir=None, modes=_DEFAULT_MODES, **profile_kwargs):
        self.output_dir = output_dir
        self.trace_path = None
        self.profile = profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
            experimental_config=NeuronConfig(modes),
            **profile_kwargs,
        )

    def start(self):
        """Starts recording."""
        self.profile.start()
        return self

    def stop(self):
        """Stops recording; returns the trace's path when ``output_dir`` was given."""
        self.profile.stop()
        if self.output_dir is not None:
            os.makedirs(self.output_dir, exist_ok=True)
            self.trace_path = os.path.join(self.output_dir, f"neuron_profile_{os.getpid()}.json")
            self.profile.export_chrome_trace(self.trace_path)
        return self.trace_path

    def key_averages(self, *args, **kwargs):
        """torch.profiler's per-op table, with the neuron time columns."""
        return self.profile.key_averages(*args, **kwargs)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


__all__ = ["NeuronConfig", "NeuronProfiler", "ProfileMode", "collecting", "device_activity"]
