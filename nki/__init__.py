"""nki: the Neuron Kernel Interface (0.7 API), simulated on the host with torch.

Kernels are written against ``nki.language`` (nl) and ``nki.isa`` (nisa) and decorated with
``@nki.jit``; calls run them on the arguments' memory (numpy, CPU or neuron tensors) with
stricter checks than AWS's simulator, and ``nki.estimate`` gives an analytical trn2/trn3
latency estimate.  PyTorch integration lives in ``nki.torch_integration``; tools observe
launches and validation failures through ``nki.listeners``.  The simulator
itself is the private ``nki._src`` package.

The public names load on first use (PEP 562): the device runtime reads the platform table and
the trace channel from ``nki._src`` at ``import torch``, and must not pay for the simulator.
"""

import importlib
from typing import TYPE_CHECKING

# Public name -> the module that defines it (a submodule of nki is its own entry).
_PUBLIC = {
    "CostReport": "._src.cost_model",
    "Kernel": "._src.jit",
    "NkiValidationError": "._src.errors",
    "benchmark": "._src.cost_model",
    "collectives": ".collectives",
    "cpu_simulate": "._src.jit",
    "cost_model": ".cost_model",
    "dtype": ".dtype",
    "estimate": "._src.cost_model",
    "isa": ".isa",
    "jit": "._src.jit",
    "language": ".language",
    "listeners": ".listeners",
    "per_rank": "._src.jit",
    "simulate": "._src.jit",
    "typing": ".typing",
}

if TYPE_CHECKING:
    from . import collectives, cost_model, dtype, isa, language, listeners, typing
    from ._src.cost_model import CostReport, benchmark, estimate
    from ._src.errors import NkiValidationError
    from ._src.jit import Kernel, cpu_simulate, jit, per_rank, simulate


def __getattr__(name):
    where = _PUBLIC.get(name)
    if where is None:
        raise AttributeError(f"module 'nki' has no attribute {name!r}")
    module = importlib.import_module(where, __name__)
    value = module if where == f".{name}" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_PUBLIC})


__all__ = sorted(n for n in _PUBLIC if n not in ("cost_model",))
