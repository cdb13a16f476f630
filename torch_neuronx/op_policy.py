"""Where ops run on the emulated NeuronCore: natively, on the CPU-fallback tier, or as host
composites.

The principles are data (op_policy.json); this module turns their patterns into op names.
"""

import fnmatch
import functools
import json
import os

import torch

from torch_neuronx import config

_DEFAULT = os.path.join(os.path.dirname(__file__), "op_policy.json")
# Keys whose kernel an op on neuron tensors runs before the device's fallback is reached.
_DEVICE_GENERIC_KEYS = (
    "PrivateUse1",
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
    "CompositeImplicitAutograd",
)


@functools.lru_cache(maxsize=None)
def policy():
    """The policy document: the built-in one, with the sections of TORCH_NEURONX_OP_POLICY's
    file in place of its own."""
    document = _read(_DEFAULT)
    override = config.get("TORCH_NEURONX_OP_POLICY")
    if override:
        document.update(_read(override))
    return document


def _read(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise RuntimeError(
            f"Cannot read the op policy {path!r} (TORCH_NEURONX_OP_POLICY): {e}. "
            f"Use a JSON file shaped like {_DEFAULT}"
        ) from e


@functools.lru_cache(maxsize=None)
def _kernel_ops():
    """ATen ops that reach a CPU backend kernel, as 'name' or 'name.overload'."""
    names = []
    for full in torch._C._dispatch_get_all_op_names():
        if full.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(
            full, "CPU"
        ):
            names.append(full[len("aten::") :])
    return tuple(sorted(names))


def _select(rule):
    def matches(name, patterns):
        base = name.split(".")[0]
        return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(base, p) for p in patterns)

    include, exclude = rule.get("include", ()), rule.get("exclude", ())
    return [n for n in _kernel_ops() if matches(n, include) and not matches(n, exclude)]


def cpu_fallback_ops_by_principle():
    """{principle: [op names]} for the CPU-fallback tier."""
    return {name: _select(rule) for name, rule in policy()["cpu_fallback"].items()}


def cpu_fallback_ops():
    """The op names that always take the CPU-fallback tier."""
    return sorted({op for ops in cpu_fallback_ops_by_principle().values() for op in ops})


def boolean_mask_ops():
    """Ops that take the CPU-fallback tier when indexed with a boolean mask."""
    return _select(policy()["cpu_fallback_with_boolean_mask"])


def device_selecting_ops():
    """Composites that take the host-kernel path: a decomposition on the device would not
    reproduce their CPU behaviour (they pick a kernel by device type, or pass self as its own
    out)."""
    return list(policy()["device_selecting"]["ops"])


def host_composite_ops():
    """Composites that run their CPU implementation, autograd included, on host views."""
    return list(policy()["host_composites"]["ops"])


def native_namespaces():
    """Namespaces besides aten whose ops run natively (PyTorch's own); ops of other libraries
    that reach a CPU kernel take the CPU-fallback tier."""
    return list(policy()["library_ops"]["native_namespaces"])


def is_library_fallback(op):
    """Whether `op` (an OpOverload) is another library's op that takes the CPU-fallback tier: one
    outside aten and the native namespaces that has a CPU kernel, no neuron kernel and no
    composite one (what Fallback.cpp decides for the ops that reach it)."""
    name = op.name()
    if op.namespace == "aten" or op.namespace in native_namespaces():
        return False
    has_kernel = functools.partial(torch._C._dispatch_has_kernel_for_dispatch_key, name)
    return has_kernel("CPU") and not any(map(has_kernel, _DEVICE_GENERIC_KEYS))


def fusable_ops():
    """The ops adaptive eager execution may fuse, as (names, dtypes): one dtype per name."""
    section = policy()["fusable"]
    pairs = [(op, dtype) for dtype, ops in section.items() if dtype != "why" for op in ops]
    return [op for op, _ in pairs], [dtype for _, dtype in pairs]


def fp8_data_ops():
    """Ops allowed on FP8 neuron tensors (they move data; they do not compute)."""
    return ["aten::" + n for n in _select(policy()["fp8_data_movement"])]
