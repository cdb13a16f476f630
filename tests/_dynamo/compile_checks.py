"""Comparisons shared by the compiler tests."""

import torch


def assert_matches(actual, expected, rtol=1e-5, atol=1e-5):
    """``actual`` is a neuron tensor holding ``expected``'s values within float32 tolerance."""
    assert actual.device.type == "neuron", actual.device
    torch.testing.assert_close(actual.cpu(), expected.cpu(), rtol=rtol, atol=atol)
