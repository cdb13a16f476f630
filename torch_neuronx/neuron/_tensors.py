"""Legacy typed tensor and storage classes (``torch.neuron.FloatTensor``, ``FloatStorage``...),
as ``torch.cuda`` has them."""

from typing import Any

import torch
from torch._utils import classproperty
from torch.storage import _LegacyStorage
from torch.types import Device

from torch_neuronx.neuron._device import _index

_TENSOR_DTYPES = {
    "BFloat16": torch.bfloat16,
    "Bool": torch.bool,
    "Byte": torch.uint8,
    "Char": torch.int8,
    "Double": torch.float64,
    "Float": torch.float32,
    "Half": torch.float16,
    "Int": torch.int32,
    "Long": torch.int64,
    "Short": torch.int16,
}
_STORAGE_DTYPES = {
    **_TENSOR_DTYPES,
    "ComplexDouble": torch.complex128,
    "ComplexFloat": torch.complex64,
}


class _TensorType(type):
    """What ``torch.cuda.FloatTensor`` is for CUDA: an isinstance check and a constructor."""

    dtype: torch.dtype

    def __instancecheck__(cls, obj: object) -> bool:
        return (
            isinstance(obj, torch.Tensor)
            and obj.device.type == "neuron"
            and obj.dtype == cls.dtype
            and obj.layout == torch.strided
        )

    def __call__(cls, *args: Any, device: Device = None) -> torch.Tensor:
        dev = torch.device("neuron", _index(device))
        first = args[0] if len(args) == 1 else None
        if isinstance(first, (torch.TypedStorage, torch.UntypedStorage)):
            return torch.empty(0, dtype=cls.dtype, device=first.device).set_(first)
        sizes = first if isinstance(first, torch.Size) else args or (0,)
        if all(isinstance(n, int) for n in sizes):
            return torch.empty(sizes, dtype=cls.dtype, device=dev)
        # Data: the CPU class's legacy constructor reads it.
        return getattr(torch, cls.__qualname__)(*args).to(dev)


def _tensor_type(prefix: str, dtype: torch.dtype) -> _TensorType:
    # Tensor.type(cls) looks a class up by its C-level name, which for a Python class is
    # __name__; __qualname__ and __module__ give it its printed name.
    cls = _TensorType(f"torch.neuron.{prefix}Tensor", (), {"dtype": dtype, "is_sparse": False})
    cls.__qualname__ = f"{prefix}Tensor"
    cls.__module__ = "torch.neuron"
    return cls


class _NeuronLegacyStorage(_LegacyStorage):
    """A typed storage on neuron; TypedStorage places it by the ``torch.neuron`` module name."""

    @classproperty
    def dtype(cls) -> torch.dtype:
        return cls._dtype


def _storage_type(prefix: str, dtype: torch.dtype) -> type[_NeuronLegacyStorage]:
    name = f"{prefix}Storage"
    cls = type(name, (_NeuronLegacyStorage,), {"_dtype": dtype, "__module__": "torch.neuron"})
    torch._storage_classes.add(cls)
    return cls


TENSOR_TYPES = {f"{p}Tensor": _tensor_type(p, d) for p, d in _TENSOR_DTYPES.items()}
STORAGE_TYPES = {f"{p}Storage": _storage_type(p, d) for p, d in _STORAGE_DTYPES.items()}
