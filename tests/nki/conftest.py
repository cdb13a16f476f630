"""The nki tests run on a chosen platform target, with or without the device runtime."""

from nki_fixtures import _reset_current_device, target  # noqa: F401
