"""The map in docs/architecture.md is tested against the code, as _config.py's table is: every op
of the ``neuron`` namespace and every process-wide hook appears in it, and the layers keep their
direction (nothing of the library imports the CLI; torch_neuronx reads nki's private package only
at the two documented device interfaces)."""

import pathlib
import re

import torch
from imports import imported_modules

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAP = (ROOT / "docs" / "architecture.md").read_text()

# What changes state outside our own objects: the kinds of hook the hooks table documents.
HOOK_PATTERNS = [
    r"sys\.meta_path\.insert",
    r"atexit\.register",
    r"os\.register_at_fork",
    r"\.py_impl\(",
    r"os\.environ\[[^]]+\] = ",
    r"register_interface_for_device\(",
    r"rename_privateuse1_backend\(",
    r"_set_multithreading_enabled\(",
    r"^\s*(dynamo_config|torch\._dynamo\.config)\.\w+ = ",
    r"^\s*torch\.[\w.]+ = ",
    r"_rng_tracker = ",
    r"\.__call__ = ",
    r"^\s*tensor_module\.\w+ = ",
    r"SetCPUAllocator\(",
    r"registerProfilerFactory\(",
]


def _section(title):
    start = MAP.index(f"## {title}")
    end = MAP.find("\n## ", start + 1)
    return MAP[start : end if end != -1 else None]


def _product_files():
    for package in ("torch_neuronx", "nki", "neuronxcc"):
        yield from sorted((ROOT / package).rglob("*.py"))
    yield from sorted((ROOT / "csrc").rglob("*.cpp"))


def test_every_neuron_op_is_in_the_map():
    ops = {
        schema.name.split("::", 1)[1].split(".")[0]
        for schema in torch._C._jit_get_all_schemas()
        if schema.name.startswith("neuron::")
    }
    table = _section("Python to C++")
    missing = sorted(op for op in ops if f"`{op}`" not in table)
    assert len(ops) > 30 and missing == []


def test_every_process_wide_hook_is_in_the_map():
    table = _section("Process-wide hooks")
    undocumented = []
    for path in _product_files():
        relative = path.relative_to(ROOT).as_posix()
        named = {relative, relative.removeprefix("torch_neuronx/")}
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith(("#", "//")):
                continue
            hook = next((p for p in HOOK_PATTERNS if re.search(p, line)), None)
            if hook and not any(f"`{name}`" in table for name in named):
                undocumented.append(f"{relative}:{number}: {line.strip()}")
    assert undocumented == []


def test_nothing_of_the_library_imports_the_cli():
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "torch_neuronx").rglob("*.py"))
        if "cli" not in path.relative_to(ROOT / "torch_neuronx").parts[:1]
        and path.name != "__main__.py"
        for name in imported_modules(path)
        if name == "torch_neuronx.cli" or name.startswith("torch_neuronx.cli.")
    ]
    assert offenders == []


def test_torch_neuronx_reads_nki_privates_only_at_the_device_interfaces():
    allowed = {"nki._src.platforms", "nki._src.device_trace"}
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "torch_neuronx").rglob("*.py"))
        for name in imported_modules(path)
        if name.startswith("nki._src") and name not in allowed
    ]
    assert offenders == []


# What each C++ layer may include of csrc: its own files and the layers below it.
CSRC_BELOW = {
    "runtime": {"runtime"},
    "aten": {"aten", "runtime"},
    "api": {"api", "aten", "runtime"},
    "distributed": {"distributed", "runtime"},
}


def test_the_cpp_layers_include_downwards_only():
    csrc = ROOT / "csrc"
    layers = {path.parent.name for path in csrc.rglob("*.[ch]*")}
    assert layers == set(CSRC_BELOW)
    offenders = [
        f"{path.relative_to(ROOT)} includes {header}"
        for path in sorted(csrc.rglob("*.[ch]*"))
        for header in re.findall(r'^#include "(\w+)/', path.read_text(), re.MULTILINE)
        if header not in CSRC_BELOW[path.parent.name]
    ]
    assert offenders == []
