"""Position of the running instance in the SPMD / LNC launch grid."""

import math
import operator
from collections.abc import Sequence

from .. import runtime


def program_id(axis: int = 0) -> int:
    """Index of the current program along ``axis`` of the launch grid."""
    ctx = runtime.current()
    axis = operator.index(axis)
    return ctx.program_index[axis] if axis < len(ctx.program_index) else 0


def num_programs(axes: int | Sequence[int] | None = None) -> int:
    """Programs along ``axes`` (an int or a tuple), or in the whole grid when None."""
    grid = runtime.current().grid
    if axes is None:
        return math.prod(grid)
    if isinstance(axes, int):
        return grid[axes] if axes < len(grid) else 1
    return math.prod(grid[a] if a < len(grid) else 1 for a in axes)


def program_ndim() -> int:
    """Number of dimensions of the launch grid."""
    return len(runtime.current().grid)
