"""An ESTIMATE of one step's time on Trainium2 and Trainium3: a roofline over the ops it runs.

Capture (``Recorder``, a TorchDispatchMode) sees every op on a neuron or meta tensor, below
autograd, so backward ops are counted too: its FLOPs (torch.utils.flop_counter's formulas),
the HBM bytes it reads and writes (every tensor argument and result, as viewed; views move
nothing), the elements it processes, its dtype, collectives with their sizes, and NKI kernels
with the NKI cost model's latency. Costing is pure arithmetic on those records, so the CLI
captures in the script's process and costs in its own.

Model, per op, on one logical NeuronCore (LNC physical cores):
* matmuls and attention (ops with a flop formula) run on the Tensor engine at the dtype's
  dense peak; other ops on the Vector engine, transcendental ones on the Scalar engine, at
  their element rates; copies and layout ops only move data;
* an op takes max(compute time, HBM bytes / HBM bandwidth): whichever bounds it;
* ops run one after another: no overlap between ops, no fusion, no launch or latency
  overheads, so small ops are estimated optimistically;
* collectives move the ring algorithm's bytes over the interconnect; NKI kernels take the
  NKI cost model's latency (``nki.estimate``).
"""

import collections
import contextlib
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torch_neuronx._markdown import table
from torch_neuronx._platforms import PLATFORMS, SDK, SOURCES

if TYPE_CHECKING:
    import torch

LABEL = "ESTIMATE"
DISCLAIMER = (
    "ESTIMATE: a roofline from the documented peak rates of Trainium, not a measurement. "
    "Ops run back to back at their engine's peak or at full HBM bandwidth, without fusion, "
    "overlap or latency overheads."
)

# The documented rates of the platforms a model runs on (torch_neuronx/_platforms.py).
HARDWARE = {name: p for name, p in PLATFORMS.items() if p.torch_device}

# Engines, and the op classes the report groups time by.
TENSOR, VECTOR, SCALAR, DMA, LINK, NKI = "TensorE", "VectorE", "ScalarE", "DMA", "link", "NKI"
HOST = "host"  # host<->device copies: counted, but outside the estimate

# Ops whose work is transcendental functions: the Scalar engine's (activation) job.
_SCALAR_OPS = {
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sigmoid", "gelu", "silu",
    "mish", "elu", "softplus", "erf", "erfc", "sqrt", "rsqrt", "reciprocal", "sin", "cos",
    "pow", "_softmax", "_safe_softmax", "_log_softmax", "softmax", "log_softmax", "logsumexp",
    "hardswish",
}  # fmt: skip
# Ops that only move data (no arithmetic): their time is their bytes.
_MOVE_OPS = {
    "copy", "_to_copy", "clone", "contiguous", "cat", "stack", "index", "index_select",
    "gather", "embedding", "slice_scatter", "select_scatter", "constant_pad_nd", "repeat",
    "fill", "zero", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros",
    "new_ones", "new_full", "arange", "tril", "triu", "flip", "roll",
    "split_with_sizes_copy", "unbind_copy", "_foreach_copy",
}  # fmt: skip
# Ops that move no data at all (allocation without initialisation, bookkeeping).
_FREE_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "detach",
    "lift_fresh", "_local_scalar_dense", "set", "resize", "alias", "record_stream",
    "wait_tensor", "_has_compatible_shallow_copy_type", "_version", "is_same_size", "_unsafe_view",
    "_foreach_zero",
}  # fmt: skip
# Collectives: the fraction of the message each rank sends around a ring of W ranks.
_RING = {
    "all_reduce": lambda w: 2 * (w - 1) / w,
    "allreduce": lambda w: 2 * (w - 1) / w,
    "all_gather": lambda w: (w - 1) / w,
    "allgather": lambda w: (w - 1) / w,
    "reduce_scatter": lambda w: (w - 1) / w,
    "all_to_all": lambda w: (w - 1) / w,
    "alltoall": lambda w: (w - 1) / w,
    "broadcast": lambda w: 1.0,
    "reduce": lambda w: 1.0,
    "send": lambda w: 1.0,
    "recv": lambda w: 1.0,
}


def _base_name(func):
    """``aten.add_.Tensor`` -> ``add``: the op's name without overload, in-place mark or _out."""
    name = func._opname if hasattr(func, "_opname") else str(func)
    return name.rstrip("_").removesuffix("_backward").removesuffix("_out")


def _collective_kind(name):
    for kind in _RING:
        if name.lstrip("_").startswith(kind):
            return kind
    return None


def _world_size():
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _dtype_class(dtype):
    """The Tensor engine's rate class of a dtype."""
    import torch

    if dtype.itemsize == 1 and dtype.is_floating_point:
        return "fp8"
    if dtype in (torch.bfloat16, torch.float16):
        return "16bit"
    if dtype == torch.float32 and torch.get_float32_matmul_precision() != "highest":
        return "tf32"  # the user allowed reduced-precision float32 matmuls
    return "fp32"


# ---------------------------------------------------------------- capture


@dataclasses.dataclass(frozen=True)
class Op:
    """What one call of an op costs, independent of the hardware; hashable to count calls."""

    name: str  # e.g. aten.mm.default
    engine: str  # TENSOR, VECTOR, SCALAR, DMA, LINK or NKI
    dtype: str  # the Tensor engine's rate class, or "16bit"/"other" for element rates
    flops: int = 0
    bytes: int = 0  # HBM bytes read and written; for a collective, the bytes each rank sends
    elements: int = 0
    nki_us: tuple = ()  # NKI kernels: ((platform, latency in us), ...) from the cost model
    shapes: str = ""

    @property
    def op_class(self):
        """The class the report groups time by."""
        if self.engine == TENSOR:
            return "attention" if "attention" in self.name else "matmul"
        return {
            VECTOR: "vector",
            SCALAR: "activation",
            DMA: "data movement",
            LINK: "collective",
            NKI: "NKI kernel",
            HOST: "host transfer",
        }[self.engine]


def _tensors(tree, found=None):
    """The tensors in nested lists, tuples and dicts (ops' arguments and results)."""
    import torch

    found = [] if found is None else found
    if isinstance(tree, torch.Tensor):
        found.append(tree)
    elif isinstance(tree, (list, tuple)):
        for x in tree:
            _tensors(x, found)
    elif isinstance(tree, dict):
        for x in tree.values():
            _tensors(x, found)
    return found


def _nbytes(t):
    return t.numel() * t.element_size()


def _flop_formula(packet):
    """torch.utils.flop_counter's formula for an op, read when the op runs (a library such as
    vLLM's plugin may register formulas after recording began), or for the CPU flash-attention
    ops the neuron device runs SDPA with (the arguments of the flash ops torch has them for)."""
    import torch
    from torch.utils import flop_counter

    formula = flop_counter.flop_registry.get(packet)
    if formula is not None:
        return formula
    aten = torch.ops.aten
    if packet is getattr(aten, "_scaled_dot_product_flash_attention_for_cpu", None):
        return flop_counter.sdpa_flop
    if packet is getattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward", None):
        return flop_counter.sdpa_backward_flop
    return None


class Recorder:
    """Records the ops of a step on neuron and meta tensors; ``with Recorder() as r:``.

    With ``split_steps`` each ``optimizer.step()`` over neuron or meta parameters ends a step.
    ``steps`` holds each completed step's ``Counter`` of ``Op``; ``run`` counts the whole run.
    """

    # The Recorder recording now, for frameworks that mark their own steps (end_serving_step).
    active = None

    def __init__(self, split_steps=False):
        self.split_steps = split_steps
        self.steps = []
        self.step_tokens = []  # per step: the tokens a marked step produced, or None
        self.current = collections.Counter()
        self.run = collections.Counter()
        self.world_size = 1
        self._mode = None
        self._hooks = []
        self._inside_kernel = 0
        self._kernels = 0  # NKI kernels recorded so far
        self._pending = {}  # storage of a host composite's result -> its Op

    # The dispatch mode is a separate object so that this class needs no torch at import.
    def __enter__(self):
        import torch
        from torch.optim import optimizer
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self
        self._local_scalar_dense = torch.ops.aten._local_scalar_dense.default

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return recorder._dispatch(func, args, kwargs or {})

        self._mode = _Mode()
        self._mode.__enter__()
        if self.split_steps:
            self._hooks.append(optimizer.register_optimizer_step_post_hook(self._optimizer_step))
        import nki.listeners

        self._subscription = nki.listeners.subscribe(launch=self._on_launch)
        self._subscription.__enter__()
        self._patch_sdpa()
        Recorder.active = self
        return self

    def __exit__(self, *exc):
        import torch

        Recorder.active = None
        self._mode.__exit__(*exc)
        for hook in self._hooks:
            hook.remove()
        self._subscription.__exit__(*exc)
        torch.nn.functional.scaled_dot_product_attention = self._original_sdpa

    def _optimizer_step(self, optimizer, args, kwargs):
        devices = {p.device.type for g in optimizer.param_groups for p in g["params"]}
        if devices & {"neuron", "meta"}:
            self.end_step()

    def end_step(self, tokens=None):
        """Closes the current step (a no-op when it recorded nothing); `tokens`: the tokens
        it produced, for a decode step of a serving engine."""
        if self.current:
            self.steps.append(self.current)
            self.step_tokens.append(tokens)
            self.current = collections.Counter()

    def _count(self, op):
        self.current[op] += 1
        self.run[op] += 1

    def _dispatch(self, func, args, kwargs):
        if self._inside_kernel:
            return func(*args, **kwargs)
        inputs = _tensors((args, kwargs))
        devices = {t.device.type for t in inputs}
        if func is self._local_scalar_dense and devices == {"meta"}:
            # A meta tensor has no value: code that reads one (an optimizer's step count)
            # gets 1, and data-dependent control flow follows that value.
            return 1 if not inputs[0].is_floating_point() else 1.0
        if func.namespace == "nki":
            self._record_nki_call(args)
            with self._kernel_body():
                return func(*args, **kwargs)
        kernels = self._kernels
        out = func(*args, **kwargs)
        if self._kernels != kernels:  # a custom op (nki_op) whose cost is its NKI kernels'
            return out
        outputs = _tensors(out)
        devices |= {t.device.type for t in outputs}
        if devices == {"cpu"}:
            self._note_host_composite(func, args, kwargs, inputs, outputs, out)
        elif devices & {"neuron", "meta"}:
            if "cpu" in devices and _base_name(func) in ("_to_copy", "copy", "_copy_from"):
                if not self._claim_host_composite(inputs):
                    moved = sum(_nbytes(t) for t in outputs)
                    self._count(Op(str(func), HOST, "host", bytes=moved))
            else:
                op = self._describe(func, args, kwargs, inputs, outputs, out)
                if op is not None:
                    self._count(op)
        return out

    # Host composites (op_policy.json: SDPA, RNNs) run their CPU implementation on host views
    # of device memory, forward and backward, so their ops reach this mode as CPU ops. A CPU
    # op with a flop formula whose result then moves to the device was the device's work.
    def _note_host_composite(self, func, args, kwargs, inputs, outputs, out):
        if _flop_formula(func.overloadpacket) is None:
            return
        entry = [self._describe(func, args, kwargs, inputs, outputs, out), False]
        for t in outputs:
            self._pending[t.untyped_storage().data_ptr()] = entry
        while len(self._pending) > 16:  # CPU work of the script that never reaches the device
            self._pending.pop(next(iter(self._pending)))

    def _claim_host_composite(self, inputs):
        cpu = [t for t in inputs if t.device.type == "cpu"]
        entry = self._pending.get(cpu[0].untyped_storage().data_ptr()) if cpu else None
        if entry is None:
            return False
        op, counted = entry
        if not counted:  # its other results (SDPA's gradients) move to the device too
            self._count(op)
            entry[1] = True
        return True

    def _describe(self, func, args, kwargs, inputs, outputs, out):
        """The Op of one call, or None for an op that moves no data."""
        name = _base_name(func)
        if func.namespace in ("profiler", "neuron") or name in _FREE_OPS or func.is_view:
            return None
        dtype_of = (outputs or inputs)[0].dtype if (outputs or inputs) else None
        moved = sum(_nbytes(t) for t in inputs) + sum(_nbytes(t) for t in outputs)
        shapes = ", ".join(str(tuple(t.shape)) for t in inputs[:3])
        if func.namespace in ("c10d", "_c10d_functional", "_dtensor"):
            kind = _collective_kind(name)
            if kind is None:
                return None
            size = max(sum(_nbytes(t) for t in inputs), sum(_nbytes(t) for t in outputs))
            world = _world_size()
            self.world_size = max(self.world_size, world)
            sent = int(size * _RING[kind](world)) if world > 1 else 0
            return Op(str(func), LINK, kind, bytes=sent, shapes=f"{size} B x {world} ranks")
        formula = _flop_formula(func.overloadpacket)
        if formula is not None:
            flops = int(formula(*args, **kwargs, out_val=out))
            return Op(str(func), TENSOR, _dtype_class(inputs[0].dtype), flops, moved, shapes=shapes)
        elements = max(t.numel() for t in inputs + outputs) if inputs or outputs else 0
        narrow = "16bit" if dtype_of is not None and dtype_of.itemsize <= 2 else "other"
        engine = SCALAR if name in _SCALAR_OPS else DMA if name in _MOVE_OPS else VECTOR
        return Op(str(func), engine, narrow, 0, moved, elements, shapes=shapes)

    # NKI kernels: their cost comes from the NKI cost model, not from the ops they run inside.

    def _record_kernel(self, launch, args, kwargs):
        import nki

        self._kernels += 1
        reports = {name: nki.estimate(launch, *args, target=name, **kwargs) for name in HARDWARE}
        first = next(iter(reports.values()))
        self._count(
            Op(
                f"nki:{launch.kernel.fn.__name__}",
                NKI,
                "nki",
                flops=first.flops,
                bytes=first.dma_bytes,
                nki_us=tuple((n, r.latency_us) for n, r in reports.items()),
                shapes=", ".join(str(tuple(t.shape)) for t in _tensors((args, kwargs))[:3]),
            )
        )

    def _record_nki_call(self, args):
        from nki.torch_integration import decode_call

        self._record_kernel(*decode_call(*args))

    @contextlib.contextmanager
    def _kernel_body(self):
        """While a kernel runs, the simulator's own torch ops are not the model's."""
        self._inside_kernel += 1
        try:
            yield
        finally:
            self._inside_kernel -= 1

    def _on_launch(self, launch, args, kwargs):
        if self._inside_kernel:
            return None
        self._record_kernel(launch, args, kwargs)
        return self._kernel_body()

    def _patch_sdpa(self):
        """On meta tensors, SDPA runs the fused kernel the neuron device runs (a host composite
        calling the CPU flash kernel), not the math fallback that materializes the scores."""
        import torch

        original = self._original_sdpa = torch.nn.functional.scaled_dot_product_attention
        fused = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu

        def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kw):
            if not all(t.device.type == "meta" for t in (q, k, v)) or set(kw) - {"enable_gqa"}:
                return original(q, k, v, attn_mask, dropout_p, is_causal, scale=scale, **kw)
            if kw.get("enable_gqa") and k.shape[-3] != q.shape[-3]:
                k = k.repeat_interleave(q.shape[-3] // k.shape[-3], -3)
                v = v.repeat_interleave(q.shape[-3] // v.shape[-3], -3)
            return fused(q, k, v, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)[0]

        torch.nn.functional.scaled_dot_product_attention = sdpa


# ---------------------------------------------------------------- costing


def end_serving_step(decode_tokens: int | None = None) -> None:
    """Ends the step the active Recorder records, if one does: one step of a serving engine
    (vLLM's marks each). `decode_tokens`: the tokens a decode-only step produced, one per
    sequence; None for a step that prefilled."""
    if Recorder.active is not None:
        Recorder.active.end_step(decode_tokens)


def op_time(op, hw, lnc, world_size=1):
    """(seconds, bound) of one call of ``op`` on one logical core of ``hw``."""
    if op.engine == NKI:
        return dict(op.nki_us)[hw.name] * 1e-6, "NKI cost model"
    if op.engine == LINK:
        logical_per_chip = hw.physical_cores // lnc
        bandwidth = hw.dma_gb_s * 1e9 * lnc  # ranks on one chip: DMA between cores
        if world_size > logical_per_chip:
            bandwidth = min(bandwidth, hw.link_tb_s * 1e12 / logical_per_chip)
        return op.bytes / bandwidth, "interconnect"
    memory = op.bytes / hw.hbm_bytes_per_s(lnc)
    if op.engine == TENSOR:
        compute = op.flops / (hw.tensor_tflops[op.dtype] * 1e12 * lnc)
    elif op.engine in (VECTOR, SCALAR):
        ghz, per_cycle = (
            (hw.vector_ghz, hw.vector_elements)
            if op.engine == VECTOR
            else (hw.scalar_ghz, hw.scalar_elements)
        )
        rate = per_cycle[0 if op.dtype == "16bit" else 1] * ghz * 1e9 * lnc
        compute = op.elements / rate
    else:
        compute = 0.0
    return (compute, "compute") if compute > memory else (memory, "HBM")


@dataclasses.dataclass
class Estimate:
    """The ESTIMATE of one step on each Trainium generation; ``print(e)`` shows the report."""

    ops: collections.Counter  # Op -> calls in one step
    lnc: int = 2
    world_size: int = 1
    step: str = "one call"  # how the step was delimited
    tokens_per_step: int | None = None  # the tokens a decode step produced
    price_per_hour: float | None = None
    steps_per_epoch: int | None = None
    platforms: tuple = tuple(HARDWARE)

    def rows(self, platform):
        """One dict per distinct op call: calls, FLOPs, bytes, engine, time and bound."""
        hw = HARDWARE[platform]
        rows = []
        for op, calls in self.ops.items():
            if op.engine == HOST:
                continue
            seconds, bound = op_time(op, hw, self.lnc, self.world_size)
            rows.append(
                {
                    "op": op.name,
                    "class": op.op_class,
                    "engine": op.engine,
                    "dtype": op.dtype,
                    "shapes": op.shapes,
                    "calls": calls,
                    "flops": op.flops * calls,
                    "bytes": op.bytes * calls,
                    "time_s": seconds * calls,
                    "bound": bound,
                }
            )
        return sorted(rows, key=lambda r: -r["time_s"])

    def summary(self, platform):
        """Step time, MFU, the time by class and by op, and the per-scope view."""
        hw = HARDWARE[platform]
        rows = self.rows(platform)
        step = sum(r["time_s"] for r in rows)
        flops = sum(r["flops"] for r in rows)
        by_dtype = collections.Counter()
        for r in rows:
            if r["engine"] == TENSOR:
                by_dtype[r["dtype"]] += r["flops"]
        dtype = by_dtype.most_common(1)[0][0] if by_dtype else "16bit"
        peak = hw.tensor_tflops[dtype] * 1e12 * self.lnc
        by_class = collections.Counter()
        by_op = collections.defaultdict(lambda: {"calls": 0, "time_s": 0.0, "flops": 0})
        bounds = collections.defaultdict(collections.Counter)
        for r in rows:
            by_class[r["class"]] += r["time_s"]
            agg = by_op[r["op"]]
            agg["calls"] += r["calls"]
            agg["time_s"] += r["time_s"]
            agg["flops"] += r["flops"]
            agg["bytes"] = agg.get("bytes", 0) + r["bytes"]
            agg["engine"] = r["engine"]
            bounds[r["op"]][r["bound"]] += r["time_s"]
        for name, agg in by_op.items():
            agg["bound"] = bounds[name].most_common(1)[0][0]
            agg["share"] = agg["time_s"] / step if step else 0.0
        cores_per_chip = hw.physical_cores // self.lnc
        scopes = []
        for scope, cores in (
            ("NeuronCore", 1),
            ("chip", cores_per_chip),
            (f"instance ({hw.instance})", cores_per_chip * hw.instance_chips),
        ):
            scopes.append(
                {
                    "scope": scope,
                    "logical_cores": cores,
                    "peak_tflops": peak * cores / 1e12,
                    "hbm_tb_s": hw.hbm_bytes_per_s(self.lnc) * cores / 1e12,
                    "steps_per_s": cores / step if step else None,
                    "tokens_per_s": cores * self.tokens_per_step / step
                    if step and self.tokens_per_step
                    else None,
                }
            )
        data = {
            "platform": platform,
            "core": f"NeuronCore-v{hw.core_version}",
            "step_time_s": step,
            "flops": flops,
            "hbm_bytes": sum(r["bytes"] for r in rows if r["engine"] not in (LINK, NKI)),
            "mfu": flops / (step * peak) if step else None,
            "mfu_dtype": dtype,
            "time_by_class_s": dict(by_class.most_common()),
            "ops": dict(sorted(by_op.items(), key=lambda kv: -kv[1]["time_s"])),
            "scopes": scopes,
        }
        if self.price_per_hour is not None and step:
            per_step = self.price_per_hour / 3600 * step / scopes[-1]["logical_cores"]
            data["cost_per_step"] = per_step
            if self.steps_per_epoch:
                data["cost_per_epoch"] = per_step * self.steps_per_epoch
        return data

    def to_dict(self):
        """A JSON-able report (schema ``torchneuron.estimate/1``)."""
        return {
            "schema": "torchneuron.estimate/1",
            "label": LABEL,
            "disclaimer": DISCLAIMER,
            "step": self.step,
            "tokens_per_step": self.tokens_per_step,
            "lnc": self.lnc,
            "world_size": self.world_size,
            "host_transfer_bytes": sum(
                o.bytes * n for o, n in self.ops.items() if o.engine == HOST
            ),
            "price_per_hour": self.price_per_hour,
            "steps_per_epoch": self.steps_per_epoch,
            "platforms": {p: self.summary(p) for p in self.platforms},
            "hardware": {p: _hardware_dict(HARDWARE[p]) for p in self.platforms},
        }

    def markdown(self, top=12):
        """The report for people."""
        return markdown(self.to_dict(), top)

    def __str__(self):
        return self.markdown()

    def plot(self, path):
        """Draws the estimated time by op class on each platform into ``path``."""
        plot(self.to_dict(), path)


def _hardware_dict(hw):
    data = dataclasses.asdict(hw)
    data["sources"] = {k: SOURCES[v] for k, v in hw.sources.items()}
    return data


def _seconds(value):
    if value is None:
        return "n/a"
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value * 1e9:.3g} ns"


def _count(value, unit=""):
    for suffix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {suffix}{unit}"
    return f"{value:.3g} {unit}".strip()


def markdown(data, top=12):
    """Markdown of a ``to_dict()`` report."""
    platforms = data["platforms"]
    ranks = f"; {data['world_size']} ranks" if data["world_size"] > 1 else ""
    blocks = [
        f"# {LABEL}: one step on Trainium",
        f"> {data['disclaimer']}",
        f"Step: {data['step']}. One logical NeuronCore = LNC {data['lnc']} physical cores{ranks}.",
    ]
    headers = ["platform", f"{LABEL} step time", "FLOPs", "HBM bytes", "MFU"]
    rows = []
    for p, s in platforms.items():
        mfu = f"{s['mfu']:.1%} of {s['mfu_dtype']} peak" if s["mfu"] is not None else "n/a"
        rows.append(
            [
                f"{p} ({s['core']})",
                _seconds(s["step_time_s"]),
                _count(s["flops"], "FLOP"),
                _count(s["hbm_bytes"], "B"),
                mfu,
            ]
            + ([f"{s['cost_per_step']:.3g}"] if "cost_per_step" in s else [])
        )
    if data["price_per_hour"] is not None:
        headers.append("cost per step")
    blocks.append(table(headers, rows))
    if data["host_transfer_bytes"]:
        blocks.append(
            f"Host↔device copies ({_count(data['host_transfer_bytes'], 'B')} per step) are not "
            "in the estimate: the hardware references document no host-link bandwidth."
        )
    for p, s in platforms.items():
        step = s["step_time_s"] or 1.0
        classes = [[c, _seconds(t), f"{t / step:.1%}"] for c, t in s["time_by_class_s"].items()]
        ops = [
            [
                name,
                o["engine"],
                f"{o['calls']:.4g}",
                _count(o["flops"], "FLOP") if o["flops"] else "",
                _count(o["bytes"], "B"),
                o["bound"],
                _seconds(o["time_s"]),
                f"{o['share']:.1%}",
            ]
            for name, o in list(s["ops"].items())[:top]
        ]
        scopes = [
            [
                sc["scope"],
                sc["logical_cores"],
                f"{sc['peak_tflops']:.0f} ({s['mfu_dtype']})",
                f"{sc['hbm_tb_s']:.2f}",
                f"{sc['steps_per_s']:.4g}" if sc["steps_per_s"] else "n/a",
            ]
            + ([f"{sc['tokens_per_s']:.4g}"] if data["tokens_per_step"] else [])
            for sc in s["scopes"]
        ]
        scope_headers = ["scope", "logical cores", "peak TFLOPS", "HBM TB/s", "steps/s"]
        scope_headers += ["tokens/s"] if data["tokens_per_step"] else []
        blocks += [
            f"## {p}: {LABEL} time by op class",
            table(["class", "time", "share"], classes),
            f"## {p}: the ops that dominate ({LABEL})",
            table(["op", "engine", "calls", "FLOPs", "HBM bytes", "bound", "time", "share"], ops),
            f"{p} per scope, one replica of this step on each logical core (data parallel; "
            "the gradient all-reduce between replicas is included only when the script ran "
            "it under torchrun):",
            table(scope_headers, scopes),
        ]
        if "cost_per_epoch" in s:
            blocks.append(
                f"{p}: {s['cost_per_epoch']:.4g} per epoch of {data['steps_per_epoch']} steps."
            )
    if data["price_per_hour"] is not None:
        blocks.append(
            f"Cost at {data['price_per_hour']} per instance-hour (your price; none is built "
            "in), with every logical core of the instance running a replica."
        )
    blocks.append("## Hardware numbers used")
    blocks.append(f"Sources: files of {SDK}")
    blocks.append(
        table(
            ["platform", "constant", "value", "source"],
            [
                [p, name, value, data["hardware"][p]["sources"][key].removeprefix(SDK)]
                for p in platforms
                for name, value, key in _constants(data["hardware"][p])
            ],
        )
    )
    return "\n\n".join(b.rstrip("\n") for b in blocks) + "\n"


def _constants(hw):
    """(name, value, source key) of each documented number the model uses."""
    tensor = ", ".join(f"{k} {v:g}" for k, v in hw["tensor_tflops"].items())
    return [
        ("NeuronCores per chip", hw["physical_cores"], "cores"),
        ("TensorE dense TFLOPS per core", tensor, "tensor"),
        (
            "VectorE elements/cycle (2-byte, other) @ GHz",
            f"{hw['vector_elements']} @ {hw['vector_ghz']}",
            "vector",
        ),
        (
            "ScalarE elements/cycle (2-byte, other) @ GHz",
            f"{hw['scalar_elements']} @ {hw['scalar_ghz']}",
            "scalar",
        ),
        ("HBM TB/s per chip", hw["hbm_tb_s"], "hbm"),
        ("DMA GB/s per core (collectives within a chip)", hw["dma_gb_s"], "dma"),
        ("NeuronLink TB/s per chip", hw["link_tb_s"], "link"),
        (f"chips per {hw['instance']}", hw["instance_chips"], "instance"),
    ]


def plot(data, path):
    """A bar chart of the estimated time by op class on each platform."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt
    except ImportError:
        raise SystemExit(
            "torchneuron estimate: --plot needs matplotlib; install it with "
            "`pip install matplotlib` (in the torchneuron checkout: "
            "`pip install --no-build-isolation -e '.[tools]'`)"
        ) from None
    platforms = data["platforms"]
    classes = sorted({c for s in platforms.values() for c in s["time_by_class_s"]})
    longest = max(s["step_time_s"] for s in platforms.values())
    unit, scale = ("s", 1.0) if longest >= 1 else ("ms", 1e3) if longest >= 1e-3 else ("µs", 1e6)
    fig, ax = plt.subplots(figsize=(8.5, 1.2 + 0.7 * len(platforms)))
    left = [0.0] * len(platforms)
    names = list(platforms)
    for c in classes:
        widths = [platforms[p]["time_by_class_s"].get(c, 0.0) * scale for p in names]
        ax.barh(names, widths, left=left, label=c)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_xlabel(f"{LABEL}: time per step ({unit})")
    ax.set_title(f"{LABEL}: time by op class (roofline, not measured)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ---------------------------------------------------------------- the Python API


def estimate(
    model: Callable[..., Any],
    *inputs: Any,
    train: bool = False,
    optimizer: "torch.optim.Optimizer | None" = None,
    lnc: int | None = None,
    price_per_hour: float | None = None,
    steps_per_epoch: int | None = None,
    **kwargs: Any,
) -> Estimate:
    """ESTIMATE of one step of ``model(*inputs, **kwargs)`` on trn2 and trn3.

    ``train`` adds the backward of the output (its ``.loss``, the output itself when it is a
    scalar, else its sum) and, with ``optimizer``, its ``step()``. Inputs and parameters may be
    neuron tensors or meta tensors (shapes only: nothing is computed, so full-size models cost
    no memory or time). ``torch.compile``d code is estimated as its eager ops.
    """
    if lnc is None:
        from torch_neuronx import _config as config

        lnc = config.logical_core_size()
    import torch

    # Compiled code runs as its eager ops (as under the CLI): the mode must see them.
    with torch.compiler.set_stance("force_eager"), Recorder() as recorder:
        out = model(*inputs, **kwargs)
        if train:
            _loss(out).backward()
            if optimizer is not None:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    if not recorder.run:
        raise ValueError(
            "torch_neuronx.estimate: the call ran no op on a neuron or meta tensor; move the "
            "model and inputs to the neuron device, or build them on the meta device"
        )
    what = (
        "forward, backward" + (" and optimizer step" if optimizer else "") if train else "forward"
    )
    return Estimate(
        recorder.run,
        lnc=lnc,
        world_size=recorder.world_size,
        step=f"one call of the model ({what})",
        price_per_hour=price_per_hour,
        steps_per_epoch=steps_per_epoch,
    )


def _loss(out):
    import torch

    loss = getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    tensors = _tensors(out)
    if not tensors:
        raise ValueError("torch_neuronx.estimate(train=True): the model returned no tensor")
    first = tensors[0]
    return first if first.dim() == 0 else first.float().sum()


def ops_to_json(counter):
    """A Counter of Op as a JSON-able list (the CLI's child process hands it to the parent)."""
    return [{**dataclasses.asdict(op), "calls": n} for op, n in counter.items()]


def ops_from_json(items):
    """The inverse of ``ops_to_json``."""
    counter = collections.Counter()
    for item in items:
        item = dict(item)
        calls = item.pop("calls")
        item["nki_us"] = tuple(tuple(x) for x in item["nki_us"])
        counter[Op(**item)] += calls
    return counter


def scaled(counter, divisor):
    """Each op's calls divided by ``divisor`` (a step as the average of a run of steps)."""
    return collections.Counter({op: n / divisor for op, n in counter.items()})
