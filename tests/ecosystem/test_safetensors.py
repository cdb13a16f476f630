"""safetensors on neuron: its loaders refuse device="neuron" (their own device parser does not
know the name); loading to the CPU and then moving, or naming the core by its index, works.
The refusal is asserted as it is today, so that this test fails, and docs/ecosystem.md gets
updated, once safetensors accepts the name.
"""

import pytest
import safetensors.torch as safetensors_torch
import torch
from safetensors import SafetensorError, safe_open


def load_file(path, device):
    return safetensors_torch.load_file(path, device=device)


def load_with_safe_open(path, device):
    with safe_open(path, framework="pt", device=device) as f:
        return {name: f.get_tensor(name) for name in f.keys()}


def load_into_model(path, device):
    model = torch.nn.Linear(4, 3)
    safetensors_torch.load_model(model, path, device=device)
    return model.state_dict()


LOADERS = [load_file, load_with_safe_open, load_into_model]


@pytest.fixture
def saved(tmp_path):
    """A Linear(4, 3)'s weights, saved from neuron tensors: saving moves them to the CPU itself."""
    torch.manual_seed(0)
    weights = {k: v.to("neuron") for k, v in torch.nn.Linear(4, 3).state_dict().items()}
    path = str(tmp_path / "linear.safetensors")
    safetensors_torch.save_file(weights, path)
    return path, {k: v.cpu() for k, v in weights.items()}


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("device", ["neuron", "neuron:1", torch.device("neuron", 1)])
def test_loading_to_neuron_by_name_is_refused(saved, loader, device):
    path, _ = saved
    with pytest.raises(SafetensorError, match="device .*neuron.* is invalid"):
        loader(path, device)


@pytest.mark.parametrize("loader", LOADERS)
def test_loading_to_the_cpu_then_moving_matches(saved, loader):
    path, expected = saved
    loaded = {k: v.to("neuron:1") for k, v in loader(path, "cpu").items()}
    assert loaded.keys() == expected.keys()
    for name, tensor in loaded.items():
        assert tensor.device == torch.device("neuron", 1)
        assert torch.equal(tensor.cpu(), expected[name])


@pytest.mark.parametrize("loader", [load_file, load_with_safe_open])
def test_loading_to_a_core_index_matches(saved, loader):
    # safetensors hands an integer device to torch, which reads it as an index of the current
    # accelerator: neuron.
    path, expected = saved
    loaded = loader(path, 1)
    for name, tensor in loaded.items():
        assert tensor.device == torch.device("neuron", 1)
        assert torch.equal(tensor.cpu(), expected[name])
