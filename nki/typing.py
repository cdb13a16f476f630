"""nki.typing: annotations for kernel arguments and tiles, e.g. ``tensor[128, 512]``."""

import torch

from ._src import dtypes


class TensorType:
    """A tensor annotation: an optional dtype and a shape (annotations are not enforced)."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype, shape):
        self.dtype = dtype
        self.shape = shape

    def __repr__(self):
        dtype = "" if self.dtype is None else f"{self.dtype}, "
        return f"tensor[{dtype}{', '.join(map(str, self.shape))}]"

    def __eq__(self, other):
        same = isinstance(other, TensorType)
        return same and (self.dtype, self.shape) == (other.dtype, other.shape)

    def __hash__(self):
        return hash((self.dtype, self.shape))


class tensor:
    """``tensor[d0, d1, ...]`` or ``tensor[dtype, d0, ...]`` builds a TensorType annotation."""

    def __class_getitem__(cls, item):
        items = item if isinstance(item, tuple) else (item,)
        if len(items) == 1 and isinstance(items[0], (tuple, list)):
            items = tuple(items[0])
        dtype = None
        if items and isinstance(items[0], (torch.dtype, dtypes.DType)):
            dtype, items = dtypes.normalize(items[0]), items[1:]
        return TensorType(dtype, tuple(items))


class mutable_tensor(tensor):
    """Annotates an argument the kernel writes in place; same subscript forms as ``tensor``."""
