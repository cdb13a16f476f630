"""Virtual registers: scalar values for dynamic loop bounds and offsets (resolved eagerly here)."""

import operator
from typing import SupportsIndex, SupportsInt

from .. import checks
from ..errors import require
from ..objects import NKIObject
from ..tensor import NkiTensor
from ..trace import mark_written


class VirtualRegister(NKIObject):
    """A 32-bit engine register; the simulator holds its current value."""

    __slots__ = ("value", "frozen")

    def __init__(self, state: SupportsInt | None = None, frozen: bool = False) -> None:
        self.value = 0 if state is None else int(state)
        self.frozen = frozen

    def __index__(self):
        return self.value

    __int__ = __index__

    def __bool__(self):
        return self.value != 0

    def __repr__(self):
        return f"VirtualRegister({self.value})"

    def set(self, value: SupportsInt, where: str) -> None:
        require(
            not self.frozen, where, "cannot write the induction variable of a dynamic_range loop"
        )
        self.value = int(value)


def register_alloc(x: SupportsInt | None = None) -> VirtualRegister:
    """Allocate a register, optionally initialized with an integer."""
    return VirtualRegister(x)


def register_move(dst: VirtualRegister, src: SupportsIndex) -> None:
    """Move a constant or another register's value into ``dst``."""
    dst.set(operator.index(src), "register_move")


def register_load(dst: VirtualRegister, src: NkiTensor) -> None:
    """Load a scalar from a one-element tensor into ``dst``."""
    checks.tensor("register_load", "src", src)
    require(src.size == 1, "register_load", f"src must have 1 element, has {src.size}")
    dst.set(src.host.reshape(-1)[0].item(), "register_load")


def register_store(dst: NkiTensor, src: VirtualRegister) -> None:
    """Store a register's value into a one-element tensor."""
    checks.tensor("register_store", "dst", dst)
    require(dst.size == 1, "register_store", f"dst must have 1 element, has {dst.size}")
    dst.host.fill_(src.value)
    mark_written(dst)
