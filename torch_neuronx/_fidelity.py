"""How faithfully torchneuron implements what AWS documents for TorchNeuron: every documented
name and environment variable, each "works", "works differently" (how) or "hardware-only"
(why). docs/fidelity.md is ``markdown()``; tests/test_fidelity.py checks each row against the
code (names resolve, variables are read or listed as hardware-only, nothing is left out), so
the table cannot drift from what the code does."""

import dataclasses

from torch_neuronx import _config as config
from torch_neuronx.neuron import DEVICE_API

WORKS = "works"
DIFFERENT = "works differently"
HARDWARE = "hardware-only"


@dataclasses.dataclass(frozen=True)
class Row:
    name: str  # a dotted Python path, an environment variable, or a behaviour in words
    kind: str  # "name", "variable" or "behaviour"
    status: str
    note: str
    page: str  # AWS's documentation page stating it (path under the docs' root)
    test: str = ""  # for a behaviour: the test that shows it (path::function)


_DEVICE_MODULE = "torch/reference/api/torch-neuron-module.html"
_PROFILING = "tools/neuron-explorer/how-to-profile-pytorch.html"
_COMPILE = "torch/compile/reference-torch-compile.html"
_ENV = "torch/reference/env-vars.html"
_MEMORY = "torch/reference/guidelines-memory-management.html"
_NKI = "torch/guides/how-to-work-with-nki.html"


def _names():
    rows = [
        Row(
            f"torch_neuronx.{name}",
            "name",
            WORKS,
            f"the same object as `torch.neuron.{name}`",
            _DEVICE_MODULE,
        )
        for name in DEVICE_API
    ]
    rows += [
        Row(
            "torch.neuron.get_dynamo_metrics",
            "name",
            WORKS,
            "one entry per Dynamo graph, with compile time, cache hits and recompiles",
            _DEVICE_MODULE,
        ),
        Row("torch.neuron.reset_dynamo_metrics", "name", WORKS, "", _DEVICE_MODULE),
        Row("torch_neuronx.get_dynamo_metrics", "name", WORKS, "", _COMPILE),
        Row(
            "torch_neuronx.profiling.NeuronConfig",
            "name",
            DIFFERENT,
            "an `experimental_config` "
            "choosing the neuron rows of torch.profiler's own trace; no NEFF/NTFF files",
            _PROFILING,
        ),
        Row(
            "torch_neuronx.profiling.ProfileMode.DEVICE",
            "name",
            WORKS,
            "the kernel rows: eager ops, compiled graphs, NKI kernels, collectives",
            _PROFILING,
        ),
        Row(
            "torch_neuronx.profiling.ProfileMode.RUNTIME",
            "name",
            WORKS,
            "the transfer rows",
            _PROFILING,
        ),
        Row(
            "torch_neuronx.profiling.ProfileMode.CPU_UTIL",
            "name",
            DIFFERENT,
            "PyTorch's CPU rows, which every profile has; no cpu_util.pb",
            _PROFILING,
        ),
        Row(
            "torch_neuronx.profiling.ProfileMode.HOST_MEMORY",
            "name",
            DIFFERENT,
            "what `profile_memory=True` records; no host_mem.pb",
            _PROFILING,
        ),
        Row(
            "torch_neuronx.profiling.NeuronProfiler.export_trace",
            "name",
            DIFFERENT,
            "writes "
            "`<host>_pid_<pid>/<timestamp>/trace.json` and `neuron_session.json` per rank "
            "(docs/profiling.md); no .pb or .ntff files",
            _PROFILING,
        ),
        Row(
            "torch_neuronx.metrics.is_enabled",
            "name",
            DIFFERENT,
            "counting always runs; the flag chooses whether the metric tables are written at exit",
            _ENV,
        ),
        Row("torch_neuronx.metrics.set_enabled", "name", DIFFERENT, "as `is_enabled`", _ENV),
        Row("torch_neuronx.metrics.get_counter_names", "name", WORKS, "", _ENV),
        Row("torch_neuronx.metrics.get_counter_value", "name", WORKS, "", _ENV),
        Row(
            "torch_neuronx.metrics.get_metric_names",
            "name",
            WORKS,
            "compile-time metrics (`DynamoCompilationTime`, `NeffCompilationTime`)",
            _ENV,
        ),
        Row("torch_neuronx.metrics.get_metric_data", "name", WORKS, "", _ENV),
        Row("torch_neuronx.metrics.report", "name", WORKS, "", _ENV),
        Row("torch_neuronx.metrics.report_filtered", "name", WORKS, "", _ENV),
        Row("torch_neuronx.metrics.clear_counters", "name", WORKS, "", _ENV),
        Row("torch_neuronx.metrics.clear_metrics", "name", WORKS, "", _ENV),
        Row("torch_neuronx.metrics.clear_all", "name", WORKS, "", _ENV),
        Row("torch_neuronx.metrics.get_compilation_metrics", "name", WORKS, "", _ENV),
        Row("torch_neuronx.nki_hop.nki_op", "name", WORKS, "", _NKI),
        Row("torch_neuronx.nki_hop.wrap_nki", "name", WORKS, "", _NKI),
        Row("torch_neuronx.get_fallback_ops", "name", WORKS, "", _DEVICE_MODULE),
        Row("torch_neuronx.get_executed_ops", "name", WORKS, "", _DEVICE_MODULE),
        Row("torch_neuronx.clear_op_tracking", "name", WORKS, "", _DEVICE_MODULE),
    ]
    return rows


_PROFILER_PARAMETERS = {
    "modes": (WORKS, "defaults to `[DEVICE, RUNTIME]`"),
    "profile_output_dir": (WORKS, "where `export_trace` writes"),
    "max_events_per_nc": (WORKS, "keeps the first that many device events of each core"),
    "capture_enabled_for_nc": (WORKS, 'keeps the rows of the named cores ("0,1,2-5")'),
    "neff_cache_dir": (DIFFERENT, "recorded in `neuron_session.json`; there are no NEFFs to copy"),
    "precache_node_info": (DIFFERENT, "recorded; there is no per-NEFF metadata to precache"),
}

# TorchNeuron's documented variables; the note of one we read is its config.VARIABLES doc, of a
# hardware-only one its config.HARDWARE_ONLY reason.
DOCUMENTED_VARIABLES = (
    "NEURON_PLATFORM_TARGET_OVERRIDE",
    "NEURON_LOGICAL_NC_CONFIG",
    "NEURON_RT_VIRTUAL_CORE_SIZE",
    "NEURON_RT_VISIBLE_CORES",
    "NEURON_RT_NUM_CORES",
    "NEURON_FALLBACK_ENABLED",
    "TORCH_NEURONX_ENABLE_CONCATENATION",
    "TORCH_NEURONX_ENABLE_PROLOGUE",
    "TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT",
    "TORCH_NEURONX_LOG_LEVEL",
    "TORCH_NEURONX_LOG_FILE",
    "TORCH_NEURONX_ENABLE_STACK_TRACE",
    "TORCH_NEURONX_METRICS_ENABLED",
    "TORCH_NEURONX_ENABLED_METRIC_TABLES",
    "TORCH_NEURONX_METRICS_DIR",
    "TORCH_NEURONX_NEFF_CACHE_DIR",
    "TORCH_NEURONX_NEFF_DISABLE_CACHE",
    "TORCH_NEURONX_DISABLE_NEFF_CACHE",
    "NEURON_COMPILATION_CACHE_MAX_SIZE_MB",
    "NEURON_COMPILATION_CACHE_MAX_ENTRIES",
    "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT",
    "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION",
    "TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY",
    "TORCH_NEURONX_DEBUG_DIR",
    "TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS",
    "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS",
    "TORCH_NEURONX_COMPLEX_DECOMPOSE",
    *config.HARDWARE_ONLY,
)


def _variables():
    rows = []
    for name in DOCUMENTED_VARIABLES:
        if name in config.HARDWARE_ONLY:
            rows.append(Row(name, "variable", HARDWARE, config.HARDWARE_ONLY[name], _ENV))
            continue
        var = config.VARIABLES[name]
        status = DIFFERENT if var.reader == "none" else WORKS
        rows.append(Row(name, "variable", status, var.doc, _ENV))
    return rows


_BEHAVIOURS = (
    Row(
        "another PrivateUse1 backend imported first",
        "behaviour",
        WORKS,
        "`import torch_neuronx` leaves the registration to it and creates no `torch.neuron`",
        _DEVICE_MODULE,
        "tests/test_device_api.py::test_another_privateuse1_backend_imported_first_keeps_the_device",
    ),
    Row(
        "a forked child of an initialised parent",
        "behaviour",
        WORKS,
        "its first device use raises the bad-fork error (use the spawn start method)",
        _DEVICE_MODULE,
        "tests/neuron/test_device.py::"
        "test_forked_child_of_an_initialised_parent_gets_the_bad_fork_error",
    ),
    Row(
        "allocator size classes",
        "behaviour",
        WORKS,
        "under 16 MiB rounded up (256 B minimum, quarter powers of two from 1 MiB); 16 MiB and "
        "larger not rounded",
        _MEMORY,
        "tests/neuron/test_memory.py::test_size_classes_of_the_memory_management_guide",
    ),
    Row(
        "FP8 casts in eager",
        "behaviour",
        DIFFERENT,
        "casts to and from `float8_e4m3fn`/`float8_e5m2` and FP8 data movement are bit-identical "
        "to the CPU's; FP8 arithmetic is refused, naming NKI kernels as the way",
        "about-neuron/arch/neuron-features/data-types.html",
        "tests/test_exclusions.py::test_fp8_storage_works_and_compute_is_refused",
    ),
    Row(
        "`sdpa_kernel(SDPBackend.OVERRIDEABLE)` on neuron tensors",
        "behaviour",
        WORKS,
        "selects TorchNeuron's fused attention; here the CPU's fused (flash) or math kernel "
        "computes it, in eager mode",
        _DEVICE_MODULE,
        "tests/test_device_api.py::test_sdpa_kernel_overrideable_selects_the_fused_attention",
    ),
    Row(
        "compile artifacts: one job directory per graph",
        "behaviour",
        DIFFERENT,
        "with TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1, `proc_<rank>/<job>/` holds the FX "
        "graphs, `compiler_args.txt` and the generated code; no StableHLO, NEFF or "
        "log-neuron-cc.txt (docs/compile.md)",
        "compiler/about-compiler-artifacts.html",
        "tests/_dynamo/test_semantics.py::test_debug_dir_keeps_graphs_and_code_only_when_asked",
    ),
    Row(
        "distribution `torch-neuronx`",
        "behaviour",
        DIFFERENT,
        "version `2.14.3.0+torchneuron.<ours>`: the local label says it is this emulator "
        "(docs/package.md)",
        "torch/troubleshooting.html",
        "tests/test_package.py::test_distribution_name_and_version",
    ),
)


def rows() -> list[Row]:
    """Every row of the table."""
    parameters = [
        Row(f"torch_neuronx.profiling.NeuronConfig({param}=...)", "name", status, note, _PROFILING)
        for param, (status, note) in _PROFILER_PARAMETERS.items()
    ]
    return _names() + parameters + _variables() + list(_BEHAVIOURS)


def markdown() -> str:
    """docs/fidelity.md."""
    out = [
        "# Fidelity to TorchNeuron's documentation",
        "",
        "Each name, variable and behaviour AWS documents for TorchNeuron (Neuron 2.34), as it "
        "stands here: **works** (as documented), **works differently** (how), or "
        "**hardware-only** (why it has no effect on the emulator). Generated from "
        "`torch_neuronx/_fidelity.py` (`python -m torch_neuronx._fidelity > docs/fidelity.md`); "
        "tests/test_fidelity.py checks every row against the code and this file against the "
        "table. Pages are under https://awsdocs-neuron.readthedocs-hosted.com/en/latest/.",
        "",
    ]
    headings = {"name": "Names", "variable": "Environment variables", "behaviour": "Behaviours"}
    for kind, heading in headings.items():
        out += [f"## {heading}", "", "| Name | Status | How / why | Page |", "|---|---|---|---|"]
        for r in rows():
            if r.kind == kind:
                shown = f"`{r.name}`" if kind != "behaviour" else r.name
                out.append(f"| {shown} | {r.status} | {r.note} | `{r.page}` |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown(), end="")
