"""Shows the emulated Trainium device: platform, cores, HBM, versions, compile cache, variables."""

import importlib.metadata
import json
import os
import platform as host
import sys

import torch

from torch_neuronx import _config as config
from torch_neuronx._dynamo import config as compile_config
from torch_neuronx._platforms import PLATFORMS
from torch_neuronx.cli import _report as report

SCHEMA = "torchneuron.info/1"
EPILOG = """\
Exit status: 0, or 1 when the environment does not describe a usable device (the error says
which variable is wrong). The JSON schema (torchneuron.info/1) is in docs/cli.md."""


def add_arguments(parser):
    """Adds this subcommand's options."""
    parser.epilog = EPILOG
    parser.add_argument(
        "--json", action="store_true", help="print the information as JSON instead of Markdown"
    )


def run(args):
    """Prints the information; returns the exit code."""
    data = describe()
    sys.stdout.write(json.dumps(data, indent=2) + "\n" if args.json else markdown(data))
    broken = "error" in data["device"] or any("error" in e for e in data["environment"])
    return 1 if broken else 0


def versions():
    """The versions of torchneuron (the torch-neuronx distribution), torch and Python."""
    return {
        "torchneuron": importlib.metadata.version("torch-neuronx"),
        "torch": torch.__version__,
        "python": host.python_version(),
    }


def device():
    """The emulated platform and the cores this process sees, or the configuration error."""
    try:
        count = torch.neuron.device_count()
        cores = [torch.neuron.get_device_properties(i) for i in range(max(count, 1))]
    except (RuntimeError, ValueError) as e:
        return {"error": str(e).strip().splitlines()[0]}
    chip = PLATFORMS[cores[0].name]
    lnc = config.logical_core_size()
    logical = chip.physical_cores // lnc
    return {
        "platform": chip.name,
        "neuron_core": f"NeuronCore-v{chip.core_version}",
        "chips": 1,
        "physical_cores": chip.physical_cores,
        "hbm_per_chip": chip.hbm_per_chip,
        "lnc": lnc,
        "logical_cores": logical,
        "hbm_per_logical_core": cores[0].total_memory,
        "visible_cores": [
            {
                "device": f"neuron:{p.index}",
                "logical_core": p.physical_core,
                "physical_cores": list(range(p.physical_core * lnc, (p.physical_core + 1) * lnc)),
                "hbm": p.total_memory,
            }
            for p in cores
        ],
        "cpu_fallback": _valid("NEURON_FALLBACK_ENABLED"),
        "policy_64bit": _valid("TORCH_NEURONX_64BIT"),
    }


def _valid(name):
    """The variable's value, or None when it is malformed (environment() says how)."""
    try:
        return config.get(name)
    except ValueError:
        return None


def compile_cache():
    """Where the persistent compile cache is, how many complete graphs it holds and its size."""
    from torch_neuronx._dynamo.cache import MANIFEST

    path = compile_config.cache_dir()
    entries, size = 0, 0
    for parent, _, files in os.walk(path):
        entries += MANIFEST in files
        for name in files:
            try:
                size += os.lstat(os.path.join(parent, name)).st_size
            except OSError:
                continue
    return {"path": path, "exists": os.path.isdir(path), "entries": entries, "bytes": size}


def environment():
    """The torchneuron variables set in the environment, with their effect (TorchNeuron's
    hardware-only ones: why they have none); a value of the wrong form carries the error it
    raises."""
    rows = []
    for var in config.VARIABLES.values():
        value = os.environ.get(var.name, "").strip()
        if not value:
            continue
        row = {"name": var.name, "value": value, "default": var.default, "effect": var.doc}
        try:
            config.get(var.name)
        except ValueError as e:
            row["error"] = str(e)
        rows.append(row)
    for name, value in config.hardware_only_set().items():
        reason = config.HARDWARE_ONLY[name]
        rows.append(
            {"name": name, "value": value, "default": "", "effect": f"no effect here: {reason}"}
        )
    return rows


def describe():
    """Everything `torchneuron info` shows, as the JSON document."""
    return {
        "schema": SCHEMA,
        "versions": versions(),
        "device": device(),
        "compile_cache": compile_cache(),
        "environment": environment(),
    }


def _shown(value, true="on", false="off"):
    if value is None:
        return "invalid (see Environment)"
    if isinstance(value, bool):
        return true if value else false
    return value


def markdown(data):
    """The information for people."""
    v, d, cache = data["versions"], data["device"], data["compile_cache"]
    lines = [
        "# torchneuron info",
        "",
        f"torchneuron {v['torchneuron']}, torch {v['torch']}, Python {v['python']}. "
        "The NeuronCores are emulated on the host.",
        "",
    ]
    if "error" in d:
        lines += [f"**No usable neuron device**: {d['error']}", ""]
    else:
        visible = len(d["visible_cores"])
        chosen = [
            f"{name}={os.environ[name].strip()}"
            for name in ("NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES")
            if os.environ.get(name, "").strip()
        ]
        which = ", ".join(chosen) or "all"
        lines += [
            f"- Platform: **{d['platform']}** ({d['neuron_core']}), {d['chips']} chip, "
            f"{d['physical_cores']} physical NeuronCores, {report.size(d['hbm_per_chip'])} HBM",
            f"- Logical NeuronCore config (LNC): **{d['lnc']}**, so {d['logical_cores']} logical "
            f"cores of {d['lnc']} physical core{'s' if d['lnc'] > 1 else ''}, "
            f"{report.size(d['hbm_per_logical_core'])} HBM each",
            f"- Visible cores: **{visible}** ({which})",
            f"- CPU fallback: {_shown(d['cpu_fallback'], 'enabled', 'disabled')}; "
            f"64-bit policy: {_shown(d['policy_64bit'])}",
            "",
        ]
        rows = [
            (
                c["device"],
                c["logical_core"],
                "-".join(str(i) for i in (c["physical_cores"][0], c["physical_cores"][-1]))
                if len(c["physical_cores"]) > 1
                else c["physical_cores"][0],
                report.size(c["hbm"]),
            )
            for c in d["visible_cores"]
        ]
        lines += [report.table(("Device", "Logical core", "Physical cores", "HBM"), rows)]
    state = (
        f"{cache['entries']} compiled graphs, {report.size(cache['bytes'])}"
        if cache["exists"]
        else "not created yet"
    )
    lines += [f"Compile cache: `{cache['path']}` ({state})", ""]
    env = data["environment"]
    if env:
        rows = [
            (
                f"`{e['name']}`",
                f"`{e['value']}`",
                f"**invalid**: {e['error']}" if "error" in e else e["effect"],
            )
            for e in env
        ]
        lines += ["Environment:", "", report.table(("Variable", "Value", "Effect"), rows)]
    else:
        lines += ["Environment: no torchneuron variables set (all defaults).", ""]
    return "\n".join(lines).rstrip("\n") + "\n"
