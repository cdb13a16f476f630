"""Capture: the ops of a step on neuron and meta tensors, as ``Op`` records (``Recorder``)."""

import collections
import contextlib

from .model import (
    DMA,
    FREE_OPS,
    HARDWARE,
    HOST,
    LINK,
    MOVE_OPS,
    NKI,
    RING,
    SCALAR,
    SCALAR_OPS,
    TENSOR,
    VECTOR,
    Op,
    base_name,
    collective_kind,
    current_world_size,
    dtype_class,
)


def tensors_in(tree, found=None):
    """The tensors in nested lists, tuples and dicts (ops' arguments and results)."""
    import torch

    found = [] if found is None else found
    if isinstance(tree, torch.Tensor):
        found.append(tree)
    elif isinstance(tree, (list, tuple)):
        for x in tree:
            tensors_in(x, found)
    elif isinstance(tree, dict):
        for x in tree.values():
            tensors_in(x, found)
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
        inputs = tensors_in((args, kwargs))
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
        outputs = tensors_in(out)
        devices |= {t.device.type for t in outputs}
        if devices == {"cpu"}:
            self._note_host_composite(func, args, kwargs, inputs, outputs, out)
        elif devices & {"neuron", "meta"}:
            if "cpu" in devices and base_name(func) in ("_to_copy", "copy", "_copy_from"):
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
        name = base_name(func)
        if func.namespace in ("profiler", "neuron") or name in FREE_OPS or func.is_view:
            return None
        dtype_of = (outputs or inputs)[0].dtype if (outputs or inputs) else None
        moved = sum(_nbytes(t) for t in inputs) + sum(_nbytes(t) for t in outputs)
        shapes = ", ".join(str(tuple(t.shape)) for t in inputs[:3])
        if func.namespace in ("c10d", "_c10d_functional", "_dtensor"):
            kind = collective_kind(name)
            if kind is None:
                return None
            size = max(sum(_nbytes(t) for t in inputs), sum(_nbytes(t) for t in outputs))
            world = current_world_size()
            self.world_size = max(self.world_size, world)
            sent = int(size * RING[kind](world)) if world > 1 else 0
            return Op(str(func), LINK, kind, bytes=sent, shapes=f"{size} B x {world} ranks")
        formula = _flop_formula(func.overloadpacket)
        if formula is not None:
            flops = int(formula(*args, **kwargs, out_val=out))
            return Op(str(func), TENSOR, dtype_class(inputs[0].dtype), flops, moved, shapes=shapes)
        elements = max(t.numel() for t in inputs + outputs) if inputs or outputs else 0
        narrow = "16bit" if dtype_of is not None and dtype_of.itemsize <= 2 else "other"
        engine = SCALAR if name in SCALAR_OPS else DMA if name in MOVE_OPS else VECTOR
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
                shapes=", ".join(str(tuple(t.shape)) for t in tensors_in((args, kwargs))[:3]),
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


def end_serving_step(decode_tokens: int | None = None) -> None:
    """Ends the step the active Recorder records, if one does: one step of a serving engine
    (vLLM's marks each). `decode_tokens`: the tokens a decode-only step produced, one per
    sequence; None for a step that prefilled."""
    if Recorder.active is not None:
        Recorder.active.end_step(decode_tokens)
