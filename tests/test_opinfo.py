"""PyTorch's own OpInfo samples (float32, forward and backward) on neuron against the CPU."""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.slow
def test_opinfo_sweep_agrees_with_cpu(tmp_path):
    out = tmp_path / "sweep.json"
    # A separate process, so that a crash fails this test instead of ending the run.
    proc = subprocess.run([sys.executable, os.path.join(HERE, "opinfo_sweep.py"), "--json", str(out)],
                          capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, f"the sweep crashed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    stats = json.loads(out.read_text())
    print(proc.stdout)
    assert stats["ops"] > 600 and stats["samples"] > 15000
    assert stats["agree"] / stats["samples"] >= 0.999, "\n".join(stats["failures"][:40])
