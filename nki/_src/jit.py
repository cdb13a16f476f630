"""nki.jit: launching kernels on host tensors, SPMD grids, specialization and nki.simulate.

A call executes the kernel body eagerly on the simulator (every nki.isa call is a vectorized
torch operation on the arguments' memory).  The first call for a given (shapes, dtypes,
constant arguments, grid, target) also records the instruction trace, the output signature
and which inputs were written; that *specialization* is cached and serves the cost model and
shape inference for FakeTensors.  Nothing is compiled.
"""

import functools
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.utils import _pytree as pytree

from .. import listeners
from . import buffers, interop, runtime, spmd, targets
from .errors import fail
from .tensor import NkiTensor


@dataclass(frozen=True)
class Output:
    """A returned tensor: tensor argument number ``arg``, or a new tensor of shape and dtype."""

    arg: object = None
    shape: tuple = ()
    dtype: object = None


@dataclass
class Specialization:
    """What the first run for one signature learned about a kernel."""

    target: targets.Target
    traces: list  # per SPMD instance: list of trace.Instr
    outputs: object  # the returned structure, with an Output per tensor
    mutated: tuple  # numbers of the tensor arguments the kernel wrote
    peak_sbuf: int  # bytes per partition
    peak_psum: int

    def new_outputs(self):
        """(shape, dtype) of each tensor the kernel allocates and returns, in order."""
        return [
            (o.shape, o.dtype)
            for o in pytree.tree_leaves(self.outputs)
            if isinstance(o, Output) and o.arg is None
        ]

    def rebuild(self, new_tensors, tensor_args):
        """The returned structure, filled with ``new_tensors`` and the tensor arguments."""
        fresh = iter(new_tensors)

        def fill(o):
            if not isinstance(o, Output):
                return o
            return next(fresh) if o.arg is None else tensor_args[o.arg]

        return pytree.tree_map(fill, self.outputs)


class Kernel:
    """A ``@nki.jit`` kernel; ``kernel[grid](...)`` launches an SPMD grid (or LNC count)."""

    def __init__(self, fn: Callable[..., Any], platform_target: str | None = None) -> None:
        self.fn = fn
        self.platform_target = platform_target
        self.specializations: dict[object, Specialization] = {}
        functools.update_wrapper(self, fn)

    def __getitem__(self, grid):
        return Launch(self, grid)

    def targeting(self, platform_target: str | None) -> "Kernel":
        """This kernel with a default target (its own ``platform_target`` still wins); it
        shares the specializations, which are keyed by target."""
        other = Kernel(self.fn, platform_target=self.platform_target or platform_target)
        other.specializations = self.specializations
        return other

    def __call__(self, *args, **kwargs):
        return Launch(self, ())(*args, **kwargs)

    def __repr__(self):
        return f"<nki kernel {self.fn.__name__}>"


class Launch:
    """A kernel bound to a launch grid."""

    def __init__(self, kernel, grid):
        # int() also pins symbolic sizes from torch.compile: kernels specialize on shapes.
        grid = tuple(int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,)))
        if not all(g >= 1 for g in grid):
            raise ValueError(f"launch grid must be positive ints, got {grid}")
        self.kernel = kernel
        self.grid = grid

    def __call__(self, *args, **kwargs):
        if runtime.inside_kernel():
            # A kernel called from a running kernel is inlined, as the NKI compiler does.
            return self.kernel.fn(*args, **kwargs)
        with listeners.launching(self, args, kwargs):
            leaves, spec = pytree.tree_flatten((args, kwargs))
            if any(interop.is_fake(x) for x in leaves):
                return self._fake_outputs(leaves, spec)
            return self._run(leaves, spec, self.target())[0]

    def target(self, name=None):
        return targets.get(name or self.kernel.platform_target)

    def key(self, leaves, spec, target):
        """Specialization key: tensor shapes/dtypes/layouts, constant values, grid and target."""
        parts = []
        for x in leaves:
            if interop.is_tensor_arg(x):
                parts.append(
                    ("tensor", interop.shape_of(x), interop.dtype_of(x), interop.strides_of(x))
                )
            else:
                try:
                    parts.append(("const", hash(x), type(x)))
                except TypeError:
                    parts.append(("const", repr(x)))
        return (spec, tuple(parts), self.grid, target.name)

    def specialization(self, args, kwargs, target=None):
        """The cached specialization for these arguments, running the kernel on copies if new."""
        leaves, spec = pytree.tree_flatten((args, kwargs))
        target = self.target(target)
        key = self.key(leaves, spec, target)
        found = self.kernel.specializations.get(key)
        if found is None:
            with unset_fake_temporarily():
                copies = [_stand_in(x) if interop.is_tensor_arg(x) else x for x in leaves]
                found = self._run(copies, spec, target)[1]
            # Stand-ins for FakeTensors are contiguous: also file it under the caller's key.
            self.kernel.specializations[key] = found
        return found

    def _fake_outputs(self, leaves, spec):
        """Outputs for FakeTensor/meta inputs: shapes come from the specialization."""
        args, kwargs = pytree.tree_unflatten(leaves, spec)
        special = self.specialization(args, kwargs)
        tensors = [x for x in leaves if interop.is_tensor_arg(x)]
        device = tensors[0].device
        news = [
            torch.empty(shape, dtype=dtype.torch, device=device)
            for shape, dtype in special.new_outputs()
        ]
        return special.rebuild(news, tensors)

    def _run(self, leaves, spec, target):
        """Execute every SPMD instance; returns (results, specialization)."""
        key = self.key(leaves, spec, target)
        special = self.kernel.specializations.get(key)
        runs = self._execute([leaves], spec, target, record=special is None)
        result, wrapped, traces, peaks = runs[0]
        arg_allocs = {id(w._alloc): pos for pos, w in enumerate(wrapped[-1].values())}
        if special is None:
            written = set()
            for instance_args in wrapped:
                written.update(
                    pos for pos, w in enumerate(instance_args.values()) if w._alloc.written
                )
            special = Specialization(
                target,
                traces,
                pytree.tree_map(lambda r: _signature(r, arg_allocs), result),
                tuple(sorted(written)),
                *peaks,
            )
            self.kernel.specializations[key] = special
        return self._results(result, arg_allocs, leaves), special

    def run_ranks(self, rank_leaves, spec, target=None):
        """Run the launch on ``len(rank_leaves)`` collective ranks at once; one result per rank."""
        target = self.target(target)
        runs = self._execute(rank_leaves, spec, target, record=False)
        results = []
        for leaves, (result, wrapped, _, _) in zip(rank_leaves, runs):
            arg_allocs = {id(w._alloc): pos for pos, w in enumerate(wrapped[-1].values())}
            results.append(self._results(result, arg_allocs, leaves))
        return results

    def _results(self, result, arg_allocs, leaves):
        tensor_args = [x for x in leaves if interop.is_tensor_arg(x)]
        return pytree.tree_map(lambda r: _convert(r, arg_allocs, tensor_args), result)

    def _execute(self, rank_leaves, spec, target, record):
        """Run every (rank, program) instance in one World.  Per rank: (the last program's
        result, each program's wrapped arguments, traces, peak SBUF/PSUM bytes)."""
        programs = list(itertools.product(*(range(g) for g in self.grid)))
        num_ranks = len(rank_leaves)
        arg_buffer = buffers.shared_hbm if self.grid else buffers.private_hbm
        ranks = []
        for leaves in rank_leaves:
            tensor_idx = [i for i, x in enumerate(leaves) if interop.is_tensor_arg(x)]
            originals = {i: interop.to_host(leaves[i]) for i in tensor_idx}
            ranks.append(
                {
                    "leaves": leaves,
                    "originals": originals,
                    # Device buffers are dense: a strided argument is seen (by .ap() too) in
                    # row-major order, so it runs on a contiguous copy written back afterwards.
                    "hosts": {i: h.contiguous() for i, h in originals.items()},
                    "dtypes": {i: interop.dtype_of(leaves[i]) for i in tensor_idx},
                    "shared": {},
                    "results": [None] * len(programs),
                    "wrapped": [None] * len(programs),
                    "contexts": [None] * len(programs),
                }
            )

        def describe(instance):
            rank, program = divmod(instance, len(programs))
            where = f"program {programs[program]}" if self.grid else "the kernel"
            return f"rank {rank} {where}" if num_ranks > 1 else where

        # The programs of a kernel[2] launch are the two cores of a Logical NeuronCore: they
        # run at the same time and share HBM, so their instructions interleave.
        lnc_cores = tuple(self.grid) == (2,) and target.generation >= 3
        world = spmd.World(num_ranks * len(programs), describe, interleave=lnc_cores)

        def body(instance):
            rank, program = divmod(instance, len(programs))
            state = ranks[rank]
            ctx = runtime.KernelContext(
                target,
                self.grid,
                programs[program],
                state["shared"],
                recorder=[] if record else None,
                world=world,
                instance=instance,
                rank=rank,
                num_ranks=num_ranks,
            )
            state["contexts"][program] = ctx
            with runtime.running(ctx):
                wrapped = {
                    i: NkiTensor.wrap(h, arg_buffer, dtype=state["dtypes"][i])
                    for i, h in state["hosts"].items()
                }
                state["wrapped"][program] = wrapped
                args, kwargs = pytree.tree_unflatten(
                    [wrapped.get(i, x) for i, x in enumerate(state["leaves"])], spec
                )
                state["results"][program] = self.kernel.fn(*args, **kwargs)
                ctx.allocator.finish()

        with runtime.single_threaded():
            world.run(body)
        for state in ranks:
            for i, original in state["originals"].items():
                if state["hosts"][i] is not original:
                    original.copy_(state["hosts"][i])
        runs = []
        for state in ranks:
            contexts = state["contexts"]
            peaks = [
                max(c.allocator.peak[b] for c in contexts) for b in (buffers.sbuf, buffers.psum)
            ]
            traces = [c.recorder for c in contexts]
            runs.append((state["results"][-1], state["wrapped"], traces, peaks))
        return runs


def _stand_in(x):
    """A private host copy of argument ``x``; ones (as vllm-neuron uses) when it has no data."""
    if interop.is_fake(x):
        return torch.ones(interop.shape_of(x), dtype=x.dtype)
    return interop.to_host(x).clone()


def _check_output(r):
    if r.buffer is not buffers.shared_hbm:
        fail("kernel", f"output tensor {r.shape} must be in nl.shared_hbm, got {r.buffer.name}")
    if not r._alloc.written:
        fail("kernel", f"output tensor {r.shape} was never written")


def _signature(r, arg_allocs):
    """The Output describing a returned leaf (non-tensors are kept as they are)."""
    if not isinstance(r, NkiTensor):
        return r
    if id(r._alloc) in arg_allocs:
        return Output(arg=arg_allocs[id(r._alloc)])
    return Output(shape=r.shape, dtype=r.dtype)


def _convert(r, arg_allocs, tensor_args):
    """A returned NkiTensor as the caller's kind: the argument itself, numpy or device tensor."""
    if not isinstance(r, NkiTensor):
        return r
    if id(r._alloc) in arg_allocs:
        return tensor_args[arg_allocs[id(r._alloc)]]
    _check_output(r)
    host = r.host
    torch_args = [t for t in tensor_args if isinstance(t, torch.Tensor)]
    if not torch_args:
        return interop.to_numpy(host, r.dtype)
    return interop.to_device(host, torch_args[0].device)


def jit(
    fn: Callable[..., Any] | None = None,
    *,
    mode: str | None = None,
    platform_target: str | None = None,
    **compile_options: object,
) -> Kernel | Callable[[Callable[..., Any]], Kernel]:
    """Decorate a kernel function; calls run it on the simulator.

    ``mode`` and compiler options (``compile_config``, ``specialization_config``, ...) are
    accepted for source compatibility and ignored: nothing is compiled.
    """
    if fn is None:
        return lambda f: Kernel(f, platform_target=platform_target)
    return Kernel(fn, platform_target=platform_target)


class PerRank:
    """An argument of a multi-rank simulation whose value differs per collective rank."""

    def __init__(self, values):
        self.values = tuple(values)

    def __repr__(self):
        return f"nki.per_rank{self.values!r}"


def per_rank(*values: object) -> PerRank:
    """``nki.per_rank(v0, v1, ...)``: rank ``r`` of a ``num_ranks`` simulation gets ``v_r``."""
    return PerRank(values)


class RankLaunch:
    """A launch run on ``num_ranks`` collective ranks (logical NeuronCores) at once."""

    def __init__(self, launch, num_ranks):
        num_ranks = int(num_ranks)
        if num_ranks < 1:
            raise ValueError(f"num_ranks must be positive, got {num_ranks}")
        self.launch = launch
        self.num_ranks = num_ranks

    def __call__(self, *args, **kwargs):
        leaves, spec = pytree.tree_flatten((args, kwargs))
        for x in leaves:
            if isinstance(x, PerRank) and len(x.values) != self.num_ranks:
                raise ValueError(
                    f"{x!r} has {len(x.values)} values for {self.num_ranks} ranks; "
                    "give one per rank"
                )
        rank_leaves = [
            [x.values[r] if isinstance(x, PerRank) else x for x in leaves]
            for r in range(self.num_ranks)
        ]
        return self.launch.run_ranks(rank_leaves, spec)


def simulate(
    kernel: Kernel | Launch | Callable[..., Any], num_ranks: int | None = None
) -> Kernel | Launch | RankLaunch:
    """A callable running ``kernel`` (a jit kernel, a ``kernel[grid]`` or a function) on the CPU.

    With ``num_ranks`` the kernel runs on that many collective ranks at once (``nki.collectives``
    connect them); arguments wrapped in ``nki.per_rank(...)`` differ per rank, and the call
    returns the list of the ranks' results.
    """
    launch = kernel if isinstance(kernel, (Kernel, Launch)) else Kernel(kernel)
    if num_ranks is None:
        return launch
    if isinstance(launch, Kernel):
        launch = Launch(launch, ())
    return RankLaunch(launch, num_ranks)


def cpu_simulate(
    kernel: Kernel | Launch | Callable[..., Any], num_ranks: int | None = None
) -> Kernel | Launch | RankLaunch:
    """``nki.simulate`` as AWS's simulator package spells it (``nki.cpu_simulate(k)[lnc](...)``,
    the entry point of harnesses written for it): the target is ``NKI_NC_VERSION`` (gen2, gen3,
    gen4 or a trn name) when set, read at this call, else as for ``nki.simulate``."""
    version = os.environ.get("NKI_NC_VERSION", "").strip()
    if version:
        try:
            targets.get(version)
        except ValueError as e:
            raise ValueError(f"NKI_NC_VERSION: {e}") from None
        if isinstance(kernel, Launch):
            kernel = Launch(kernel.kernel.targeting(version), kernel.grid)
        else:
            kernel = (kernel if isinstance(kernel, Kernel) else Kernel(kernel)).targeting(version)
    return simulate(kernel, num_ranks)
