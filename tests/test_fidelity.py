"""docs/fidelity.md, the table of TorchNeuron's documented names, variables and behaviours, is
generated from torch_neuronx/_fidelity.py, and every row holds of the code: the names resolve,
the variables are read (config.VARIABLES) or listed as hardware-only (config.HARDWARE_ONLY),
and each behaviour names a test that exists."""

import importlib
import inspect
import os
import re

import pytest

from torch_neuronx import _config as config
from torch_neuronx import _fidelity as fidelity
from torch_neuronx.neuron import DEVICE_API
from torch_neuronx.profiling import NeuronConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = fidelity.rows()


def _resolve(dotted):
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attr in parts[split:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def test_the_doc_is_the_table():
    with open(os.path.join(ROOT, "docs", "fidelity.md")) as f:
        assert f.read() == fidelity.markdown()


def test_statuses_and_no_duplicates():
    assert {r.status for r in ROWS} <= {fidelity.WORKS, fidelity.DIFFERENT, fidelity.HARDWARE}
    names = [r.name for r in ROWS]
    assert len(names) == len(set(names))
    for r in ROWS:
        assert r.page.endswith(".html")
        assert r.status == fidelity.WORKS or r.note, f"{r.name}: say how or why"


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind == "name"], ids=lambda r: r.name)
def test_each_documented_name_resolves(row):
    parameter = re.fullmatch(r"(.*)\((\w+)=\.\.\.\)", row.name)
    if parameter:
        assert _resolve(parameter.group(1)) is NeuronConfig
        assert parameter.group(2) in inspect.signature(NeuronConfig.__init__).parameters
    else:
        assert _resolve(row.name) is not None


def test_every_device_api_name_and_neuron_config_parameter_is_listed():
    names = {r.name for r in ROWS}
    assert {f"torch_neuronx.{n}" for n in DEVICE_API} <= names
    parameters = set(inspect.signature(NeuronConfig.__init__).parameters) - {"self", "experimental"}
    assert {f"torch_neuronx.profiling.NeuronConfig({p}=...)" for p in parameters} <= names


def test_variables_are_read_or_hardware_only():
    rows = {r.name: r for r in ROWS if r.kind == "variable"}
    assert set(config.HARDWARE_ONLY) <= set(rows)
    for name, row in rows.items():
        if row.status == fidelity.HARDWARE:
            assert row.note == config.HARDWARE_ONLY[name]
        else:
            var = config.VARIABLES[name]
            assert row.note == var.doc
            assert (row.status == fidelity.DIFFERENT) == (var.reader == "none")
    # Our own variables that TorchNeuron does not document are not in the table; every one of
    # TorchNeuron's we read is.
    ours = {
        "TORCH_NEURONX_64BIT",
        "TORCH_NEURONX_RNG",
        "TORCH_NEURONX_OP_POLICY",
        "TORCH_DEVICE_BACKEND_AUTOLOAD",
        "NKI_SIMULATOR",
    }
    assert set(config.VARIABLES) - set(rows) == ours


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind == "behaviour"], ids=lambda r: r.name)
def test_each_behaviour_names_its_test(row):
    path, function = row.test.split("::")
    with open(os.path.join(ROOT, path)) as f:
        assert f"def {function}(" in f.read()
