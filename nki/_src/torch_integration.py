"""PyTorch integration: ``nki_op`` (custom ops around NKI launchers) and ``wrap_nki``.

``nki_op`` registers a type-annotated launcher as a ``torch.library`` custom op.  The launcher
itself is also the fake (meta) implementation: called with FakeTensors, ``@nki.jit`` kernels
return outputs shaped by their cached specialization instead of executing.  Under
``torch.compile`` the op is a single graph node; ``register_autograd`` adds a backward.

``wrap_nki`` makes a kernel callable from torch code and ``torch.compile`` without writing a
launcher: calls go through one generic custom op, ``nki::call``, which runs the kernel on
copies of its tensor arguments and returns the new outputs followed by the final values of the
arguments the kernel wrote; the wrapper copies those back in place.
"""

import ast
import functools
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch._library.custom_ops import CustomOpDef
from torch.utils import _pytree as pytree

from . import device_trace
from .jit import Kernel, Launch


def nki_op(
    name: str,
    fn: Callable[..., Any] | None = None,
    *,
    mutates_args: Iterable[str] = (),
    device_types: str | Sequence[str] | None = None,
    schema: str | None = None,
) -> CustomOpDef | Callable[[Callable[..., Any]], CustomOpDef]:
    """Register ``fn`` (annotated ``(x: torch.Tensor, ...) -> torch.Tensor``) as custom op ``name``.

    Returns the ``torch.library.CustomOpDef``: call it like ``fn``, and use
    ``.register_autograd(backward, setup_context=...)`` for training.
    """

    def register(f):
        op = torch.library.custom_op(
            name,
            _profiled(f"nki {name}", f),
            mutates_args=tuple(mutates_args),
            device_types=device_types,
            schema=schema,
        )
        op.register_fake(f)
        return op

    return register if fn is None else register(fn)


_KERNELS: dict[int, Kernel] = {}
_IDS = itertools.count()


def _profiled(name, fn):
    """``fn``, recorded as a NeuronCore kernel in profiles when it runs on neuron tensors."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if not device_trace.collecting():
            return fn(*args, **kwargs)
        device = next(
            (
                x.device.index
                for x in pytree.tree_leaves((args, kwargs))
                if isinstance(x, torch.Tensor) and x.device.type == "neuron"
            ),
            None,
        )
        with device_trace.device_activity(name, device, "nki"):
            return fn(*args, **kwargs)

    return run


def decode_call(kernel_id, grid, consts, tensors):
    """(launch, args, kwargs) of an ``nki::call``: what it launches, with ``tensors`` in place."""
    return (_KERNELS[kernel_id][tuple(grid)], *_decode(consts, tensors))


def _run_call(kernel_id, grid, consts, tensors):
    """Run registered kernel ``kernel_id``; returns (new outputs, final values of written args)."""
    copies = [t.clone() for t in tensors]
    launch, args, kwargs = decode_call(kernel_id, grid, consts, copies)
    result = _profiled(f"nki {launch.kernel.fn.__name__}", launch)(*args, **kwargs)
    special = launch.specialization(args, kwargs)
    outputs = [
        r
        for r in pytree.tree_leaves(result)
        if isinstance(r, torch.Tensor) and not any(r is c for c in copies)
    ]
    return outputs + [copies[i] for i in special.mutated]


@torch.library.custom_op("nki::call", mutates_args=())
def _call(
    kernel_id: int, grid: list[int], consts: str, tensors: list[torch.Tensor]
) -> list[torch.Tensor]:
    return _run_call(kernel_id, grid, consts, tensors)


@_call.register_fake
def _call_fake(kernel_id, grid, consts, tensors):
    launch, args, kwargs = decode_call(kernel_id, grid, consts, tensors)
    special = launch.specialization(args, kwargs)
    device = tensors[0].device
    news = [
        torch.empty(shape, dtype=dtype.torch, device=device)
        for shape, dtype in special.new_outputs()
    ]
    return news + [torch.empty_like(tensors[i]) for i in special.mutated]


def _encode(args, kwargs):
    """Split call arguments into tensors and a literal string holding everything else."""
    leaves, spec = pytree.tree_flatten((args, kwargs))
    tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
    skeleton = [None if isinstance(x, torch.Tensor) else x for x in leaves]
    return repr((skeleton, pytree.treespec_dumps(spec))), tensors


def _decode(consts, tensors):
    """Inverse of ``_encode``: (args, kwargs) with ``tensors`` put back in place."""
    skeleton, spec = ast.literal_eval(consts)
    it = iter(tensors)
    leaves = [next(it) if x is None else x for x in skeleton]
    return pytree.tree_unflatten(leaves, pytree.treespec_loads(spec))


class NkiCaller:
    """``wrap_nki(kernel)``: call from torch code (and torch.compile), ``[grid]`` supported.

    Non-tensor arguments must be literals (numbers, strings, tuples, lists, dicts, None).
    """

    def __init__(self, kernel, grid=()):
        self.kernel = kernel
        self.grid = grid
        self.kernel_id = next(_IDS)
        _KERNELS[self.kernel_id] = kernel

    def __getitem__(self, grid):
        caller = NkiCaller.__new__(NkiCaller)
        caller.kernel, caller.kernel_id = self.kernel, self.kernel_id
        caller.grid = (grid,) if isinstance(grid, int) else tuple(grid)
        return caller

    def __call__(self, *args, **kwargs):
        return _invoke(self.kernel_id, self.grid, *args, **kwargs)


# Dynamo keeps this call as one graph node instead of tracing the simulator; AOT autograd
# then traces it with FakeTensors, which records nki::call plus the in-place copies.
@torch.compiler.allow_in_graph
def _invoke(kernel_id, grid, *args, **kwargs):
    """Run kernel ``kernel_id`` on ``grid`` through the nki::call custom op."""
    consts, tensors = _encode(args, kwargs)
    results = torch.ops.nki.call(kernel_id, list(grid), consts, tensors)
    special = _KERNELS[kernel_id][grid].specialization(args, kwargs)
    new_count = len(results) - len(special.mutated)
    for i, value in zip(special.mutated, results[new_count:]):
        tensors[i].copy_(value)
    return special.rebuild(results[:new_count], tensors)


def wrap_nki(kernel: Kernel | Launch | Callable[..., Any]) -> NkiCaller:
    """Make ``kernel`` (a ``@nki.jit`` kernel or function) callable from torch and torch.compile."""
    if isinstance(kernel, Launch):
        return NkiCaller(kernel.kernel)[kernel.grid]
    return NkiCaller(kernel if isinstance(kernel, Kernel) else Kernel(kernel))
