"""neuronxcc.nki.typing: tensor annotations of the pre-0.2 API.

``tensor[128, 512]`` annotates a shape and ``tensor[[250, 512], nl.float32]`` a shape and a
data type; the latter also stands in for an input when calling an ``nki.benchmark`` kernel.
"""

from nki.typing import TensorType


class tensor:
    """``tensor[d0, d1, ...]``, ``tensor[[d0, d1], dtype]`` or ``tensor[dtype, d0, ...]``."""

    def __class_getitem__(cls, item):
        items = list(item) if isinstance(item, tuple) else [item]
        if items and isinstance(items[0], (list, tuple)):
            shape, rest = tuple(items[0]), items[1:]
        else:
            shape = tuple(i for i in items if isinstance(i, int))
            rest = [i for i in items if not isinstance(i, int)]
        if len(rest) > 1:
            raise TypeError(f"tensor[...] takes a shape and at most one dtype, got {item!r}")
        return TensorType(rest[0] if rest else None, shape)


class mutable_tensor(tensor):
    """Annotates an argument the kernel writes in place; same subscript forms as ``tensor``."""
