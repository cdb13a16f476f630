"""nki: the Neuron Kernel Interface (0.7 API), simulated on the host with torch.

Kernels are written against ``nki.language`` (nl) and ``nki.isa`` (nisa) and decorated with
``@nki.jit``; calls run them on the arguments' memory (numpy, CPU or neuron tensors) with
stricter checks than AWS's simulator, and ``nki.estimate`` gives an analytical trn2/trn3
latency estimate.  PyTorch integration lives in ``nki.torch_integration``.  The simulator
itself is the private ``nki._src`` package.
"""

from . import collectives, cost_model, dtype, isa, language, typing  # noqa: F401
from ._src.cost_model import CostReport, benchmark, estimate
from ._src.errors import NkiValidationError
from ._src.jit import Kernel, cpu_simulate, jit, per_rank, simulate

__all__ = [
    "CostReport",
    "Kernel",
    "NkiValidationError",
    "benchmark",
    "collectives",
    "cpu_simulate",
    "dtype",
    "estimate",
    "isa",
    "jit",
    "language",
    "per_rank",
    "simulate",
    "typing",
]
