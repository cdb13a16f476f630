import pathlib

import pytest
import torch

from torch_neuronx.neuron import _omitted as omitted

DOCS = pathlib.Path(__file__).parents[2] / "docs" / "device_module.md"


@pytest.mark.parametrize("name", sorted(torch.cuda.__all__))
def test_every_cuda_name_is_present_or_left_out_on_purpose(name):
    present = hasattr(torch.neuron, name)
    assert present or name in omitted.OMITTED, f"{name!r} is neither in torch.neuron nor left out"


def test_left_out_names_are_absent_and_say_why():
    for name, why in omitted.OMITTED.items():
        assert not hasattr(torch.neuron, name)
        assert name not in torch.neuron.__all__ and name not in dir(torch.neuron)
        with pytest.raises(AttributeError) as info:
            getattr(torch.neuron, name)
        message = str(info.value)
        assert f"torch.neuron has no {name!r}" in message
        assert why in message and "docs/device_module.md" in message


def test_docs_table_is_the_data():
    assert omitted.markdown_table() in DOCS.read_text()
    assert set(omitted.OMITTED) <= set(omitted.DOCUMENTED)


def test_all_names_resolve():
    for name in torch.neuron.__all__:
        assert getattr(torch.neuron, name) is not None, name
    assert len(set(torch.neuron.__all__)) == len(torch.neuron.__all__)


def test_memory_names_come_from_memory_module():
    for name in torch.neuron.memory.__all__:
        assert getattr(torch.neuron, name) is getattr(torch.neuron.memory, name)
        assert name in torch.neuron.__all__


def test_unknown_name_is_a_plain_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        torch.neuron.no_such_name
