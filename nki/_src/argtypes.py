"""The types the public signatures of nki, nki.language and nki.isa are written in."""

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Union

import numpy as np
import torch

from .alu import Op
from .dtypes import DType

if TYPE_CHECKING:
    from .tensor import NkiTensor

# A dtype argument, as dtypes.normalize reads it: an NKI dtype, a torch or numpy dtype, its
# name, or float, int or bool.
DTypeLike = DType | torch.dtype | np.dtype | str | type

# An operator argument, as alu.resolve reads it: an nki.language operator, or the numpy
# function that names one (np.add, ...).
Operator = Op | Callable[..., Any]

# A scalar, or a tile that gives each partition its own value.
Operand = Union["NkiTensor", float]

Shape = Sequence[int]
