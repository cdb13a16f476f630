"""Fixtures for the neuron compile backend: a private compile cache and fresh Dynamo state."""

import os

import pytest
import torch
import torch._dynamo

import torch_neuronx._dynamo as neuron_dynamo


@pytest.fixture(scope="session", autouse=True)
def session_cache(tmp_path_factory):
    """One compile cache for the session, so tests that compile the same graph share it."""
    path = tmp_path_factory.mktemp("neff-cache")
    old = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
    os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        del os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"]
    else:
        os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = old


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    neuron_dynamo.reset_dynamo_metrics()
    yield
    torch._dynamo.reset()
