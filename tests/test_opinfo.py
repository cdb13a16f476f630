"""PyTorch's own OpInfo samples (float32, forward, and forward and backward) on neuron against
the CPU, bit for bit, through `torchneuron coverage`; opinfo_sweep.py lists the few samples
that cannot match, and why."""

import pytest
import torch
from opinfo_sweep import (
    INEXACT,
    NARROWED,
    NARROWED_INSIDE,
    QUANTILE_FLOAT64,
    expected_count,
    run_coverage,
    unexplained,
)

SWEEPS = {"forward": [], "grad": ["--grad"]}
# What each sweep comes to, per torch lane (README.md states the 2.14 forward sweep's). A
# forward sample is a function, in-place or out= call; a grad sample a function call. A sweep
# not recorded here is still held to the lists of opinfo_sweep.py; record its totals (the
# summary the test prints) when it is first run on a lane.
TOTALS = {
    "2.14": {
        "forward": {
            "samples": 26572,
            "passed": 22234,
            "bit_identical": 21904,
            "within_tolerance": 49,
            "same_error": 281,
            "fallback": 4279,
            "excluded": 59,
            "failed": 0,
            "crashed": 0,
            "entries": 673,
            "not_swept": 30,
        },
        "grad": {
            "samples": 14040,
            "passed": 11724,
            "bit_identical": 11692,
            "within_tolerance": 31,
            "same_error": 1,
            "fallback": 2271,
            "excluded": 45,
            "failed": 0,
            "crashed": 0,
            "entries": 541,
            "not_swept": 162,
        },
    },
    "2.13": {
        "forward": {
            "samples": 26664,
            "passed": 22230,
            "bit_identical": 21901,
            "within_tolerance": 49,
            "same_error": 280,
            "fallback": 4375,
            "excluded": 59,
            "failed": 0,
            "crashed": 0,
            "entries": 672,
            "not_swept": 30,
        },
        "grad": {
            "samples": 14106,
            "passed": 11576,
            "bit_identical": 11548,
            "within_tolerance": 27,
            "same_error": 1,
            "fallback": 2324,
            "excluded": 206,
            "failed": 0,
            "crashed": 0,
            "entries": 540,
            "not_swept": 162,
        },
    },
}
# The samples whose match may move between bit-identical and within tolerance from run to run.
MOVING = ("bit_identical", "within_tolerance")


def _lane():
    return ".".join(torch.__version__.split(".")[:2])


@pytest.mark.slow
@pytest.mark.parametrize("sweep", SWEEPS)
def test_opinfo_sweep_matches_cpu_bit_for_bit(sweep):
    report, _ = run_coverage(*SWEEPS[sweep])
    summary = report["summary"]
    print({k: v for k, v in summary.items() if not isinstance(v, dict)})
    problems = unexplained(report)
    assert not problems, "\n".join(problems[:40])
    expected = TOTALS.get(_lane(), {}).get(sweep)
    if expected is None:
        return
    got = {k: summary[k] for k in expected}
    assert {k: v for k, v in got.items() if k not in MOVING} == {
        k: v for k, v in expected.items() if k not in MOVING
    }
    # Entries listed with a count of None change from run to run (linalg.lstsq).
    unstable = sum(
        e["samples"]
        for e in report["entries"]
        if expected_count(INEXACT.get(e["name"], ("", {}))[1], sweep, torch.__version__) is None
    )
    assert sum(got[k] for k in MOVING) == sum(expected[k] for k in MOVING)
    assert abs(got["within_tolerance"] - expected["within_tolerance"]) <= unstable, got


@pytest.mark.parametrize("sweep", SWEEPS)
def test_narrowing_is_the_whole_reason_for_the_listed_differences(sweep):
    # With full 64-bit emulation every sample listed as narrowed matches the CPU bit for bit.
    narrowed = {
        name
        for name, (reason, counts) in INEXACT.items()
        if reason in (NARROWED, NARROWED_INSIDE, QUANTILE_FLOAT64)
        and expected_count(counts, sweep, torch.__version__)
    }
    report, _ = run_coverage(
        *SWEEPS[sweep],
        "--ops",
        ",".join(narrowed),
        env={"TORCH_NEURONX_64BIT": "native"},
    )
    swept = {entry["name"]: entry for entry in report["entries"]}
    assert narrowed <= set(swept)
    for name in narrowed:
        entry = swept[name]
        # In-place calls whose float64 result cannot be cast to their float32 input raise, as
        # on the CPU; every other sample matches bit for bit.
        assert entry["within_tolerance"] == entry["failed"] == 0, (name, entry["notes"])
        assert entry["bit_identical"] + entry["same_error"] == entry["samples"], name
