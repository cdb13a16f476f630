"""The public faces are typed: every function of torch.neuron, of ``torch_neuronx.__all__``, of
``nki``, ``nki.language`` and ``nki.isa`` (and every method of their public classes) annotates each
parameter and its return. mypy (``make lint``, pyproject.toml's [tool.mypy]) checks the
annotations against the code; this test checks that none is missing where mypy would not look,
in the internal modules that define the public names."""

import inspect

import pytest
import torch

import nki
import nki.isa
import nki.language
import torch_neuronx

FACES = {
    "torch.neuron": (torch.neuron, torch.neuron.__all__),
    "torch_neuronx": (torch_neuronx, torch_neuronx.__all__),
    "nki": (nki, nki.__all__),
    "nki.language": (nki.language, [n for n in dir(nki.language) if not n.startswith("_")]),
    "nki.isa": (nki.isa, [n for n in dir(nki.isa) if not n.startswith("_")]),
}


def _untyped(function):
    signature = inspect.signature(function)
    missing = [
        name
        for name, parameter in signature.parameters.items()
        if parameter.annotation is inspect.Parameter.empty and name not in ("self", "cls")
    ]
    if signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def _callables(face):
    module, names = FACES[face]
    for name in sorted(names):
        value = getattr(module, name)
        if inspect.isfunction(value):
            yield name, value
        elif inspect.isclass(value) and value.__module__.split(".")[0] in ("torch_neuronx", "nki"):
            for attr, member in vars(value).items():
                member = getattr(member, "__func__", member)
                if inspect.isfunction(member) and (not attr.startswith("_") or attr == "__init__"):
                    yield f"{name}.{attr}", member


@pytest.mark.parametrize("face", sorted(FACES))
def test_public_functions_are_annotated(face):
    untyped = {name: missing for name, f in _callables(face) if (missing := _untyped(f))}
    assert untyped == {}
