"""The test suite's view of `torchneuron coverage` on PyTorch's OpInfo samples: how to run it,
and the few samples that cannot match the CPU bit for bit, with the reason for each.

Every sample either matches the CPU exactly, or is listed below: a deliberate exclusion (it
must raise the documented error) or a known inexact result (it must still agree within
torch.testing's float32 tolerance). The expected number of such samples is listed per entry and
sweep ("forward", or "grad" for `--grad`), so a new difference fails the check, and so does one
that went away. A sweep that an entry does not list must have none; None is a number that
changes from run to run, and {"2.13": n, "2.14": m} one that differs between torch versions."""

import json
import os
import subprocess
import sys

SUPPORT = os.path.dirname(os.path.abspath(__file__))

# Tensor.<dtype>(memory_format=torch.channels_last) and Tensor.to(..., channels_last).
_CONVERSIONS = {"bfloat16", "cdouble", "cfloat", "chalf", "double", "float", "half"}
_INTEGER_CONVERSIONS = {"bool", "byte", "char", "int", "long", "short"}
# entry: (exclusion, {sweep: number of its samples that must raise it}). A forward sweep calls
# each sample as a function, and in place and with out= where the op has those variants.
EXCLUDED = {
    **{name: ("channels_last", {"forward": 1, "grad": 1}) for name in _CONVERSIONS},
    **{name: ("channels_last", {"forward": 1}) for name in _INTEGER_CONVERSIONS},
    "to": ("channels_last", {"forward": 12, "grad": 12}),
    # The samples are channels_last-strided, and max_unpool2d's derivative asks for
    # grad.contiguous(indices.suggest_memory_format()) before torch 2.14.
    "nn.functional.max_unpool2d": ("channels_last", {"grad": {"2.13": 144, "2.14": 0}}),
    "nn.functional.max_unpool2d[grad]": ("channels_last", {"grad": {"2.13": 17, "2.14": 0}}),
    "sparse.mm[reduce]": ("sparse", {"forward": 16, "grad": 16}),
    "sparse.sampled_addmm": ("sparse", {"forward": 16, "grad": 8}),
    "to_sparse": ("sparse", {"forward": 2, "grad": 2}),
}
NARROWED = (
    "the op computes in float64 as asked; neuron holds float64 at float32 precision "
    "(TORCH_NEURONX_64BIT=narrow, docs/limitations.md)"
)
NARROWED_INSIDE = (
    "the op accumulates in float64, float32's accumulation type on the CPU and so "
    "on neuron, which holds it at float32 precision (docs/limitations.md)"
)
QUANTILE_FLOAT64 = (
    "from torch 2.14 it computes some steps in float64, which neuron holds at float32 "
    "precision (docs/limitations.md)"
)
# entry: (why some samples cannot match the CPU bit for bit, {sweep: how many}).
INEXACT = {
    "float_power": (NARROWED, {"forward": 16, "grad": 8}),
    "full_like": (NARROWED, {"forward": 2}),
    "new_full": (NARROWED, {"forward": 2}),
    "rand_like": (NARROWED, {"forward": 2}),
    "randn_like": (NARROWED, {"forward": 2}),
    "log_softmax[with_dtype]": (NARROWED, {"forward": 10, "grad": 5}),
    "softmax[with_dtype]": (NARROWED, {"forward": 10, "grad": 5}),
    "nn.functional.softmin[with_dtype]": (NARROWED, {"forward": 5, "grad": 5}),
    # renorm_backward's norms: at::toAccumulateType(Float, device) is Double off CUDA and MPS.
    "renorm": (NARROWED_INSIDE, {"grad": 4}),
    "quantile": (QUANTILE_FLOAT64, {"grad": {"2.13": 0, "2.14": 2}}),
    "nanquantile": (QUANTILE_FLOAT64, {"grad": {"2.13": 0, "2.14": 2}}),
    "linalg.lstsq": (
        "the CPU result itself depends on uninitialised memory (LAPACK gelsy on "
        "an underdetermined system; pytorch/pytorch#71222)",
        {"forward": None, "grad": None},
    ),
    "linalg.lstsq[grad_oriented]": ("as linalg.lstsq", {"forward": None, "grad": None}),
}


# entry: (an open difference from the CPU, a bug to fix, {sweep: number of its failed samples}).
# Listed so that the sweep still fails on any other; docs/limitations.md names them.
KNOWN_FAILURES = {}
# Why an entry is not swept, when the reason is PyTorch's own declaration of the entry (its CPU
# tests skip the same): jiterator ops are CUDA kernels, and OpInfo lists no float32 (or no
# float32 gradient) on the CPU for some entries.
NOT_SWEPT_BY_DECLARATION = (
    "CUDA only (jiterator)",
    "no float32 on the CPU",
    "no float32 gradient on the CPU",
)
# entry: why its sample generator cannot run here. Any other entry whose generator fails was
# not examined, and fails the sweep.
NOT_SWEPT = {}


def run_coverage(*args, env=None, timeout=1500):
    """Runs `torchneuron coverage ARGS --json` in a fresh interpreter; returns the report and
    the finished process. A non-zero exit status is a result (failed samples), not an error."""
    environment = {**os.environ, **(env or {})}
    # The workers can import the test helpers (plugins), as the tests themselves can.
    environment["PYTHONPATH"] = os.pathsep.join(
        p for p in (SUPPORT, environment.get("PYTHONPATH")) if p
    )
    proc = subprocess.run(
        [sys.executable, "-m", "torch_neuronx", "coverage", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
    )
    assert proc.returncode in (0, 1), (
        f"torchneuron coverage ended with status {proc.returncode}:\n{proc.stderr[-3000:]}"
    )
    return json.loads(proc.stdout), proc


def expected_count(counts, sweep, torch_version):
    """How many samples a list above expects in `sweep` ("forward" or "grad") on that torch."""
    count = counts.get(sweep, 0)
    return count[".".join(torch_version.split(".")[:2])] if isinstance(count, dict) else count


def unexplained(report):
    """The samples of a coverage report of OpInfo in float32 that the lists above do not
    explain, and the listed numbers that the report does not match, one line each."""
    sweep = "grad" if report["settings"]["grad"] else "forward"
    version = report["versions"]["torch"]

    def listed(counts):
        return expected_count(counts, sweep, version)

    problems = []
    for item in report["not_swept"]:
        name, reason = item["name"], item["reason"]
        why = NOT_SWEPT.get(name)
        if reason not in NOT_SWEPT_BY_DECLARATION and not (why and why in reason):
            problems.append(f"{name}: not swept, and not listed: {reason}")
    for entry in report["entries"]:
        name = entry["name"]
        known, counts = KNOWN_FAILURES.get(name, (None, {}))
        failing = [n for n in entry["notes"] if n["outcome"] in ("failed", "crashed")]
        if known is not None and len(failing) == listed(counts):
            failing = []
        for note in failing:
            problems.append(f"{name}#{note['sample']}: {note['outcome']}: {note['detail']}")
        exclusion, counts = EXCLUDED.get(name, (None, {}))
        for other in set(entry["excluded_by"]) - {exclusion}:
            problems.append(f"{name}: {entry['excluded_by'][other]} samples excluded as {other}")
        expected = listed(counts)
        got = entry["excluded_by"].get(exclusion, 0)
        if expected is not None and got != expected:
            problems.append(f"{name}: {got} excluded samples, {expected} listed ({exclusion})")
        reason, counts = INEXACT.get(name, ("not listed", {}))
        expected = listed(counts)
        got = sum(1 for note in entry["notes"] if note["match"] == "within_tolerance")
        if expected is not None and got != expected:
            problems.append(f"{name}: {got} inexact samples, {expected} listed ({reason})")
    return problems
