"""The code generator: each AOTAutograd graph becomes fused native code for the emulated core.

Inductor's CPU C++ backend generates the code; device memory is host memory, so the kernels
run directly on it. We compile for ``cpu`` on zero-copy aliases of the neuron tensors rather
than registering ``neuron`` as an Inductor device. Registration needs a wrapper-codegen
subclass that overrides private methods, plus global scheduler settings
(``loop_ordering_after_fusion``), and Inductor has many more ``device.type == "cpu"`` checks
that decide fusion, vectorisation and fallbacks, so it breaks quietly from one release to the
next (docs/architecture.md). The CPU path is the one Inductor tests upstream; what we
add is small and ours: the graph's device constants become ``cpu``, and the runtime in
``runtime.py`` moves tensors across at the graph boundary.
"""

import contextlib
import functools
import hashlib
import operator
import time

import torch
from torch._dynamo.utils import counters
from torch._functorch import config as functorch_config
from torch._guards import TracingContext, detect_fake_mode
from torch._inductor import config as inductor_config
from torch._inductor.compile_fx import compile_fx, compile_fx_inner
from torch._inductor.custom_graph_pass import get_custom_graph_passes
from torch.fx.node import map_aggregate
from torch.utils._python_dispatch import _disable_current_modes

from torch_neuronx import _op_policy as op_policy
from torch_neuronx._dynamo import (
    artifacts,
    cache,
    cpu_scalars,
    device_ops,
    flex_attention,
    int_ranges,
    metrics,
    toolchain,
)
from torch_neuronx._dynamo.runtime import HOST, HostGraph

# Part of every cache key: change it when the same graph would compile differently.
CODEGEN_VERSION = "4"
_64BIT = (torch.float64, torch.complex128, torch.int64)
# Inductor's random ops take 64-bit seeds from these; they are generator state, which eager
# keeps in the core's generator, not values on the device.
_RNG_SEED_OPS = (
    torch.ops.prims.inductor_seeds.default,
    torch.ops.prims.inductor_lookup_seed.default,
)
_CPU = torch.device("cpu")
_CPU_SCALARS_TO_DEVICE = cpu_scalars.CpuScalarsToDevice()


def compile_graph(gm, example_inputs, options, graph_metrics):
    """Compiles a Dynamo graph: AOTAutograd splits it, each part is compiled natively."""
    inner = functools.partial(_compile_part, options=options, graph_metrics=graph_metrics)
    # AOTAutograd's own cache would hand back Inductor's graphs without passing them through
    # _compile_part; the persistent cache sits one level down instead. The backward graph is
    # compiled now rather than at the first backward, so that its failures are compile
    # failures (which fallback execution covers) and its time counts as compile time.
    joint_passes = (
        _CPU_SCALARS_TO_DEVICE,
        *get_custom_graph_passes(inductor_config.joint_custom_pre_pass),
    )
    with (
        functorch_config.patch(enable_autograd_cache=False, force_non_lazy_backward_lowering=True),
        inductor_config.patch(joint_custom_pre_pass=joint_passes),
        toolchain.probes_skipped(),
    ):
        return compile_fx(gm, example_inputs, inner_compile=inner)


def _compile_part(gm, example_inputs, *, options, graph_metrics, **inductor_kwargs):
    start = time.perf_counter()
    if inductor_kwargs.get("is_backward"):
        kind = "backward"
    elif inductor_kwargs.get("is_inference"):
        kind = "inference"
    else:
        kind = "forward"
    placements = _placements(gm, kind)
    flex_attention.legalize(gm, example_inputs)
    # AOTAutograd calls us inside its fake mode; the graph's constants are real tensors.
    with _disable_current_modes():
        _retarget_to_host(gm)
        _apply_64bit_policy(gm)
        host_inputs = _host_inputs(example_inputs)
        key = _cache_key(gm, host_inputs, kind, inductor_kwargs)
    name = f"{options.model_name}-{kind}-{key[:24]}"
    with cache.open_entry(name, key) as (entry, warm):
        hits = counters["inductor"]["fxgraph_cache_hit"]
        with entry.as_inductor_cache():
            compiled = compile_fx_inner(gm, host_inputs, **inductor_kwargs)
        hit = warm and counters["inductor"]["fxgraph_cache_hit"] > hits
        entry.adopt(_kernel_libraries(compiled))
        entry.commit()
    artifacts.save_graph(graph_metrics.job, kind, gm)
    artifacts.save_code(graph_metrics.job, kind, compiled)
    graph_metrics.subgraphs.append(
        metrics.SubgraphMetrics(kind, key, hit, time.perf_counter() - start)
    )
    return HostGraph(compiled, placements, _cpu_fallback_ops(gm), name, _draws_random(gm))


def _placements(gm, kind):
    """Where each output of the graph must end up (see runtime.HostGraph)."""
    outputs = next(iter(reversed(gm.graph.nodes))).args[0]
    returned = len(outputs)
    if kind == "forward":
        # The rest are activations saved for the backward graph, which reads them on the host.
        returned = TracingContext.get().fw_metadata.num_forward_returns
    placements = []
    for i, node in enumerate(outputs):
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        device = value.device if isinstance(value, torch.Tensor) else None
        if i >= returned:
            placements.append(HOST)
        elif device is not None and device.type == "neuron":
            placements.append(device)
        elif kind == "backward":
            # A gradient must be on its input's device, which is the host here.
            placements.append(HOST)
        else:
            # A result computed from CPU inputs: those count as copied to the device.
            placements.append("current")
    return placements


def _to_cpu(value):
    if isinstance(value, torch.device) and value.type == "neuron":
        return _CPU
    return value


_AUTO_FUNCTIONALIZED = (
    torch.ops.higher_order.auto_functionalized,
    torch.ops.higher_order.auto_functionalized_v2,
)


def _require_host_kernel(target):
    """Every op of the graph runs on host views of device memory. An op with a neuron kernel
    only gets a host kernel for them (device_ops.py); an op with neither would fail when the
    graph runs, so it fails at compile time instead."""
    if not isinstance(target, torch._ops.OpOverload) or target.namespace in ("aten", "prims"):
        return
    if device_ops.has_device_kernel_only(target):
        device_ops.add_host_kernel(target)
        return
    if not device_ops.has_host_kernel(target):
        raise NotImplementedError(
            f"{target.name()} has no CPU or neuron kernel. Graphs compiled for the emulated "
            "NeuronCore run every op on host views of device memory, so register the op for "
            "all devices (device_types=None), for 'cpu' or for 'neuron'."
        )


def _retarget_to_host(gm):
    """Rewrites the graph to compute on the host: device arguments and constants become CPU."""
    for node in gm.graph.nodes:
        if node.op == "call_function":
            _require_host_kernel(node.target)
            if node.target in _AUTO_FUNCTIONALIZED:
                # A mutating custom op, functionalized: the op is the first argument.
                _require_host_kernel(node.args[0])
        node.args = map_aggregate(node.args, _to_cpu)
        node.kwargs = map_aggregate(node.kwargs, _to_cpu)
        if node.op == "get_attr":
            owner, attr = _attr_owner(gm, node.target)
            value = getattr(owner, attr)
            if isinstance(value, torch.Tensor) and value.device.type == "neuron":
                setattr(owner, attr, torch.ops.neuron.as_cpu(value.detach()))
    gm.recompile()


def _apply_64bit_policy(gm):
    """Applies the 64-bit policy after every op that yields 64-bit values, as eager does, but
    for int64 values that fit in int32 by construction (int_ranges): those are narrowed only
    where they leave the graph, which gives them eager's strides (Inductor may lay a result out
    contiguously) without splitting the fusions that consume them inside the graph."""
    if torch.ops.neuron.policy_64bit() == "native":
        return
    proven = int_ranges.int32_by_construction(gm)
    for node in list(gm.graph.nodes):
        value = node.meta.get("val")
        if (
            node.op != "call_function"
            or not isinstance(value, torch.Tensor)
            or value.dtype not in _64BIT
            or value.numel() == 0
            or _is_view(node.target)
            or node.target in _RNG_SEED_OPS
        ):
            continue
        if node in proven and not any(user.op == "output" for user in node.users):
            continue
        with gm.graph.inserting_after(node):
            narrowed = gm.graph.call_function(
                torch.ops.neuron.narrow_64bit.default,
                (node, f"{_op_name(node)} in a compiled graph", _static(value.stride())),
            )
        narrowed.meta["val"] = value
        keep = (lambda user: user.op == "output") if node in proven else (lambda user: True)
        node.replace_all_uses_with(
            narrowed, delete_user_cb=lambda user: user is not narrowed and keep(user)
        )
    gm.recompile()


def _static(sizes):
    """``sizes`` as ints, or None if any is symbolic."""
    return list(sizes) if all(isinstance(s, int) for s in sizes) else None


def _is_view(target):
    # A view shows values some other op produced, and that op's output was narrowed.
    return isinstance(target, torch._ops.OpOverload) and target.is_view


def _op_name(node):
    if node.target is operator.getitem:
        node = node.args[0]
    target = node.target
    return target.name() if isinstance(target, torch._ops.OpOverload) else str(target)


def _draws_random(gm):
    """Whether the graph draws random numbers (Inductor's seeds, or a seeded random op)."""
    return any(
        node.op == "call_function"
        and (
            node.target in _RNG_SEED_OPS
            or (
                isinstance(node.target, torch._ops.OpOverload)
                and torch.Tag.nondeterministic_seeded in node.target.tags
            )
        )
        for node in gm.graph.nodes
    )


def _cpu_fallback_ops(gm):
    """The CPU-fallback-tier ops the graph runs, once per call site (op_policy.json)."""
    fallback = _cpu_fallback_op_names()
    return [
        node.target.name()
        for node in gm.graph.nodes
        if node.op == "call_function"
        and isinstance(node.target, torch._ops.OpOverload)
        and (node.target.name() in fallback or op_policy.is_library_fallback(node.target))
    ]


@functools.lru_cache(maxsize=None)
def _cpu_fallback_op_names():
    return frozenset("aten::" + name for name in op_policy.cpu_fallback_ops())


def _attr_owner(gm, target):
    owner_path, _, attr = target.rpartition(".")
    return (gm.get_submodule(owner_path) if owner_path else gm), attr


def _host_like(t):
    extent = t.storage_offset() + 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    base = torch.empty(extent if t.numel() else 0, dtype=t.dtype, device=_CPU)
    return base.as_strided(t.shape, t.stride(), t.storage_offset())


def _host_inputs(example_inputs):
    """CPU twins of the (fake) example inputs, with the same sizes, strides and offsets."""
    with detect_fake_mode(example_inputs) or contextlib.nullcontext():
        return [
            _host_like(x) if isinstance(x, torch.Tensor) and x.device.type != "cpu" else x
            for x in example_inputs
        ]


def _cache_key(gm, host_inputs, kind, inductor_kwargs):
    """Hash of what decides the generated code: graph, input layouts, constants, versions."""
    digest = hashlib.sha256()

    def add(*parts):
        for part in parts:
            digest.update(str(part).encode())
            digest.update(b"\0")

    add(CODEGEN_VERSION, torch.__version__, kind, gm.code)
    add(sorted(inductor_kwargs.get("static_input_idxs", ())))
    for x in host_inputs:
        if isinstance(x, torch.Tensor):
            add(x.dtype, tuple(x.shape), x.stride(), x.storage_offset())
        else:
            # Only plain values: the repr of other objects may hold an address.
            add(type(x).__name__, x if isinstance(x, (int, float, bool, type(None))) else "")
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            owner, attr = _attr_owner(gm, node.target)
            value = getattr(owner, attr)
            if isinstance(value, torch.Tensor):
                add(node.target, value.dtype, tuple(value.shape))
                data = value.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
                digest.update(data.numpy().tobytes())
    return digest.hexdigest()


def _kernel_libraries(compiled):
    """Paths of the native kernel libraries that a compiled graph's module calls."""
    call = getattr(compiled, "current_callable", None)
    namespace = getattr(call, "__globals__", None) or {}
    paths = []
    for value in namespace.values():
        path = getattr(getattr(value, "__self__", None), "__file__", None)
        if isinstance(path, str) and path.endswith(".so"):
            paths.append(path)
    return paths
