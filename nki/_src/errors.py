"""Validation errors raised when a kernel breaks a hardware or API rule."""


class NkiValidationError(AssertionError):
    """Raised when hardware constraints are violated (an AssertionError, like AWS's simulator)."""


def fail(op, message):
    """Raise a validation error prefixed with the instruction name."""
    raise NkiValidationError(f"{op}: {message}")


def require(cond, op, message):
    """Raise a validation error unless ``cond`` holds."""
    if not cond:
        fail(op, message)
