"""The README's code and the examples run as written."""

import math
import os
import re

from pyrun import run_python, run_script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme_code(heading):
    with open(os.path.join(ROOT, "README.md")) as f:
        section = f.read().split(f"\n## {heading}\n", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_ten_lines():
    code = _readme_code("Ten lines")
    assert len([line for line in code.splitlines() if line.strip()]) == 10
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    loss, allocated, name = out.stdout.split()
    assert math.isfinite(float(loss)) and int(allocated) > 0 and name == "trn2"


def test_demo_loss_curves_are_identical():
    out = run_script(
        os.path.join(ROOT, "examples", "demo.py"), env={"DEMO_STEPS": "10"}, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "loss curves are IDENTICAL (bit for bit)" in out.stdout
