"""nki stands below torch_neuronx: it imports nothing of it, and `import nki` does not load the
device (a script's CPU run that imports nki must stay a CPU run)."""

import pathlib

from imports import imported_modules
from pyrun import run_python

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_nki_imports_nothing_of_torch_neuronx():
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "nki").rglob("*.py"))
        for name in imported_modules(path)
        if name == "torch_neuronx" or name.startswith("torch_neuronx.")
    ]
    assert offenders == []


def test_import_nki_with_autoload_off_leaves_the_device_unloaded():
    result = run_python(
        "import sys, torch, nki, nki.language, nki.isa\n"
        "import neuronxcc.nki\n"
        "print('torch_neuronx' in sys.modules, torch.accelerator.current_accelerator())\n",
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert result.returncode == 0, result.stderr
    loaded, accelerator = result.stdout.split()
    assert loaded == "False"
    assert accelerator != "neuron"


def test_import_torch_does_not_load_the_simulator():
    result = run_python(
        "import sys, torch\nprint(sorted(m for m in sys.modules if m.startswith('nki')))\n"
    )
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.strip()
        == "['nki', 'nki._src', 'nki._src.device_trace', 'nki._src.platforms']"
    )
