"""What TorchNeuron leaves out or refuses, as the runtime's one table (csrc/aten/Exclusions.cpp):
each row's id, its title, the part of its error every occurrence contains, and the way out.
``torchneuron check``, the OpInfo sweep, the compiler and the docs test read it from here."""

import dataclasses
import functools

import torch


@dataclasses.dataclass(frozen=True)
class Exclusion:
    id: str
    feature: str
    message: str
    way_out: str


@functools.cache
def table() -> tuple[Exclusion, ...]:
    """Every row, in the runtime's order."""
    return tuple(Exclusion(*row) for row in zip(*torch.ops.neuron.exclusions()))


def get(row_id: str) -> Exclusion:
    """The row whose id is ``row_id`` (as events report it)."""
    for row in table():
        if row.id == row_id:
            return row
    raise KeyError(f"no exclusion {row_id!r}; the table has {[row.id for row in table()]}")


def raised_by(error: BaseException | str) -> Exclusion | None:
    """The row whose error ``error`` is, or None."""
    text = str(error)
    return next((row for row in table() if row.message in text), None)
