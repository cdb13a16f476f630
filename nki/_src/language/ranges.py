"""Loop iterators. All static forms unroll (they are ``range``); dynamic ones run eagerly here."""

import operator
from collections.abc import Callable, Iterator
from typing import SupportsIndex

from ..isa.registers import VirtualRegister


def _range(start, stop=None, step=1):
    if stop is None:
        start, stop = 0, start
    return range(operator.index(start), operator.index(stop), operator.index(step))


def affine_range(
    start: SupportsIndex, stop: SupportsIndex | None = None, step: SupportsIndex = 1
) -> range:
    """Iterations without loop-carried dependencies (associative accumulation allowed)."""
    return _range(start, stop, step)


def sequential_range(
    start: SupportsIndex, stop: SupportsIndex | None = None, step: SupportsIndex = 1
) -> range:
    """Iterations with loop-carried dependencies."""
    return _range(start, stop, step)


def static_range(
    start: SupportsIndex, stop: SupportsIndex | None = None, step: SupportsIndex = 1
) -> range:
    """A fully unrolled loop."""
    return _range(start, stop, step)


def plain_range(
    start: SupportsIndex, stop: SupportsIndex | None = None, step: SupportsIndex = 1
) -> range:
    """``nl.range``: a loop the compiler treats like Python ``range`` (unrolled)."""
    return _range(start, stop, step)


def dynamic_range(
    start: SupportsIndex, stop: SupportsIndex | None = None, step: SupportsIndex = 1
) -> Iterator[VirtualRegister]:
    """An on-device loop; bounds may be registers. The induction variable is a frozen register."""
    for i in _range(start, stop, step):
        yield VirtualRegister(i, frozen=True)


def fori_loop(
    lower: SupportsIndex,
    upper: SupportsIndex,
    body_fun: Callable[[VirtualRegister], object],
    step: SupportsIndex = 1,
) -> None:
    """Run ``body_fun(i)`` for ``i`` in ``[lower, upper)``."""
    for i in dynamic_range(lower, upper, step):
        body_fun(i)
