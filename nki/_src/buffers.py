"""Memory spaces a tensor can live in."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tensor import NkiTensor


class Buffer:
    """A memory space (SBUF, PSUM or one of the HBM kinds)."""

    __slots__ = ("name", "on_chip")

    def __init__(self, name, on_chip):
        self.name = name
        self.on_chip = on_chip

    def __repr__(self):
        return f"nl.{self.name}"


sbuf = Buffer("sbuf", True)
psum = Buffer("psum", True)
private_hbm = Buffer("private_hbm", False)
# nl.hbm is documented as an alias of private_hbm.
hbm = private_hbm
shared_hbm = Buffer("shared_hbm", False)


def is_hbm(t: "NkiTensor") -> bool:
    """True if the tensor lives in any HBM space."""
    return not t.buffer.on_chip


def is_sbuf(t: "NkiTensor") -> bool:
    """True if the tensor lives in SBUF."""
    return t.buffer is sbuf


def is_psum(t: "NkiTensor") -> bool:
    """True if the tensor lives in PSUM."""
    return t.buffer is psum


def is_on_chip(t: "NkiTensor") -> bool:
    """True if the tensor lives in SBUF or PSUM."""
    return t.buffer.on_chip
