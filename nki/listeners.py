"""What tools outside nki observe of the simulator: kernel launches and validation failures.

The profiler, the estimator and ``torchneuron check`` stand above nki and subscribe here; nki
never imports them. A launch listener is called as ``listener(launch, args, kwargs)`` when a
kernel is launched from outside a kernel (``launch`` is the ``nki.jit`` kernel bound to its
grid); if it returns a context manager, that is entered for the launch's duration. A failure
listener is called with each ``NkiValidationError`` before it is raised, even when the caller
catches it.
"""

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

LaunchListener = Callable[[Any, tuple, dict], "contextlib.AbstractContextManager | None"]
FailureListener = Callable[[Exception], None]

_launch: list[LaunchListener] = []
_failure: list[FailureListener] = []


@contextlib.contextmanager
def subscribe(
    *, launch: LaunchListener | None = None, failure: FailureListener | None = None
) -> Iterator[None]:
    """Calls ``launch`` and ``failure`` for the events of the ``with`` block."""
    added = [(registry, fn) for registry, fn in ((_launch, launch), (_failure, failure)) if fn]
    for registry, fn in added:
        registry.append(fn)
    try:
        yield
    finally:
        for registry, fn in added:
            registry.remove(fn)


@contextlib.contextmanager
def launching(launch: Any, args: tuple, kwargs: dict) -> Iterator[None]:
    """The simulator's side: wraps one top-level kernel launch in its listeners' contexts."""
    with contextlib.ExitStack() as stack:
        for listener in list(_launch):
            context = listener(launch, args, kwargs)
            if context is not None:
                stack.enter_context(context)
        yield


def failed(error: Exception) -> None:
    """The simulator's side: reports a validation error about to be raised."""
    for listener in list(_failure):
        listener(error)
