"""Helpers shared by the nki tests."""

import pytest
import torch


def neuron_available():
    """True once the torch_neuronx device runtime provides the neuron device and as_cpu."""
    return (
        hasattr(torch, "neuron")
        and torch.neuron.is_available()
        and hasattr(torch.ops.neuron, "as_cpu")
    )


def neuron_backend_available():
    """True once torch.compile(backend="neuron") is registered as well."""
    import torch._dynamo

    return neuron_available() and "neuron" in torch._dynamo.list_backends(exclude_tags=())


requires_neuron = pytest.mark.skipif(not neuron_available(), reason="neuron device not available")
requires_neuron_backend = pytest.mark.skipif(
    not neuron_backend_available(), reason='torch.compile backend "neuron" not available'
)


def assert_matches(actual, expected):
    """Example tolerance: fp32 atol/rtol 1e-5, bf16 (and other 16-bit) 1e-2."""
    tol = 1e-5 if expected.dtype == torch.float32 else 1e-2
    torch.testing.assert_close(actual.float(), expected.float(), atol=tol, rtol=tol)
