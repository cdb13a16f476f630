"""Engine accumulator registers (one fp32 lane per partition) driven by ``reduce_cmd``."""

import torch

from ..enums import reduce_cmd
from ..errors import fail

_IDENTITY = {
    "add": 0.0,
    "maximum": float("-inf"),
    "max": float("-inf"),
    "minimum": float("inf"),
    "min": float("inf"),
    "multiply": 1.0,
}


def accumulate(regs, cmd, partial, op, init=None, where="reduce"):
    """Apply ``cmd`` to ``regs[:P]`` with this instruction's per-partition ``partial`` result."""
    if op.name not in _IDENTITY:
        fail(where, f"{op!r} cannot be used as an accumulating reduction")
    lanes = regs[: partial.shape[0]]
    if cmd in (reduce_cmd.reset, reduce_cmd.reset_reduce):
        lanes.fill_(_IDENTITY[op.name])
    elif cmd is reduce_cmd.load_reduce:
        lanes.copy_(torch.as_tensor(init, dtype=torch.float32).reshape(-1).expand_as(lanes))
    if cmd in (reduce_cmd.reduce, reduce_cmd.reset_reduce, reduce_cmd.load_reduce):
        lanes.copy_(op.binary(lanes, partial))
    return lanes.clone().reshape(-1, 1)
