"""Where ops run on the emulated NeuronCore: natively, on the CPU-fallback tier, or as host
composites.

The principles are data (op_policy.json); this module turns their patterns into op names.
"""

import fnmatch
import functools
import json
import os

import torch

from torch_neuronx import _config as config

_DEFAULT = os.path.join(os.path.dirname(__file__), "op_policy.json")


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


# Namespaces named native at run time (add_native_namespaces), after the policy was read.
_added_native_namespaces: list[str] = []


def native_namespaces():
    """Namespaces besides aten whose ops run natively (PyTorch's own, and those added with
    add_native_namespaces); ops of other libraries that reach a CPU kernel take the
    CPU-fallback tier."""
    named = list(policy()["library_ops"]["native_namespaces"])
    return named + [ns for ns in _added_native_namespaces if ns not in named]


def add_native_namespaces(namespaces: list[str]) -> None:
    """Runs the ops of these library namespaces natively on neuron tensors from now on (ops
    already run take the new tier too). For a library loaded after ``import torch``, whose CPU
    kernels stand for the device kernels a Trainium plugin brings (vLLM's ``_C``); the policy
    file (TORCH_NEURONX_OP_POLICY) is read at import, before any plugin loads."""
    if isinstance(namespaces, str) or not all(isinstance(n, str) and n for n in namespaces):
        raise TypeError(
            f"add_native_namespaces takes a list of namespace names, such as ['_C'], "
            f"not {namespaces!r}"
        )
    if "aten" in namespaces:
        raise ValueError("aten's ops are routed by the op policy's principles, not by namespace")
    torch.ops.neuron.add_native_namespaces(list(namespaces))
    _added_native_namespaces.extend(n for n in namespaces if n not in _added_native_namespaces)


def route_device_kernels(ops: list[str]) -> int:
    """Gives other libraries' ops ('namespace::name' or 'namespace::name.overload') a neuron
    kernel that runs their CPU implementation on device memory through the host-kernel path
    (counted as native calls, inside the core's scope, under the 64-bit policy). For ops
    registered for every device, which would otherwise read device memory by raw pointer.
    Returns how many it registered; ops that already have a neuron kernel keep it. The kernel
    has no autograd formula (a composite's decomposition no longer runs): for inference kernels,
    such as vLLM's attention."""
    if isinstance(ops, str) or not all(isinstance(o, str) for o in ops):
        raise TypeError(
            f"route_device_kernels takes a list of op names, such as ['_C::rms_norm'], not {ops!r}"
        )
    return torch.ops.neuron.route_device_kernels(list(ops))


def is_library_fallback(op):
    """Whether `op` (an OpOverload) is another library's op that takes the CPU-fallback tier: one
    outside aten and the native namespaces that has a CPU kernel, no neuron kernel and no
    composite one. The runtime's rule (Fallback.cpp), asked, not restated."""
    return torch.ops.neuron.takes_library_fallback(op.name())


def fusable_ops():
    """The ops adaptive eager execution may fuse, as (names, dtypes): one dtype per name."""
    section = policy()["fusable"]
    pairs = [(op, dtype) for dtype, ops in section.items() if dtype != "why" for op in ops]
    return [op for op, _ in pairs], [dtype for _, dtype in pairs]


def fp8_data_ops():
    """Ops allowed on FP8 neuron tensors (they move data; they do not compute)."""
    return ["aten::" + n for n in _select(policy()["fp8_data_movement"])]
