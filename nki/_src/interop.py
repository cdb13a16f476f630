"""Kernel arguments and results across numpy, torch CPU, the neuron device and FakeTensors."""

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensor

# numpy types that only exist through ml_dtypes, moved across as raw bits.
_BIT_TYPES = {
    "bfloat16": (np.uint16, torch.bfloat16),
    "float8_e4m3fn": (np.uint8, torch.float8_e4m3fn),
    "float8_e5m2": (np.uint8, torch.float8_e5m2),
}


def _host_view(t):
    """Zero-copy CPU alias of a neuron-device tensor (provided by the torch_neuronx runtime)."""
    return torch.ops.neuron.as_cpu(t)


def is_tensor_arg(x):
    """True for values passed to kernels as HBM tensors."""
    return isinstance(x, (np.ndarray, torch.Tensor))


def is_fake(x):
    """True for tensors without data (FakeTensor or meta), which only carry shapes."""
    return isinstance(x, torch.Tensor) and (isinstance(x, FakeTensor) or x.device.type == "meta")


def dtype_of(x):
    """The torch dtype of a numpy or torch argument."""
    if isinstance(x, torch.Tensor):
        return x.dtype
    if x.dtype.name in _BIT_TYPES:
        return _BIT_TYPES[x.dtype.name][1]
    return torch.from_numpy(np.empty(0, dtype=x.dtype)).dtype


def shape_of(x):
    """Concrete shape of an argument (symbolic sizes are pinned to their current value)."""
    return tuple(int(s) for s in x.shape)


def strides_of(x):
    """Element strides of a numpy or torch argument."""
    if isinstance(x, torch.Tensor):
        return tuple(int(s) for s in x.stride())
    return tuple(s // x.itemsize for s in x.strides)


def to_host(x):
    """A CPU torch tensor sharing memory with argument ``x`` (so in-place updates show)."""
    if isinstance(x, np.ndarray):
        if x.dtype.name in _BIT_TYPES:
            bits, dtype = _BIT_TYPES[x.dtype.name]
            return torch.from_numpy(x.view(bits)).view(dtype)
        return torch.from_numpy(x) if x.flags.writeable else torch.from_numpy(x.copy())
    if x.device.type == "cpu":
        return x.detach()
    if x.device.type == "neuron":
        return _host_view(x.detach())
    raise TypeError(
        f"NKI kernels take numpy arrays, CPU or neuron tensors; got a {x.device} tensor"
    )


def to_numpy(t):
    """A numpy array with ``t``'s values (bf16/fp8 need ml_dtypes, else they widen to float32)."""
    t = t.detach().cpu().contiguous()
    name = str(t.dtype).removeprefix("torch.")
    if name in _BIT_TYPES:
        try:
            import ml_dtypes
        except ImportError:
            return t.to(torch.float32).numpy()
        raw = torch.uint16 if t.element_size() == 2 else torch.uint8
        return t.view(raw).numpy().view(getattr(ml_dtypes, name))
    return t.numpy()


def to_device(t, device):
    """Result tensor ``t`` (on the host) placed on ``device``."""
    if device.type == "cpu":
        return t
    return torch.empty(t.shape, dtype=t.dtype, device=device).copy_(t)
