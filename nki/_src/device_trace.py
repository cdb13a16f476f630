"""The device runtime's trace channel: how a kernel launch on neuron tensors becomes a kernel row
of its NeuronCore in torch.profiler. The runtime (csrc/runtime/Trace.h) hands out the address of
its channel through ``torch.ops.neuron.trace_api``, which exists once neuron tensors can; reading
the channel's flag is the whole cost of a launch while nobody profiles."""

import contextlib
import ctypes

import torch


class _Api(ctypes.Structure):
    # Mirrors neuron::trace::Api in csrc/runtime/Trace.h.
    _fields_ = [
        ("collecting", ctypes.c_void_p),
        (
            "begin",
            ctypes.CFUNCTYPE(
                ctypes.c_uint64,
                ctypes.c_char_p,
                ctypes.c_int32,
                ctypes.c_int32,
                ctypes.c_int64,
                ctypes.c_char_p,
                ctypes.c_int64,
            ),
        ),
        ("end", ctypes.CFUNCTYPE(None, ctypes.c_uint64)),
    ]


_KERNEL = 0  # neuron::trace::Kind::Kernel
_channel = None


def _api():
    """The channel, or None while no device runtime is loaded."""
    global _channel
    if _channel is None:
        if not hasattr(torch.ops.neuron, "trace_api"):
            return None
        api = _Api.from_address(torch.ops.neuron.trace_api())
        _channel = (api, ctypes.c_int32.from_address(api.collecting))
    return _channel


def collecting() -> bool:
    """Whether a profiler is recording neuron device activity now."""
    channel = _api()
    return channel is not None and channel[1].value != 0


@contextlib.contextmanager
def device_activity(name: str, device, category: str = "kernel", nbytes: int = 0):
    """Records the enclosed work as kernel ``nc::<name>`` of core ``device``, launched by a CPU
    range ``name`` (for work that runs on a core outside ATen's dispatcher: NKI kernels)."""
    if device is None or not collecting():
        yield
        return
    api = _api()[0]
    with torch.profiler.record_function(name):
        token = api.begin(f"nc::{name}".encode(), _KERNEL, device, -1, category.encode(), nbytes)
        try:
            yield
        finally:
            api.end(token)
