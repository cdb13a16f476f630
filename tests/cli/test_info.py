"""`torchneuron info` against what the runtime itself reports in the same environment: the
platform, the logical cores and their HBM, the visible cores, the versions, the compile cache
and the variables set."""

import importlib.metadata
import json
import os
import platform
import subprocess
import sys

import pytest
import torch

from torch_neuronx import _config as config
from torch_neuronx._platforms import PLATFORMS

# What the runtime reports in a fresh process: (platform, [(logical core, HBM)]) per core.
RUNTIME = """
import json, torch
count = torch.neuron.device_count()
cores = [torch.neuron.get_device_properties(i) for i in range(count)]
print(json.dumps([cores[0].name, [[c.physical_core, c.total_memory] for c in cores]]))
"""


def _run(args, env):
    # Only the variables under test: the suite's own settings of the others stay out.
    clean = {k: v for k, v in os.environ.items() if k not in config.VARIABLES}
    clean.update(env)
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=300, env=clean
    )


def _info(env, *options):
    return _run(["-m", "torch_neuronx", "info", *options], env)


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"NEURON_RT_VISIBLE_CORES": "1-2"},
        {"NEURON_RT_VISIBLE_CORES": "0,3"},
        {
            "NEURON_PLATFORM_TARGET_OVERRIDE": "trn3",
            "NEURON_LOGICAL_NC_CONFIG": "1",
            "NEURON_RT_NUM_CORES": "3",
        },
    ],
)
def test_info_reports_the_platform_and_cores_the_runtime_has(env):
    proc = _info(env, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    device = json.loads(proc.stdout)["device"]
    runtime = _run(["-c", RUNTIME], env)
    assert runtime.returncode == 0, runtime.stderr[-2000:]
    name, cores = json.loads(runtime.stdout)
    chip = PLATFORMS[name]
    lnc = int(env.get("NEURON_LOGICAL_NC_CONFIG", "2"))
    assert name == env.get("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
    assert (device["platform"], device["lnc"]) == (name, lnc)
    assert device["physical_cores"] == chip.physical_cores
    assert device["hbm_per_chip"] == chip.hbm_per_chip
    assert device["logical_cores"] == chip.physical_cores // lnc
    assert device["hbm_per_logical_core"] == chip.hbm_per_chip // device["logical_cores"]
    assert [(c["logical_core"], c["hbm"]) for c in device["visible_cores"]] == [
        tuple(core) for core in cores
    ]
    assert [c["device"] for c in device["visible_cores"]] == [
        f"neuron:{i}" for i in range(len(cores))
    ]
    for core in device["visible_cores"]:
        first = core["logical_core"] * lnc
        assert core["physical_cores"] == list(range(first, first + lnc))


def test_the_markdown_shows_the_visible_cores_and_the_variables_set():
    env = {"NEURON_RT_VISIBLE_CORES": "1-2", "TORCH_NEURONX_64BIT": "native"}
    proc = _info(env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "- Platform: **trn2** (NeuronCore-v3), 1 chip, 8 physical NeuronCores" in proc.stdout
    assert "- Visible cores: **2** (NEURON_RT_VISIBLE_CORES=1-2)" in proc.stdout
    assert "64-bit policy: native" in proc.stdout
    assert "| neuron:0 | 1 | 2-3 | 24.0 GiB |" in proc.stdout
    assert "| neuron:1 | 2 | 4-5 | 24.0 GiB |" in proc.stdout
    assert "| `NEURON_RT_VISIBLE_CORES` | `1-2` |" in proc.stdout
    assert "| `TORCH_NEURONX_64BIT` | `native` |" in proc.stdout


def test_versions_and_the_variables_set():
    env = {"NEURON_FALLBACK_ENABLED": "0", "TORCH_NEURONX_LOG_LEVEL": "ERROR"}
    data = json.loads(_info(env, "--json").stdout)
    assert data["schema"] == "torchneuron.info/1"
    assert data["versions"] == {
        "torchneuron": importlib.metadata.version("torch-neuronx"),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    assert data["device"]["cpu_fallback"] is False
    assert {e["name"]: e["value"] for e in data["environment"]} == env
    for entry in data["environment"]:
        assert entry["effect"] == config.VARIABLES[entry["name"]].doc


@pytest.mark.parametrize(
    "env, problem",
    [
        ({"NEURON_PLATFORM_TARGET_OVERRIDE": "trn1"}, "'trn1' is a target for NKI kernels only"),
        ({"NEURON_RT_VISIBLE_CORES": "7"}, "names core 7, but the emulated chip has 4"),
        ({"NEURON_LOGICAL_NC_CONFIG": "3"}, "NEURON_LOGICAL_NC_CONFIG=3 is not supported"),
    ],
)
def test_a_device_the_environment_breaks_is_an_error_naming_the_variable(env, problem):
    proc = _info(env, "--json")
    assert proc.returncode == 1
    assert problem in json.loads(proc.stdout)["device"]["error"]


def test_the_markdown_says_why_there_is_no_device():
    proc = _info({"NEURON_PLATFORM_TARGET_OVERRIDE": "trn1"})
    assert proc.returncode == 1
    assert (
        "**No usable neuron device**: NEURON_PLATFORM_TARGET_OVERRIDE='trn1' is a target for NKI "
        "kernels only" in proc.stdout
    )


def test_a_malformed_variable_is_an_error_naming_it():
    proc = _info({"NEURON_FALLBACK_ENABLED": "maybe"}, "--json")
    assert proc.returncode == 1
    (entry,) = json.loads(proc.stdout)["environment"]
    assert entry["error"].startswith("NEURON_FALLBACK_ENABLED='maybe' is not a boolean")


@pytest.mark.graph_calls("compiled")
def test_the_compile_cache_location_entries_and_size(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(cache))
    empty = json.loads(_info({"TORCH_NEURONX_NEFF_CACHE_DIR": str(cache)}, "--json").stdout)
    assert empty["compile_cache"] == {
        "path": str(cache),
        "exists": False,
        "entries": 0,
        "bytes": 0,
    }
    compiled = torch.compile(lambda x: x * 2 + 1, backend="neuron")
    x = torch.randn(8, device="neuron")
    assert torch.equal(compiled(x).cpu(), x.cpu() * 2 + 1)
    data = json.loads(_info({"TORCH_NEURONX_NEFF_CACHE_DIR": str(cache)}, "--json").stdout)
    files = [os.path.join(d, f) for d, _, names in os.walk(cache) for f in names]
    assert data["compile_cache"] == {
        "path": str(cache),
        "exists": True,
        "entries": len([f for f in files if f.endswith("MANIFEST.json")]),
        "bytes": sum(os.lstat(f).st_size for f in files),
    }
    assert data["compile_cache"]["entries"] == 1


def test_hardware_only_variables_are_listed_with_why():
    """AWS's env-vars reference names variables for Trainium's compiler and runtime; info
    lists the ones set, with the reason they have no effect here."""
    env = {"NEURON_CC_FLAGS": "--model-type=transformer", "TORCH_NEURONX_LOG_LEVEL": "ERROR"}
    data = json.loads(_info(env, "--json").stdout)
    rows = {e["name"]: e for e in data["environment"]}
    assert rows["NEURON_CC_FLAGS"]["value"] == "--model-type=transformer"
    assert rows["NEURON_CC_FLAGS"]["effect"] == (
        "no effect here: " + config.HARDWARE_ONLY["NEURON_CC_FLAGS"]
    )
    text = _info(env).stdout
    assert "| `NEURON_CC_FLAGS` | `--model-type=transformer` | no effect here:" in text
