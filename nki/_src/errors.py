"""Validation errors raised when a kernel breaks a hardware or API rule."""

from typing import NoReturn

from .. import listeners


class NkiValidationError(AssertionError):
    """Raised when hardware constraints are violated (an AssertionError, like AWS's simulator)."""


def fail(op, message) -> NoReturn:
    """Raise a validation error prefixed with the instruction name."""
    error = NkiValidationError(f"{op}: {message}")
    listeners.failed(error)
    try:
        raise error
    finally:
        # Break the frame -> error -> traceback -> frame cycle so tiles are freed promptly.
        del error


def require(cond, op, message):
    """Raise a validation error unless ``cond`` holds."""
    if not cond:
        fail(op, message)
