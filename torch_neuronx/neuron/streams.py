"""Streams and events. The emulated core runs work synchronously, so streams order nothing;
events record host time, which makes ``elapsed_time`` meaningful."""

from typing import Any, Literal

import torch
from torch.types import Device

from torch_neuronx.neuron._device import _index

_NEURON_DEVICE_TYPE = torch._C._autograd.DeviceType.PrivateUse1.value


class Stream(torch.Stream):
    """A NeuronCore stream: a ``torch.Stream`` of the neuron device, as ``torch.cuda.Stream``
    is one of the CUDA device."""

    def __new__(cls, device: Device = None, priority: int = 0, **kwargs: Any) -> "Stream":
        # Streams the runtime hands out are rebuilt from their (id, index, type) triple.
        if kwargs:
            return super().__new__(cls, **kwargs)
        dev = torch.device("neuron", _index(device))
        return super().__new__(cls, device=dev, priority=priority)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass  # torch.Stream is built in __new__; object.__init__ would refuse the arguments

    @classmethod
    def _wrap(cls, stream: torch.Stream) -> "Stream":
        return cls(
            stream_id=stream.stream_id,
            device_index=stream.device_index,
            device_type=stream.device_type,
        )

    def record_event(self, event: torch.Event | None = None) -> torch.Event:
        """Records ``event`` (a new ``torch.neuron.Event`` if None) on this stream."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def wait_event(self, event: torch.Event) -> None:
        """Makes later work on this stream wait for ``event``."""
        event.wait(self)

    def wait_stream(self, stream: torch.Stream) -> None:
        """Makes later work on this stream wait for the work queued on ``stream``."""
        self.wait_event(stream.record_event())

    def __repr__(self) -> str:
        return f"torch.neuron.Stream(device=neuron:{self.device_index} stream_id={self.stream_id})"


class Event(torch.Event):
    """A NeuronCore event: a ``torch.Event`` of the neuron device."""

    def __new__(
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> "Event":
        return super().__new__(cls, **_event_flags(enable_timing, blocking, interprocess))

    def __init__(
        self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> None:
        # torch.Event.elapsed_time accepts only an exact torch.Event as its argument, so each
        # event keeps a plain twin, recorded with it, to time against another event's twin.
        self._twin = torch.Event(**_event_flags(enable_timing, blocking, interprocess))

    def record(self, stream: torch.Stream | None = None) -> None:
        """Records the event on ``stream`` (the current stream if None)."""
        stream = current_stream() if stream is None else stream
        super().record(stream)
        self._twin.record(stream)

    def wait(self, stream: torch.Stream | None = None) -> None:
        """Makes later work on ``stream`` (the current stream if None) wait for this event."""
        super().wait(current_stream() if stream is None else stream)

    def elapsed_time(self, end_event: torch.Event) -> float:
        """Milliseconds of host time between this event's record and ``end_event``'s."""
        return self._twin.elapsed_time(getattr(end_event, "_twin", end_event))

    def __repr__(self) -> str:
        return f"torch.neuron.Event(device=neuron:{self.device.index} event_id={self.event_id})"


def _event_flags(enable_timing: bool, blocking: bool, interprocess: bool) -> dict[str, Any]:
    return dict(
        device="neuron",
        enable_timing=enable_timing,
        blocking=blocking,
        interprocess=interprocess,
    )


def current_stream(device: Device = None) -> Stream:
    """The current stream of a NeuronCore."""
    return Stream._wrap(torch.accelerator.current_stream(_index(device)))


def default_stream(device: Device = None) -> Stream:
    """The default stream of a NeuronCore."""
    return Stream(stream_id=0, device_index=_index(device), device_type=_NEURON_DEVICE_TYPE)


def set_stream(stream: torch.Stream | None) -> None:
    """Makes ``stream`` current on its NeuronCore."""
    if stream is not None:
        torch.accelerator.set_stream(stream)


def is_current_stream_capturing() -> bool:
    """False: the neuron device has no graph capture (no CUDA-graph equivalent)."""
    return False


class StreamContext:
    """Context manager that makes a stream current, and on exit restores the streams it
    replaced and the current device, as ``torch.cuda.StreamContext`` does."""

    def __init__(self, stream: torch.Stream | None) -> None:
        self.stream = stream
        self.previous: list[torch.Stream] = []

    def __enter__(self) -> torch.Stream | None:
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

    def __exit__(self, *exc: object) -> Literal[False]:
        for previous in self.previous:
            torch.accelerator.set_stream(previous)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    """Context manager form of set_stream."""
    return StreamContext(stream)
