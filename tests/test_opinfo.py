"""PyTorch's own OpInfo samples (float32, forward and backward) on neuron against the CPU, bit
for bit; opinfo_sweep.py lists the few samples that cannot match, and why."""

import json
import os
import subprocess
import sys

import opinfo_sweep
import pytest
from opinfo_sweep import INEXACT, NARROWED, NARROWED_INSIDE


def _sweep(tmp_path, ops=None, env=None):
    out = tmp_path / "sweep.json"
    command = [sys.executable, opinfo_sweep.__file__, "--json", str(out)]
    # A separate process, so that a crash fails this test instead of ending the run.
    proc = subprocess.run(
        command + (["--ops", ",".join(ops)] if ops else []),
        capture_output=True,
        text=True,
        timeout=1500,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, (
        f"the sweep crashed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    )
    print(proc.stdout)
    return json.loads(out.read_text())


@pytest.mark.slow
def test_opinfo_sweep_matches_cpu_bit_for_bit(tmp_path):
    stats = _sweep(tmp_path)
    assert stats["ops"] > 600 and stats["samples"] > 15000
    assert not stats["failures"], "\n".join(stats["failures"][:40])
    assert stats["samples"] == (
        stats["exact"] + stats["inexact"] + stats["excluded"] + stats["both_error"]
    )


def test_narrowing_is_the_whole_reason_for_the_listed_differences(tmp_path):
    # With full 64-bit emulation every sample listed as narrowed matches the CPU, so the sweep
    # reports each such entry as no longer needed (and finds nothing else).
    narrowed = {
        name: expected
        for name, (reason, expected) in INEXACT.items()
        if reason in (NARROWED, NARROWED_INSIDE)
    }
    stats = _sweep(
        tmp_path,
        ops={name.split("[")[0] for name in narrowed},
        env={"TORCH_NEURONX_64BIT": "native"},
    )
    assert stats["inexact"] == 0
    assert sorted(stats["failures"]) == sorted(
        f"{name}: 0 inexact samples, {expected} listed ({INEXACT[name][0]})"
        for name, expected in narrowed.items()
    )
