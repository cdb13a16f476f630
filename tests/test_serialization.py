import io

import pytest
import torch


def _roundtrip(obj, **kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **kwargs)


def _state():
    base = torch.arange(12.0, device="neuron").reshape(3, 4)
    return {"base": base, "row": base[1], "col": base[:, 2]}


@pytest.mark.parametrize(
    "map_location, device",
    [
        (None, "neuron:0"),
        ("cpu", "cpu"),
        ("neuron:1", "neuron:1"),
        (torch.device("neuron:2"), "neuron:2"),
        ({"neuron:0": "cpu"}, "cpu"),
        (lambda storage, loc: storage, "cpu"),
    ],
)
def test_map_location_forms(map_location, device):
    kwargs = {} if map_location is None else {"map_location": map_location}
    loaded = _roundtrip(_state(), **kwargs)
    assert loaded["base"].device == torch.device(device)
    assert torch.equal(loaded["base"].cpu(), torch.arange(12.0).reshape(3, 4))


@pytest.mark.parametrize("weights_only", [True, False])
def test_shared_views_stay_shared(weights_only):
    loaded = _roundtrip(_state(), weights_only=weights_only)
    assert loaded["row"].untyped_storage().data_ptr() == loaded["base"].untyped_storage().data_ptr()
    loaded["base"].zero_()
    assert loaded["row"].sum().item() == 0 and loaded["col"].sum().item() == 0


def test_cpu_checkpoint_loads_onto_neuron():
    model = torch.nn.Linear(4, 2)
    state = _roundtrip(model.state_dict(), map_location="neuron")
    assert state["weight"].device.type == "neuron"
    fresh = torch.nn.Linear(4, 2).to("neuron")
    fresh.load_state_dict(state)
    assert torch.equal(fresh.weight.cpu(), model.weight.detach())


def test_safetensors_round_trip(tmp_path):
    safetensors = pytest.importorskip("safetensors.torch")
    tensors = {"a": torch.randn(3, 3, device="neuron"), "b": torch.arange(4, device="neuron")}
    path = tmp_path / "t.safetensors"
    safetensors.save_file(tensors, str(path))
    # Hugging Face loads on the host and then moves tensors, as here.
    loaded = {k: v.to("neuron:1") for k, v in safetensors.load_file(str(path)).items()}
    assert loaded["a"].device == torch.device("neuron:1")
    assert all(torch.equal(loaded[k].cpu(), tensors[k].cpu()) for k in tensors)
    model = torch.nn.Linear(3, 2).to("neuron")
    safetensors.save_model(model, str(tmp_path / "m.safetensors"))
    fresh = torch.nn.Linear(3, 2).to("neuron")
    safetensors.load_model(fresh, str(tmp_path / "m.safetensors"))
    assert torch.equal(fresh.weight.cpu(), model.weight.detach().cpu())


def test_deepcopy():
    import copy

    x = torch.randn(3, device="neuron")
    y = copy.deepcopy(x)
    assert y.device == x.device and y.data_ptr() != x.data_ptr() and torch.equal(x, y)
