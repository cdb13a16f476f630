"""Device selection, properties and initialisation."""

import dataclasses
import os
import threading

import torch
from torch.types import Device

from torch_neuronx.platforms import PLATFORMS

_initialized = False
_in_bad_fork = False
_init_lock = threading.Lock()


def _index(dev=None):
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


def _lazy_init():
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


def init() -> None:
    """Initialises the runtime (it is otherwise initialised lazily)."""
    _lazy_init()


def _is_in_bad_fork():
    """True in a child forked after the runtime was initialised."""
    return _in_bad_fork


def _after_fork():
    global _in_bad_fork
    if _initialized:
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

    def __init__(self, dev):
        self.idx = -1 if dev is None else _index(dev)
        self.prev = -1

    def __enter__(self):
        self.prev = torch.accelerator.current_device_index()
        if self.idx >= 0 and self.idx != self.prev:
            torch.accelerator.set_device_index(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0 and self.idx != self.prev:
            torch.accelerator.set_device_index(self.prev)
        return False


class device_of(device):
    """Context manager that makes the NeuronCore of a tensor current."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_neuron else None)


def synchronize(device: Device = None) -> None:
    """Waits for queued work on a NeuronCore; the emulated device runs synchronously."""
    torch.accelerator.synchronize(_index(device))


@dataclasses.dataclass(frozen=True)
class _NeuronDeviceProperties:
    name: str
    total_memory: int
    physical_core: int
    index: int
    major: int
    minor: int


def get_device_properties(device: Device = None) -> "_NeuronDeviceProperties":
    """Properties of a NeuronCore: ``name`` (trn2/trn3) and ``total_memory`` in bytes."""
    idx = _index(device)
    name, total, core = torch.ops.neuron.platform(idx)
    return _NeuronDeviceProperties(name, total, core, idx, PLATFORMS[name].core_version, 0)


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
