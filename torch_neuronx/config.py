"""Every environment variable torchneuron reads: one table, typed accessors.

The C++ runtime reads the variables marked ``reader="c++"`` itself (csrc/runtime/Config.h,
kept equal to this table by a test); the README's table is generated from this one
(``markdown_table``) and a test keeps it current.
"""

import dataclasses
import os

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclasses.dataclass(frozen=True)
class Variable:
    name: str
    kind: str  # flag, int, float, text or choice
    default: str  # as text; "" means unset
    doc: str  # one line, Markdown
    shown: str = ""  # the README's default column where the default is not a value
    choices: tuple = ()
    # python, c++, nki (nki/_src/platforms.py, below torch_neuronx), torch (read by PyTorch),
    # or none (TorchNeuron's, with no effect here)
    reader: str = "python"


VARIABLES = {
    v.name: v
    for v in (
        Variable(
            "NEURON_PLATFORM_TARGET_OVERRIDE",
            "choice",
            "trn2",
            "Emulated platform: `trn2` (96 GiB HBM per chip) or `trn3` (144 GiB); NKI kernels "
            "also take `trn1`.",
            choices=("trn1", "trn2", "trn3", "gen2", "gen3", "gen4"),
            reader="nki",
        ),
        Variable(
            "NEURON_LOGICAL_NC_CONFIG",
            "int",
            "2",
            "Logical NeuronCore size: LNC=2 gives 4 cores per chip, LNC=1 gives 8.",
            reader="c++",
        ),
        Variable(
            "NEURON_RT_VISIBLE_CORES",
            "text",
            "",
            "Visible cores, e.g. `0-1` or `2` or `0,2`.",
            shown="all",
            reader="c++",
        ),
        Variable(
            "NEURON_RT_NUM_CORES",
            "int",
            "",
            "Number of visible cores to use.",
            shown="all",
            reader="c++",
        ),
        Variable(
            "TORCH_DEVICE_BACKEND_AUTOLOAD",
            "flag",
            "1",
            "`0` stops `import torch` from loading torchneuron.",
            reader="torch",
        ),
        Variable(
            "NEURON_FALLBACK_ENABLED",
            "flag",
            "1",
            "`0` makes CPU-fallback ops raise instead of running on the host.",
            reader="c++",
        ),
        Variable(
            "TORCH_NEURONX_OP_POLICY",
            "text",
            "",
            "Path of a JSON file whose sections replace those of `torch_neuronx/op_policy.json`.",
            shown="built in",
        ),
        Variable(
            "TORCH_NEURONX_64BIT",
            "choice",
            "narrow",
            "`narrow`: 64-bit values held at 32-bit precision / int32 range; `native`: full "
            "64-bit; `error`: refuse 64-bit floats.",
            choices=("narrow", "native", "error"),
            reader="c++",
        ),
        Variable(
            "TORCH_NEURONX_RNG",
            "choice",
            "device",
            "Where random ops on neuron tensors draw from: `device`, each core's own generator; "
            "`cpu`, the CPU's default generator, so a neuron run draws the numbers a CPU run "
            "draws (`torchneuron parity` sets it; see docs/cli.md).",
            choices=("device", "cpu"),
            reader="c++",
        ),
        Variable(
            "TORCH_NEURONX_ENABLE_CONCATENATION",
            "flag",
            "0",
            "`1` turns on adaptive eager execution (experimental): elementwise ops are queued and "
            "fused, bit-identically; see docs/adaptive_eager.md.",
            reader="c++",
        ),
        Variable(
            "TORCH_NEURONX_ENABLE_PROLOGUE",
            "flag",
            "1",
            "With adaptive eager on, transposed and other strided views join fused runs, read "
            "chunk by chunk instead of copied first.",
            reader="c++",
        ),
        Variable(
            "TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT",
            "int",
            "64",
            "With adaptive eager on, the most ops one queue holds before it runs.",
            reader="c++",
        ),
        Variable(
            "TORCH_NEURONX_LOG_LEVEL",
            "text",
            "WARNING",
            "Level of the `torch_neuronx` logger (`DEBUG`..`ERROR` or 3..0).",
        ),
        Variable(
            "TORCH_NEURONX_METRICS_ENABLED",
            "flag",
            "0",
            "`1` writes a CSV of every counter at exit.",
        ),
        Variable("TORCH_NEURONX_METRICS_DIR", "text", "", "Where that CSV goes.", shown="temp dir"),
        Variable(
            "TORCH_NEURONX_NEFF_CACHE_DIR",
            "text",
            "~/.cache/torchneuron",
            "Persistent cache of compiled graphs.",
        ),
        Variable(
            "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT",
            "float",
            "600",
            "Seconds a process waits for another compiling the same graph.",
        ),
        Variable(
            "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION",
            "flag",
            "1",
            "`0`: a graph that fails to compile runs eagerly, with a warning.",
        ),
        Variable(
            "TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY",
            "flag",
            "0",
            "`1`: CPU inputs to a compiled function raise instead of being read.",
        ),
        Variable(
            "TORCH_NEURONX_DEBUG_DIR",
            "text",
            "/tmp/neuron_backend",
            "Where FX graphs and generated code go.",
        ),
        Variable(
            "TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS",
            "flag",
            "0",
            "`1` keeps them after the run.",
        ),
        Variable(
            "NKI_SIMULATOR",
            "text",
            "",
            "NKI kernels always run on the (validating) simulator here.",
            shown="unset",
            reader="none",
        ),
    )
}


def text(name):
    """The variable's value as text, or its default when unset or empty."""
    return os.environ.get(name, "").strip() or VARIABLES[name].default


def get(name):
    """The variable's value, typed by its kind; a value of the wrong form raises, naming it."""
    var = VARIABLES[name]
    value = text(name)
    if var.kind == "flag":
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        raise ValueError(
            f"{name}={value!r} is not a boolean; use 1/0, true/false, yes/no or on/off"
        )
    if var.kind == "choice" and value.lower() not in var.choices:
        raise ValueError(f"{name}={value!r} is not one of {', '.join(var.choices)}")
    if var.kind in ("int", "float") and value:
        try:
            return int(value) if var.kind == "int" else float(value)
        except ValueError:
            raise ValueError(
                f"{name}={value!r} is not a number; use e.g. {name}={var.default or 1}"
            ) from None
    return value.lower() if var.kind == "choice" else value


def markdown_table():
    """The README's table of environment variables."""
    rows = ["| Variable | Default | Effect |", "|---|---|---|"]
    for var in VARIABLES.values():
        rows.append(f"| `{var.name}` | {var.shown or f'`{var.default}`'} | {var.doc} |")
    return "\n".join(rows)
