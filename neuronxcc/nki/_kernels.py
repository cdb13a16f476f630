"""Kernel entry points of the pre-0.2 API: ``jit(mode=...)``, ``trace``, ``simulate_kernel``,
``baremetal``, ``benchmark`` and ``profile``, all running on the simulator.

Old kernels may return tensors in private HBM or on chip (the old simulator handed back
whatever array a kernel returned); the layer makes such results kernel outputs: an HBM
tensor is returned as it is, an SBUF/PSUM tile is first copied out to a new HBM tensor.
"""

import functools

import numpy as np
import torch
from torch.utils import _pytree as pytree

import nki.language as nl
from nki import Kernel
from nki._src.legacy_api import BenchmarkKernel, Launch, normalize_dtype, to_sbuf
from nki.isa import dma_copy
from nki.language import NkiTensor
from nki.typing import TensorType

from ._index import running_old_kernel

MODES = ("auto", "simulation", "baremetal", "benchmark", "trace", "jax", "torchxla")


def _output(r):
    """A returned tensor as a kernel output (see the module docstring)."""
    if not isinstance(r, NkiTensor):
        return r
    if r.buffer.on_chip:
        out = NkiTensor.allocate(r.shape, r.dtype, nl.shared_hbm, op="return")
        dma_copy(dst=out, src=to_sbuf(r))
        return out
    if r.buffer is nl.private_hbm:
        r._alloc.buffer = nl.shared_hbm
    return r


def _source(kernel):
    """The user's kernel function behind a function, a jit kernel or an old-API wrapper."""
    if isinstance(kernel, Benchmark):
        kernel = kernel.launch.launch
    if isinstance(kernel, Launch):
        kernel = kernel.kernel
    if isinstance(kernel, Kernel):
        kernel = kernel.fn
    return getattr(kernel, "__nki_source__", kernel)


def _old_body(fn):
    """``fn`` run with the pre-0.2 semantics (tile-valued indices, old kernel outputs)."""

    @functools.wraps(fn)
    def body(*args, **kwargs):
        with running_old_kernel():
            result = fn(*args, **kwargs)
            return pytree.tree_map(_output, result)

    body.__nki_source__ = fn
    return body


def jit(func=None, mode="auto", platform_target=None, **kwargs):
    """Decorate an old-API kernel; calls run it on the simulator whatever the ``mode``
    (``benchmark`` also attaches the cost-model estimate).  Compiler options are ignored."""
    if mode not in MODES:
        raise ValueError(f"nki.jit mode must be one of {', '.join(MODES)}, got {mode!r}")
    if func is None:
        return lambda f: jit(f, mode=mode, platform_target=platform_target, **kwargs)
    kernel = Kernel(_old_body(_source(func)), platform_target=platform_target)
    return Benchmark(kernel) if mode == "benchmark" else kernel


def trace(func=None, **kwargs):
    """The old tracing decorator: the same as ``jit``."""
    return jit(func, **kwargs)


def baremetal(kernel=None, **kwargs):
    """Run on the simulator with NumPy inputs and outputs (artifact options are ignored)."""
    return jit(kernel, **{k: v for k, v in kwargs.items() if k == "platform_target"})


def simulate_kernel(kernel, *args, **kwargs):
    """Run ``kernel`` (a function or a jit kernel, ``kernel[grid]`` too) on the simulator."""
    if isinstance(kernel, Launch):
        return Launch(jit(kernel.kernel), kernel.grid)(*args, **kwargs)
    target = kernel.platform_target if isinstance(kernel, Kernel) else None
    return jit(kernel, platform_target=target)(*args, **kwargs)


def _example(arg, rng):
    """A random input for a ``tensor[[shape], dtype]`` placeholder; other arguments as given."""
    if not isinstance(arg, TensorType):
        return arg
    dtype = normalize_dtype(np.float32 if arg.dtype is None else arg.dtype, "benchmark")
    values = torch.rand(arg.shape, generator=rng).to(dtype.torch)
    return values.numpy() if dtype in (torch.float32, torch.float16) else values


class Benchmark:
    """``nki.benchmark`` / ``nki.profile`` kernel: each call runs the kernel on the simulator
    and attaches the cost model's ESTIMATE as ``benchmark_result.nc_latency`` (no hardware
    run, no NEFF or profile files)."""

    def __init__(self, kernel, target=None):
        self.launch = BenchmarkKernel(kernel, target)

    def __getitem__(self, grid):
        found = Benchmark.__new__(Benchmark)
        found.launch = self.launch[grid]
        return found

    def __call__(self, *args, **kwargs):
        rng = torch.Generator().manual_seed(0)
        return self.launch(*(_example(a, rng) for a in args), **kwargs)

    @property
    def benchmark_result(self):
        return self.launch.benchmark_result


def benchmark(kernel=None, warmup=None, iters=None, platform_target=None, **kwargs):
    """Run and estimate (``warmup``, ``iters`` and file options are accepted and ignored)."""
    if kernel is None:
        return lambda k: benchmark(k, platform_target=platform_target)
    return Benchmark(jit(kernel, platform_target=platform_target))


def profile(func=None, platform_target=None, **kwargs):
    """As ``benchmark``: the estimate stands in for the profile (no files are written)."""
    return benchmark(func, platform_target=platform_target)
