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
            "NEURON_RT_VIRTUAL_CORE_SIZE",
            "int",
            "",
            "The runtime's name for the logical NeuronCore size (as `NEURON_LOGICAL_NC_CONFIG`; "
            "both set must agree).",
            shown="unset",
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
        Variable(
            "TORCH_NEURONX_ENABLED_METRIC_TABLES",
            "text",
            "counters",
            "Comma-separated tables written at exit: `counters`, `graph_stats` (one row per "
            "compiled graph).",
        ),
        Variable("TORCH_NEURONX_METRICS_DIR", "text", "", "Where that CSV goes.", shown="temp dir"),
        Variable(
            "TORCH_NEURONX_LOG_FILE",
            "text",
            "",
            "The `torch_neuronx` logger writes to this file (appending) instead of stderr.",
            shown="stderr",
        ),
        Variable(
            "TORCH_NEURONX_NEFF_CACHE_DIR",
            "text",
            "~/.cache/torchneuron",
            "Persistent cache of compiled graphs.",
        ),
        Variable(
            "TORCH_NEURONX_NEFF_DISABLE_CACHE",
            "flag",
            "0",
            "`1`: compiled graphs are neither read from nor written to the persistent cache.",
        ),
        Variable(
            "TORCH_NEURONX_DISABLE_NEFF_CACHE",
            "flag",
            "0",
            "The same as `TORCH_NEURONX_NEFF_DISABLE_CACHE`.",
        ),
        Variable(
            "NEURON_COMPILATION_CACHE_MAX_SIZE_MB",
            "int",
            "",
            "The persistent cache's size limit: the least recently used graphs go first.",
            shown="no limit",
        ),
        Variable(
            "NEURON_COMPILATION_CACHE_MAX_ENTRIES",
            "int",
            "",
            "The most compiled graphs the persistent cache keeps (least recently used go first).",
            shown="no limit",
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
            "TORCH_NEURONX_ENABLE_STACK_TRACE",
            "flag",
            "0",
            "`1`: each warning of the `torch_neuronx` logger (CPU fallbacks, narrowing, ...) "
            "carries the Python stack that led to it.",
        ),
        Variable(
            "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS",
            "flag",
            "0",
            "TorchNeuron's `1` stops a failing device kernel from retrying on the CPU; here a "
            "kernel's error always raises, so both values behave as `1`.",
            reader="none",
        ),
        Variable(
            "TORCH_NEURONX_COMPLEX_DECOMPOSE",
            "flag",
            "1",
            "TorchNeuron decomposes complex ops into real ones; here complex ops run as the CPU "
            "computes them, with or without it.",
            reader="none",
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


# TorchNeuron's variables that concern hardware, the compiler or the runtime the emulator does not
# have: (name, why it has no effect here). Setting one logs one line at import; `torchneuron
# info` and `check` list them.
HARDWARE_ONLY = {
    "NEURON_CC_FLAGS": "there is no neuronx-cc: graphs compile through Inductor's CPU backend",
    "NEURON_COMPILER_OPT_LEVEL": "there is no neuronx-cc to take an optimisation level",
    "TORCH_NEURONX_ENABLE_HOST_CC": "collectives already run on the host (the c10d backend)",
    "NEURON_RT_ENABLE_HOST_CC": "collectives already run on the host (the c10d backend)",
    "NEURON_RT_ROOT_COMM_ID": "the c10d backend rendezvouses through torch.distributed's store",
    "COLLECTIVE_BUCKETSIZE_IN_MB": "collectives are not bucketed by a device runtime here",
    "COLLECTIVE_MIN_BUCKETS": "collectives are not bucketed by a device runtime here",
    "NEURON_USE_SPLIT_ALLGATHER": "all-gathers run as one host operation",
    "NEURON_USE_SPLIT_REDUCE_SCATTER": "reduce-scatters run as one host operation",
    "TORCH_NEURONX_ENABLE_ASYNC_NRT": "there is no NRT: kernels run synchronously on the host",
    "NEURON_LAUNCH_BLOCKING": "kernels always run synchronously here",
    "TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD": "adaptive eager runs a queue when it is "
    "full or read (TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT), not at a low-water mark",
    "TORCH_NEURONX_MLIR_ATEN_OPS": "ops do not lower to MLIR/StableHLO here",
    "TORCH_NEURONX_ENABLE_STABLEHLO": "ops do not lower to MLIR/StableHLO here",
    "TORCH_NEURONX_HLO_CACHE_DIR": "there is no HLO: nothing to cache",
    "TORCH_NEURONX_DUMP": "there is no StableHLO or NEFF to dump; TORCH_NEURONX_DEBUG_DIR holds "
    "the FX graphs and generated code",
    "TORCH_NEURONX_DUMP_HLO_PB": "there is no HLO to dump",
    "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR": "there is one cache tier (TORCH_NEURONX_NEFF_CACHE_DIR), "
    "already on local disk",
    "NKI_COMPILE_CACHE_URL": "NKI kernels run on the simulator and compile nothing to cache",
    "NEURON_ENHANCED_ERROR_HANDLING": "there is no NRT error state to enhance",
    "NEURON_ERROR_DUMP_DIR": "there is no NRT to dump its state",
    "NEURON_DUMP_EXECUTION_ON_ERROR": "there is no NRT execution to dump",
    "NEURON_RT_INSPECT_ENABLE": "there is no NRT profiler; use torch.profiler (docs/profiling.md)",
    "NEURON_RT_INSPECT_OUTPUT_DIR": "there is no NRT profiler; use torch.profiler",
    "NEURON_RT_INSPECT_DEVICE_PROFILE": "there is no NRT profiler; use torch.profiler",
    "NEURON_FRAMEWORK_DEBUG": "the profile's names and stacks come from torch.profiler already",
    "XLA_IR_DEBUG": "TorchNeuron does not use XLA",
    "XLA_HLO_DEBUG": "TorchNeuron does not use XLA",
}


def hardware_only_set() -> dict[str, str]:
    """The hardware-only variables set in the environment, as {name: value}."""
    return {n: os.environ[n] for n in HARDWARE_ONLY if os.environ.get(n, "").strip()}


def logical_core_size() -> int:
    """NEURON_LOGICAL_NC_CONFIG, or NEURON_RT_VIRTUAL_CORE_SIZE when that alone is set (the C++
    runtime refuses the two set to different values)."""
    if text("NEURON_RT_VIRTUAL_CORE_SIZE") and not os.environ.get("NEURON_LOGICAL_NC_CONFIG"):
        return get("NEURON_RT_VIRTUAL_CORE_SIZE")
    return get("NEURON_LOGICAL_NC_CONFIG")


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
