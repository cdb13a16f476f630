"""Device selection, properties and initialisation."""

import dataclasses
import os
import threading
import time
from typing import Literal

import torch
from torch.types import Device

from torch_neuronx import _config as config
from torch_neuronx._platforms import PLATFORMS

_initialized = False
_in_bad_fork = False
_init_lock = threading.Lock()


def _index(dev: Device = None) -> int:
    """The device index that ``dev`` (None, int, str or torch.device) names."""
    if dev is None:
        return torch.accelerator.current_device_index()
    if isinstance(dev, int):
        return dev
    dev = torch.device(dev)
    if dev.type != "neuron":
        raise ValueError(f"Expected a neuron device, but got {dev}")
    return torch.accelerator.current_device_index() if dev.index is None else dev.index


def is_available() -> bool:
    """True when at least one emulated NeuronCore is visible."""
    return device_count() > 0


def device_count() -> int:
    """Number of visible logical NeuronCores."""
    return torch.ops.neuron.device_count()


def is_initialized() -> bool:
    """True once the runtime has been initialised in this process."""
    return _initialized and not _in_bad_fork


def _lazy_init() -> None:
    global _initialized
    if _initialized:
        return
    with _init_lock:
        if _in_bad_fork:
            raise RuntimeError(
                "Cannot re-initialize the neuron runtime in a forked subprocess. Use the "
                "'spawn' start method for multiprocessing with neuron tensors."
            )
        torch.ops.neuron.platform(0)
        _initialized = True


def is_neuron_runtime_initialized() -> bool:
    """True once the runtime has been initialised in this process (TorchNeuron's top-level name
    for ``torch.neuron.is_initialized``)."""
    return is_initialized()


def init() -> None:
    """Initialises the runtime (it is otherwise initialised lazily)."""
    _lazy_init()


def _is_in_bad_fork() -> bool:
    """True in a child forked after the runtime was initialised."""
    return _in_bad_fork


def _after_fork() -> None:
    # The C++ side makes the child initialise the device again on first use (as CUDA does),
    # which then reaches _lazy_init and its bad-fork error.
    global _initialized, _in_bad_fork
    if _initialized:
        _initialized = False
        _in_bad_fork = True


os.register_at_fork(after_in_child=_after_fork)


def current_device() -> int:
    """Index of the current NeuronCore."""
    return torch.accelerator.current_device_index()


def set_device(dev: Device) -> None:
    """Makes ``dev`` the current NeuronCore."""
    idx = _index(dev)
    if idx >= 0:
        torch.accelerator.set_device_index(idx)


class device:
    """Context manager that makes a NeuronCore current."""

    def __init__(self, dev: Device) -> None:
        self.idx = -1 if dev is None else _index(dev)
        self.prev = -1

    def __enter__(self) -> None:
        self.prev = torch.accelerator.current_device_index()
        if self.idx >= 0 and self.idx != self.prev:
            torch.accelerator.set_device_index(self.idx)

    def __exit__(self, *exc: object) -> Literal[False]:
        if self.idx >= 0 and self.idx != self.prev:
            torch.accelerator.set_device_index(self.prev)
        return False


class device_of(device):
    """Context manager that makes the NeuronCore of a tensor current."""

    def __init__(self, obj: torch.Tensor | torch.TypedStorage | torch.UntypedStorage) -> None:
        super().__init__(obj.get_device() if obj.device.type == "neuron" else None)


def synchronize(device: Device = None) -> None:
    """Waits for queued work on a NeuronCore; the emulated device runs synchronously."""
    torch.accelerator.synchronize(_index(device))


@dataclasses.dataclass(frozen=True)
class _NeuronDeviceProperties:
    name: str  # the platform: trn2 or trn3
    total_memory: int  # HBM bytes of the logical core
    physical_core: int  # the core's number on the chip (as NEURON_RT_VISIBLE_CORES counts)
    index: int
    major: int  # NeuronCore generation: 3 on trn2, 4 on trn3
    minor: int
    multi_processor_count: int  # physical NeuronCores in the logical core (the LNC size)
    is_integrated: bool = False


def get_device_properties(device: Device = None) -> "_NeuronDeviceProperties":
    """Properties of a NeuronCore: platform name, HBM bytes, generation, LNC size."""
    idx = _index(device)
    name, total, core = torch.ops.neuron.platform(idx)
    lnc = config.logical_core_size()
    return _NeuronDeviceProperties(name, total, core, idx, PLATFORMS[name].core_version, 0, lnc)


def get_device_name(device: Device = None) -> str:
    """Name of a NeuronCore, e.g. ``neuron:0``."""
    return f"neuron:{_index(device)}"


def get_device_capability(device: Device = None) -> tuple[int, int]:
    """NeuronCore generation as (major, minor): (3, 0) on trn2, (4, 0) on trn3."""
    props = get_device_properties(device)
    return props.major, props.minor


def get_amp_supported_dtype() -> list[torch.dtype]:
    """Dtypes that torch.autocast("neuron") accepts."""
    return [torch.float32, torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Trainium computes in bfloat16 natively."""
    return True


def is_tf32_supported() -> bool:
    """Trainium's Tensor Engine takes tf32 inputs (nki_spec.md section 4)."""
    return True


def get_arch_list() -> list[str]:
    """The Trainium platforms the neuron device runs on (NEURON_PLATFORM_TARGET_OVERRIDE)."""
    return [p.name for p in PLATFORMS.values() if p.torch_device]


def can_device_access_peer(device: Device, peer_device: Device) -> bool:
    """True for two different visible cores: they are cores of one chip, whose HBM each can
    reach; False for a core and itself, as in CUDA."""
    a, b = _index(device), _index(peer_device)
    count = device_count()
    for role, idx in (("device", a), ("peer_device", b)):
        if not 0 <= idx < count:
            raise ValueError(
                f"can_device_access_peer: {role} neuron:{idx} is not a visible core; "
                f"use an index from 0 to {count - 1}"
            )
    return a != b


def ipc_collect() -> None:
    """Nothing to collect: neuron tensors are never shared between processes (IPC), so no
    device memory is held for another process."""


def device_memory_used(device: Device = None) -> int:
    """HBM bytes in use on a NeuronCore: the emulated HBM belongs to this process, so this is
    what its caching allocator has reserved (total minus free of mem_get_info)."""
    free, total = torch.accelerator.get_memory_info(_index(device))
    return total - free


has_half = True  # float16 tensors and arithmetic work on neuron


_busy_samples: dict[
    int, tuple[int, int]
] = {}  # device index -> (wall ns, busy ns) at the previous utilization() call


def utilization(device: Device = None) -> int:
    """Percent of the wall time since the previous call that the core spent running work. The
    runtime counts busy time from the first call on, so the first call answers 0."""
    idx = _index(device)
    sample = (time.monotonic_ns(), torch.ops.neuron.busy_ns(idx))
    previous = _busy_samples.get(idx, sample)
    _busy_samples[idx] = sample
    wall = sample[0] - previous[0]
    return round(100 * (sample[1] - previous[1]) / wall) if wall else 0
