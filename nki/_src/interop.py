"""Kernel arguments and results across numpy, torch CPU, the neuron device and FakeTensors."""

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensor

from . import dtypes

# Raw integer types of each width: numpy types torch cannot hold natively cross as bits.
_RAW = {1: (np.uint8, torch.uint8), 2: (np.int16, torch.int16), 4: (np.int32, torch.int32)}


def _host_view(t):
    """Zero-copy CPU alias of a neuron-device tensor (provided by the torch_neuronx runtime)."""
    return torch.ops.neuron.as_cpu(t)


def is_tensor_arg(x):
    """True for values passed to kernels as HBM tensors (numeric arrays; a numpy array of
    strings or objects is an ordinary constant argument)."""
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "biuf" or dtypes.from_numpy(x.dtype) is not None
    return isinstance(x, torch.Tensor)


def is_fake(x):
    """True for tensors without data (FakeTensor or meta), which only carry shapes."""
    return isinstance(x, torch.Tensor) and (isinstance(x, FakeTensor) or x.device.type == "meta")


def dtype_of(x):
    """The NKI dtype of a numpy or torch argument."""
    return dtypes.normalize(x.dtype, "kernel argument")


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
        if not x.flags.writeable:
            x = x.copy()
        dtype = dtypes.from_numpy(x.dtype)
        if dtype is not None and (dtype.packed or x.dtype.kind == "V" or _foreign(x.dtype)):
            raw_np, raw_torch = _RAW[x.dtype.itemsize]
            return torch.from_numpy(x.view(raw_np)).view(raw_torch).view(dtype.torch)
        return torch.from_numpy(x)
    if x.device.type == "cpu":
        return x.detach()
    if x.device.type == "neuron":
        return _host_view(x.detach())
    raise TypeError(
        f"NKI kernels take numpy arrays, CPU or neuron tensors; got a {x.device} tensor"
    )


def _foreign(np_dtype):
    """True for numpy extension types (ml_dtypes' bfloat16, float8, ...) torch cannot import."""
    try:
        torch.from_numpy(np.empty(0, dtype=np_dtype))
    except TypeError:
        return True
    return False


def to_numpy(t, dtype=None):
    """A numpy array with ``t``'s values, typed as NKI ``dtype`` (default: ``t``'s).

    bf16/fp8 arrays use ml_dtypes (without it they widen to float32); x4 arrays are records
    of the uint32/uint16 words' halves named after the type (see ``DType.dtype``)."""
    t = t.detach().cpu().contiguous()
    dtype = dtypes.from_torch(t.dtype) if dtype is None else dtype
    if dtype.packed:
        unsigned = np.uint32 if dtype.itemsize == 4 else np.uint16
        words = t.view(_RAW[dtype.itemsize][1]).numpy().view(unsigned)
        return words.view(dtype.dtype)
    try:
        return t.numpy()
    except TypeError:
        pass
    try:
        import ml_dtypes
    except ImportError:
        return t.to(torch.float32).numpy()
    raw_np, raw_torch = _RAW[t.element_size()]
    return t.view(raw_torch).numpy().view(raw_np).view(getattr(ml_dtypes, dtypes.name(dtype)))


def to_device(t, device):
    """Result tensor ``t`` (on the host) placed on ``device``."""
    if device.type == "cpu":
        return t
    return torch.empty(t.shape, dtype=t.dtype, device=device).copy_(t)
