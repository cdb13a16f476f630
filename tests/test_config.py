"""One configuration table: every reader agrees on names, defaults and spellings."""

import os

import pytest
import torch
from pyrun import run_python

from torch_neuronx import _config as config
from torch_neuronx import _platforms as platforms

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
        "from torch_neuronx import _config as config\n"
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


def test_hardware_only_variables_are_data_apart_from_the_table():
    """AWS's environment-variable reference (awsdocs-neuron .../torch/reference/env-vars.html)
    names variables for the compiler, NRT and collectives that the emulator has none of: each
    is listed once, with why, and none is also a variable we read."""
    assert not set(config.HARDWARE_ONLY) & set(config.VARIABLES)
    for name, reason in config.HARDWARE_ONLY.items():
        assert name == name.upper() and reason and not reason.endswith(".")
    assert {"NEURON_CC_FLAGS", "TORCH_NEURONX_ENABLE_HOST_CC", "NEURON_RT_ROOT_COMM_ID"} <= set(
        config.HARDWARE_ONLY
    )


def test_a_hardware_only_variable_set_logs_one_line():
    code = "import torch\ntorch.ones(1, device='neuron')"
    out = run_python(
        code, env={"NEURON_CC_FLAGS": "--auto-cast=none", "COLLECTIVE_MIN_BUCKETS": "2"}
    )
    lines = [line for line in out.stderr.splitlines() if "no effect on the emulator" in line]
    assert len(lines) == 1, out.stderr
    assert "NEURON_CC_FLAGS=--auto-cast=none" in lines[0] and "COLLECTIVE_MIN_BUCKETS=2" in lines[0]
    quiet = run_python(code, env={"NEURON_CC_FLAGS": ""})
    assert "no effect on the emulator" not in quiet.stderr


@pytest.mark.parametrize(
    "env, count",
    [
        ({"NEURON_RT_VIRTUAL_CORE_SIZE": "1"}, 8),
        ({"NEURON_RT_VIRTUAL_CORE_SIZE": "2"}, 4),
        ({"NEURON_RT_VIRTUAL_CORE_SIZE": "1", "NEURON_LOGICAL_NC_CONFIG": "1"}, 8),
    ],
)
def test_virtual_core_size_is_the_logical_core_size(env, count):
    """Neuron Explorer's profiling launch sets NEURON_RT_VIRTUAL_CORE_SIZE=2, the runtime's
    name for the LNC (awsdocs-neuron .../tools/neuron-explorer/how-to-profile-pytorch.html)."""
    code = (
        "import torch\n"
        "p = torch.neuron.get_device_properties(0)\n"
        "print(torch.neuron.device_count(), p.multi_processor_count)"
    )
    out = run_python(code, env=env)
    assert out.stdout.split() == [str(count), str(8 // count)], out.stderr


def test_virtual_core_size_and_lnc_that_disagree_are_refused():
    code = "import torch\ntorch.ones(1, device='neuron')"
    out = run_python(
        code, env={"NEURON_RT_VIRTUAL_CORE_SIZE": "1", "NEURON_LOGICAL_NC_CONFIG": "2"}
    )
    assert out.returncode != 0
    assert "NEURON_LOGICAL_NC_CONFIG=2 and NEURON_RT_VIRTUAL_CORE_SIZE=1 disagree" in out.stderr


def test_log_file_and_stack_traces(tmp_path):
    log = tmp_path / "neuron.log"
    code = (
        "import torch\n"
        "def caller_of_the_fallback():\n"
        "    return torch.nonzero(torch.ones(3, device='neuron'))\n"
        "print(caller_of_the_fallback().tolist())\n"
    )
    env = {"TORCH_NEURONX_LOG_FILE": str(log), "TORCH_NEURONX_ENABLE_STACK_TRACE": "1"}
    out = run_python(code, env=env)
    assert out.stdout.strip() == "[[0], [1], [2]]", out.stderr
    text = log.read_text()
    assert "CPU fallback" in text and "torch_neuronx" not in out.stderr
    assert "Stack (most recent call last)" in text and "caller_of_the_fallback" in text
    plain = run_python(code, env={"TORCH_NEURONX_LOG_FILE": str(tmp_path / "plain.log")})
    assert "Stack (most recent call last)" not in (tmp_path / "plain.log").read_text()
    assert plain.returncode == 0
