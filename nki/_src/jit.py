"""nki.jit: launching kernels on host tensors, SPMD grids, specialization and nki.simulate.

A call executes the kernel body eagerly on the simulator (every nki.isa call is a vectorized
torch operation on the arguments' memory).  The first call for a given (shapes, dtypes,
constant arguments, grid, target) also records the instruction trace, the output signature
and which inputs were written; that *specialization* is cached and serves the cost model and
shape inference for FakeTensors.  Nothing is compiled.
"""

import functools
import itertools
from dataclasses import dataclass

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.utils import _pytree as pytree

from . import buffers, interop, runtime, targets
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

    def __init__(self, fn, platform_target=None):
        self.fn = fn
        self.platform_target = platform_target
        self.specializations = {}
        functools.update_wrapper(self, fn)

    def __getitem__(self, grid):
        return Launch(self, grid)

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
            torch.empty(shape, dtype=dtype, device=device) for shape, dtype in special.new_outputs()
        ]
        return special.rebuild(news, tensors)

    def _run(self, leaves, spec, target):
        """Execute every SPMD instance; returns (results, specialization)."""
        key = self.key(leaves, spec, target)
        special = self.kernel.specializations.get(key)
        tensor_idx = [i for i, x in enumerate(leaves) if interop.is_tensor_arg(x)]
        hosts = {i: interop.to_host(leaves[i]) for i in tensor_idx}
        arg_buffer = buffers.shared_hbm if self.grid else buffers.private_hbm
        shared, traces, peaks, result, wrapped = {}, [], [0, 0], None, {}
        indices = itertools.product(*(range(g) for g in self.grid))
        for index in indices:
            ctx = runtime.KernelContext(
                target, self.grid, index, shared, recorder=[] if special is None else None
            )
            with runtime.running(ctx), runtime.single_threaded():
                wrapped = {i: NkiTensor.wrap(h, arg_buffer) for i, h in hosts.items()}
                args, kwargs = pytree.tree_unflatten(
                    [wrapped.get(i, x) for i, x in enumerate(leaves)], spec
                )
                result = self.kernel.fn(*args, **kwargs)
            traces.append(ctx.recorder)
            peaks = [
                max(peaks[0], ctx.allocator.peak[buffers.sbuf]),
                max(peaks[1], ctx.allocator.peak[buffers.psum]),
            ]
        arg_allocs = {id(w._alloc): pos for pos, w in enumerate(wrapped.values())}
        if special is None:
            special = Specialization(
                target,
                traces,
                pytree.tree_map(lambda r: _signature(r, arg_allocs), result),
                tuple(pos for pos, w in enumerate(wrapped.values()) if w._alloc.written),
                *peaks,
            )
            self.kernel.specializations[key] = special
        tensor_args = [leaves[i] for i in tensor_idx]
        return pytree.tree_map(lambda r: _convert(r, arg_allocs, tensor_args), result), special


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
        return interop.to_numpy(host)
    return interop.to_device(host, torch_args[0].device)


def jit(fn=None, *, mode=None, platform_target=None, **compile_options):
    """Decorate a kernel function; calls run it on the simulator.

    ``mode`` and compiler options (``compile_config``, ``specialization_config``, ...) are
    accepted for source compatibility and ignored: nothing is compiled.
    """
    if fn is None:
        return lambda f: Kernel(f, platform_target=platform_target)
    return Kernel(fn, platform_target=platform_target)


def simulate(kernel):
    """A callable running ``kernel`` (a jit kernel, a ``kernel[grid]`` or a function) on the CPU."""
    if isinstance(kernel, (Kernel, Launch)):
        return kernel
    return Kernel(kernel)
