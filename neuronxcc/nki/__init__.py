"""neuronxcc.nki: the pre-0.2 NKI API, run on the ``nki`` simulator.

``import neuronxcc.nki as nki`` with ``neuronxcc.nki.language``, ``.isa``, ``.typing`` and
``.compiler`` gives kernels written for the old API (``nl.arange``/``nl.mgrid`` indexing,
``mask=``, ``nl.par_dim`` block dimensions, ISA calls that return tiles,
``nki.simulate_kernel``, ``nki.baremetal``/``benchmark``/``profile``) to the simulator
unchanged.  nki/README.md ("The neuronxcc.nki compatibility layer") lists what differs.
"""

from nki import NkiValidationError
from nki.language import NkiTensor as tensor

from . import compiler, isa, language, typing
from ._kernels import baremetal, benchmark, jit, profile, simulate_kernel, trace
from ._legacy import install

install()

__all__ = [
    "NkiValidationError",
    "baremetal",
    "benchmark",
    "compiler",
    "isa",
    "jit",
    "language",
    "profile",
    "simulate_kernel",
    "tensor",
    "trace",
    "typing",
]
