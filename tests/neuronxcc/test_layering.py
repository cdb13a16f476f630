"""neuronxcc, the pre-0.2 NKI API, stands on nki: on its public modules and on the one internal
interface nki keeps for it (nki._src.legacy_api, nki/README.md), and on nothing of torch_neuronx."""

import ast
import pathlib

from imports import imported_modules

ROOT = pathlib.Path(__file__).resolve().parents[2]
INTERFACE = "nki._src.legacy_api"


def _imports():
    for path in sorted((ROOT / "neuronxcc").rglob("*.py")):
        for name in imported_modules(path):
            yield path.relative_to(ROOT), name


def test_neuronxcc_reads_nki_privates_only_through_the_interface():
    offenders = [
        f"{path} imports {name}"
        for path, name in _imports()
        if name.startswith("nki._src") and name != INTERFACE
    ]
    assert offenders == []


def test_neuronxcc_imports_nothing_of_torch_neuronx():
    offenders = [
        f"{path} imports {name}"
        for path, name in _imports()
        if name == "torch_neuronx" or name.startswith("torch_neuronx.")
    ]
    assert offenders == []


def test_neuronxcc_uses_every_name_of_the_interface():
    # The interface is what neuronxcc needs and no more: a name it stops importing goes.
    import nki._src.legacy_api as interface

    imported = {
        alias.name
        for path in sorted((ROOT / "neuronxcc").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == INTERFACE
        for alias in node.names
    }
    assert imported == set(interface.__all__)
