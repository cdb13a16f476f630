import os
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
sys.path.insert(0, HERE)


@pytest.fixture(autouse=True)
def _reset_current_device():
    torch.neuron.set_device(0)
    yield
    torch.neuron.set_device(0)
