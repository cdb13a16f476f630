"""Streams and events. The emulated core runs work synchronously, so streams order nothing;
events record host time, which makes ``elapsed_time`` meaningful."""

import torch

from torch_neuronx.neuron.device import _index


class Stream(torch.Stream):
    """A NeuronCore stream (``torch.Stream`` on the neuron device)."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if kwargs:
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=torch.device("neuron", _index(device)), priority=priority)

    def __eq__(self, other):
        return isinstance(other, torch.Stream) and super().__eq__(other)

    __hash__ = torch.Stream.__hash__


class Event(torch.Event):
    """A NeuronCore event (``torch.Event`` on the neuron device)."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return super().__new__(cls, device="neuron", enable_timing=enable_timing,
                               blocking=blocking, interprocess=interprocess)


def current_stream(device=None):
    """The current stream of a NeuronCore."""
    return torch.accelerator.current_stream(_index(device))


def default_stream(device=None):
    """The default stream of a NeuronCore."""
    idx = _index(device)
    return torch.Stream(stream_id=0, device_index=idx,
                        device_type=torch._C._autograd.DeviceType.PrivateUse1)


def set_stream(stream):
    """Makes ``stream`` current on its NeuronCore."""
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager that makes a stream current."""

    def __init__(self, stream):
        self.stream = stream
        self.prev = None

    def __enter__(self):
        if self.stream is None:
            return None
        self.prev = torch.accelerator.current_stream(self.stream.device_index)
        torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            torch.accelerator.set_stream(self.prev)
        return False


def stream(stream):
    """Context manager form of set_stream."""
    return StreamContext(stream)
