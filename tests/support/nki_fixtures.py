"""The fixtures of the NKI tests (tests/nki, tests/neuronxcc; each conftest.py imports them):
target selection, and no device reset."""

import pytest


@pytest.fixture(autouse=True)
def target(monkeypatch):
    """trn2 unless a test selects another platform target with ``target("trn3")``."""

    def select(name):
        monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", name)

    select("trn2")
    return select


@pytest.fixture(autouse=True)
def _reset_current_device():
    """Overrides the device-reset fixture of tests/conftest.py: the nki suite must also run
    when the neuron device runtime is not loaded (TORCH_DEVICE_BACKEND_AUTOLOAD=0)."""
    yield
