"""Each ecosystem test starts with accelerate's process-wide state unset."""

import pytest


@pytest.fixture(autouse=True)
def _fresh_accelerate_state():
    # Accelerator, Trainer and SFTTrainer keep their device and mixed-precision choice in a
    # process-wide singleton; a CPU run after a neuron run must not inherit it.
    state = pytest.importorskip("accelerate.state")
    state.AcceleratorState._reset_state(reset_partial_state=True)
    yield
    state.AcceleratorState._reset_state(reset_partial_state=True)
