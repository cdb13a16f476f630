"""Streams and events. The emulated core runs work synchronously, so streams order nothing;
events record host time, which makes ``elapsed_time`` meaningful."""

import torch
from torch.types import Device

from torch_neuronx.neuron.device import _index

_NEURON_DEVICE_TYPE = int(torch._C._autograd.DeviceType.PrivateUse1)


class Stream:
    """A NeuronCore stream: returns a ``torch.Stream`` on the neuron device."""

    def __new__(cls, device=None, priority=0):
        return torch.Stream(device=torch.device("neuron", _index(device)), priority=priority)


class Event:
    """A NeuronCore event: returns a ``torch.Event`` on the neuron device."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return torch.Event(
            device="neuron",
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )


def current_stream(device: Device = None) -> torch.Stream:
    """The current stream of a NeuronCore."""
    return torch.accelerator.current_stream(_index(device))


def default_stream(device: Device = None) -> torch.Stream:
    """The default stream of a NeuronCore."""
    idx = _index(device)
    return torch.Stream(stream_id=0, device_index=idx, device_type=_NEURON_DEVICE_TYPE)


def set_stream(stream: torch.Stream) -> None:
    """Makes ``stream`` current on its NeuronCore."""
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager that makes a stream current, and on exit restores the streams it
    replaced and the current device, as ``torch.cuda.StreamContext`` does."""

    def __init__(self, stream):
        self.stream = stream
        self.previous = []

    def __enter__(self):
        if self.stream is None:
            return None
        # Setting a stream also makes its core current: restore the stream of the stream's core,
        # then the stream (and so the core) that was current.
        self.previous = [
            torch.accelerator.current_stream(self.stream.device_index),
            torch.accelerator.current_stream(torch.accelerator.current_device_index()),
        ]
        torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        for previous in self.previous:
            torch.accelerator.set_stream(previous)
        return False


def stream(stream):
    """Context manager form of set_stream."""
    return StreamContext(stream)
