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


@pytest.mark.slow
@pytest.mark.parametrize("sweep", SWEEPS)
def test_opinfo_sweep_matches_cpu_bit_for_bit(sweep):
    report, _ = run_coverage(*SWEEPS[sweep])
    summary = report["summary"]
    print({k: v for k, v in summary.items() if not isinstance(v, dict)})
    assert summary["entries"] > 500 and summary["samples"] > 10000
    problems = unexplained(report)
    assert not problems, "\n".join(problems[:40])
    assert summary["samples"] == sum(
        summary[k] for k in ("passed", "fallback", "excluded", "failed", "crashed")
    )


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
        assert entry["bit_identical"] == entry["samples"], (name, entry["notes"])
