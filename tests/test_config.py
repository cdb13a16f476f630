"""One configuration table: every reader agrees on names, defaults and spellings."""

import os

import pytest
import torch
from pyrun import run_python

from torch_neuronx import config, platforms

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_readme_table_is_the_config_table():
    with open(os.path.join(ROOT, "README.md")) as f:
        assert config.markdown_table() in f.read()


def test_cpp_reads_the_variables_of_the_table_with_its_defaults():
    names, defaults = torch.ops.neuron.config_variables()
    table = {v.name: v.default for v in config.VARIABLES.values() if v.reader == "c++"}
    assert dict(zip(names, defaults)) == table


@pytest.mark.parametrize(
    "value, enabled",
    [
        ("0", False),
        ("false", False),
        ("OFF", False),
        ("No", False),
        ("1", True),
        ("yes", True),
        ("True", True),
        ("on", True),
    ],
)
def test_flags_take_the_usual_spellings_in_python_and_cpp(value, enabled):
    code = (
        "import torch, torch_neuronx, os\n"
        "from torch_neuronx import config\n"
        "print(config.get('NEURON_FALLBACK_ENABLED'),\n"
        "      config.get('TORCH_NEURONX_METRICS_ENABLED'))\n"
        "try:\n"
        "    torch.linalg.inv(torch.eye(2, device='neuron'))\n"
        "    print('ran')\n"
        "except RuntimeError as e:\n"
        "    print('refused' if 'NEURON_FALLBACK_ENABLED=0' in str(e) else e)\n"
    )
    result = run_python(
        code, env={"NEURON_FALLBACK_ENABLED": value, "TORCH_NEURONX_METRICS_ENABLED": value}
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(enabled), str(enabled), "ran" if enabled else "refused"]


def test_other_values_are_refused_naming_the_variable():
    code = (
        "import torch\n"
        "try:\n"
        "    torch.linalg.inv(torch.eye(2, device='neuron'))\n"
        "except RuntimeError as e:\n"
        "    print(str(e).splitlines()[0])\n"
    )
    result = run_python(code, env={"NEURON_FALLBACK_ENABLED": "maybe"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "NEURON_FALLBACK_ENABLED='maybe' is not a boolean; use 1/0, true/false, yes/no or on/off"
    ]
    # Read while torch_neuronx loads: loading fails, naming the variable.
    result = run_python("import torch\n", env={"TORCH_NEURONX_METRICS_ENABLED": "2"})
    assert result.returncode != 0
    assert (
        "TORCH_NEURONX_METRICS_ENABLED='2' is not a boolean; use 1/0, true/false, yes/no or on/off"
    ) in result.stderr


@pytest.mark.parametrize(
    "value, name", [("trn2", "trn2"), ("TRN3", "trn3"), ("gen4", "trn3"), ("Gen3", "trn2")]
)
def test_one_platform_name_rule(value, name):
    assert platforms.resolve(value).name == name
    result = run_python(
        "import torch\nprint(torch.neuron.get_device_properties().name)\n",
        env={"NEURON_PLATFORM_TARGET_OVERRIDE": value},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [name]


@pytest.mark.parametrize(
    "value, message",
    [
        ("trn1", "NEURON_PLATFORM_TARGET_OVERRIDE='trn1' is a target for NKI kernels only"),
        ("inf2", "NEURON_PLATFORM_TARGET_OVERRIDE='inf2' is not a Trainium platform"),
    ],
)
def test_platforms_the_device_cannot_emulate_fail_at_first_use_only(value, message):
    code = (
        "import torch\n"
        "print(torch.ones(2).sum().item())\n"  # CPU code keeps working
        "torch.ones(2, device='neuron')\n"
    )
    result = run_python(code, env={"NEURON_PLATFORM_TARGET_OVERRIDE": value})
    assert result.stdout.split() == ["2.0"]
    assert result.returncode != 0 and message in result.stderr


def test_nki_reads_the_platform_variable_with_the_tables_default():
    from nki._src import platforms as nki_platforms

    variable = config.VARIABLES[nki_platforms.VARIABLE]
    assert variable.reader == "nki"
    assert variable.default == nki_platforms.DEFAULT
