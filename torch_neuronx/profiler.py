"""Profiling the neuron device: TorchNeuron's profiling names on the emulator.

``torch.profiler`` sees the emulated NeuronCores through the Kineto plugin of the C++ runtime
(csrc/runtime/KinetoProfiler.cpp): with ``ProfilerActivity.PrivateUse1`` every op executed on a
core (eager ops, CPU-fallback ops and their copies, compiled graphs, collectives, NKI kernels,
host<->device copies) is a device event with its duration, core and stream, linked to the CPU
op that launched it. "Device time" is the host time the runtime spends executing the kernel on
device memory. See docs/profiling.md.
"""

import collections
import enum
import json
import os
import socket
import time
from collections.abc import Iterable
from typing import Any

import torch
from torch.autograd.profiler_util import EventList
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


def _core_list(spec):
    """The cores that ``capture_enabled_for_nc`` names ("0,1,2-5"), as sorted indices."""
    if isinstance(spec, int):
        spec = str(spec)
    cores = set()
    for item in str(spec).replace(" ", "").split(","):
        first, _, last = item.partition("-")
        if not first.isdigit() or (last and not last.isdigit()) or int(last or first) < int(first):
            raise ValueError(
                f"capture_enabled_for_nc={spec!r}: {item!r} is not a core index or range; use "
                'comma-separated indices and ranges, e.g. "0,1,2-5"'
            )
        cores.update(range(int(first), int(last or first) + 1))
    return tuple(sorted(cores))


class NeuronConfig(torch._C._profiler._ExperimentalConfig):
    """``experimental_config`` of torch.profiler.profile choosing the Neuron activity recorded.

    ``torch.profiler.profile(activities=[CPU, PrivateUse1], experimental_config=
    NeuronConfig(modes=[ProfileMode.DEVICE]))`` keeps only kernel rows; RUNTIME keeps the
    transfer rows; CPU_UTIL and HOST_MEMORY are what PyTorch's CPU rows and profile_memory=True
    record already. ``capture_enabled_for_nc`` ("0,1,2-5") keeps the rows of those cores only,
    ``max_events_per_nc`` the first that many of each core. ``profile_output_dir`` is where
    ``NeuronProfiler(config).export_trace`` writes. ``neff_cache_dir`` and
    ``precache_node_info`` concern NEFF files, which the emulator has none of: they are
    recorded in the session file and change nothing. Other keyword arguments go to torch's
    _ExperimentalConfig. See docs/profiling.md.
    """

    def __init__(
        self,
        modes: Iterable[ProfileMode | str] = _DEFAULT_MODES,
        profile_output_dir: str | None = "./profile_output",
        max_events_per_nc: int | None = None,
        capture_enabled_for_nc: str | None = None,
        neff_cache_dir: str | None = None,
        precache_node_info: bool = True,
        **experimental: Any,
    ) -> None:
        self.modes = _modes(modes)
        self.profile_output_dir = profile_output_dir
        if max_events_per_nc is not None and (
            isinstance(max_events_per_nc, bool)
            or not isinstance(max_events_per_nc, int)
            or max_events_per_nc < 1
        ):
            raise ValueError(
                f"max_events_per_nc={max_events_per_nc!r}: use a positive integer, or None for "
                "no limit"
            )
        self.max_events_per_nc = max_events_per_nc
        self.capture_enabled_for_nc = capture_enabled_for_nc
        self.captured_cores = (
            None if capture_enabled_for_nc is None else _core_list(capture_enabled_for_nc)
        )
        self.neff_cache_dir = neff_cache_dir
        self.precache_node_info = bool(precache_node_info)
        device = sorted(m.value for m in self.modes & {ProfileMode.DEVICE, ProfileMode.RUNTIME})
        # The plugin (csrc/runtime/KinetoProfiler.cpp) reads these fields from Kineto's custom
        # config ("none" keeps no neuron rows).
        fields = [f"neuron_modes:{','.join(device) or 'none'}"]
        if self.captured_cores is not None:
            fields.append(f"neuron_cores:{','.join(map(str, self.captured_cores))}")
        if max_events_per_nc is not None:
            fields.append(f"neuron_max_events:{max_events_per_nc}")
        custom = experimental.pop("custom_profiler_config", "")
        super().__init__(custom_profiler_config=" ".join([custom, *fields]).strip(), **experimental)

    def settings(self) -> dict:
        """The documented parameters, as the session file records them."""
        return {
            "modes": sorted(m.name for m in self.modes),
            "profile_output_dir": self.profile_output_dir,
            "max_events_per_nc": self.max_events_per_nc,
            "capture_enabled_for_nc": self.capture_enabled_for_nc,
            "neff_cache_dir": self.neff_cache_dir,
            "precache_node_info": self.precache_node_info,
        }

    def __repr__(self):
        shown = ", ".join(f"{k}={v!r}" for k, v in self.settings().items())
        return f"NeuronConfig({shown})"


def _rank():
    """(rank, world size) of this process: the process group's, else torchrun's, else (0, 1)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


class NeuronProfiler:
    """Writes Neuron profiles; TorchNeuron's two uses of it both work.

    ``NeuronProfiler(config).export_trace`` is the ``on_trace_ready`` of a torch.profiler
    session run with ``experimental_config=config``: each call writes the trace of this rank
    under ``config.profile_output_dir``, as ``<host>_pid_<pid>/<timestamp>/trace.json`` (the
    Chrome/Perfetto trace, neuron rows included) beside ``neuron_session.json`` (rank, cores,
    settings, device events per core), the layout of docs/profiling.md.

    ``NeuronProfiler(output_dir=..., modes=...)`` is itself a session with CPU and neuron
    activities: a context manager (or start() and stop()) whose trace goes to ``output_dir``
    (``neuron_profile_<pid>.json``) when it stops; ``profile`` is the torch.profiler.profile.
    """

    def __init__(
        self,
        config: NeuronConfig | None = None,
        *,
        output_dir: str | None = None,
        modes: Iterable[ProfileMode | str] | None = None,
        **profile_kwargs: Any,
    ) -> None:
        if config is not None and not isinstance(config, NeuronConfig):
            raise TypeError(
                f"NeuronProfiler takes a NeuronConfig, not {type(config).__name__}; for a "
                "trace directory use NeuronProfiler(output_dir=...)"
            )
        if config is not None and (output_dir is not None or modes is not None):
            raise ValueError(
                "NeuronProfiler(config) takes its modes and directory from the config "
                "(profile_output_dir); pass either a config or output_dir/modes"
            )
        self.config = config or NeuronConfig(modes or _DEFAULT_MODES, profile_output_dir=None)
        self.output_dir = output_dir
        self.trace_path: str | None = None
        self.trace_paths: list[str] = []
        self.profile_kwargs = profile_kwargs
        self._profile: profile | None = None

    @property
    def profile(self):
        """The torch.profiler session of the context-manager use, made on first use."""
        if self._profile is None:
            self._profile = profile(
                activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                experimental_config=self.config,
                **self.profile_kwargs,
            )
        return self._profile

    def export_trace(self, prof: torch.profiler.profile) -> str:
        """``on_trace_ready``: writes ``prof``'s trace of this rank; returns the trace's path."""
        if not self.config.profile_output_dir:
            raise ValueError(
                "NeuronProfiler.export_trace needs a directory: set NeuronConfig's "
                "profile_output_dir"
            )
        rank, world = _rank()
        session = os.path.join(
            self.config.profile_output_dir,
            f"{socket.gethostname()}_pid_{os.getpid()}",
            f"{time.strftime('%Y%m%d_%H%M%S')}_{len(self.trace_paths)}",
        )
        os.makedirs(session, exist_ok=True)
        trace_path = os.path.join(session, "trace.json")
        prof.export_chrome_trace(trace_path)
        with open(trace_path) as f:
            events = json.load(f).get("traceEvents", [])
        per_core = collections.Counter(
            e["args"]["device"] for e in events if "device" in e.get("args", {})
        )
        record = {
            "format": "torchneuron-profile-session/1",
            "rank": rank,
            "world_size": world,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "current_device": torch.accelerator.current_device_index(),
            "device_events": dict(sorted(per_core.items())),
            "settings": self.config.settings(),
        }
        with open(os.path.join(session, "neuron_session.json"), "w") as f:
            json.dump(record, f, indent=2)
        self.trace_path = trace_path
        self.trace_paths.append(trace_path)
        return trace_path

    def start(self) -> "NeuronProfiler":
        """Starts recording."""
        self.profile.start()
        return self

    def stop(self) -> str | None:
        """Stops recording; returns the trace's path when ``output_dir`` was given."""
        self.profile.stop()
        if self.output_dir is not None:
            os.makedirs(self.output_dir, exist_ok=True)
            self.trace_path = os.path.join(self.output_dir, f"neuron_profile_{os.getpid()}.json")
            self.profile.export_chrome_trace(self.trace_path)
        return self.trace_path

    def key_averages(self, *args: Any, **kwargs: Any) -> EventList:
        """torch.profiler's per-op table, with the neuron time columns."""
        return self.profile.key_averages(*args, **kwargs)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


__all__ = ["NeuronConfig", "NeuronProfiler", "ProfileMode", "collecting", "device_activity"]
