"""Stand-in for AWS's ``nki_cpu_simulator`` package (not public): its ``nki`` namespace is ours.

nki-library's simulation harness imports ``nki_cpu_simulator.nki`` and the submodules below,
installs them as ``sys.modules["nki", "nki.language", ...]`` and calls
``nki.cpu_simulate(kernel)[lnc](**inputs)`` with ``NKI_NC_VERSION`` set.  ``nki`` and
``nki.language`` here are views of ours that add the package's extra submodule names
(``nki.language.dtypes`` is our ``nki.dtype``); ours has no ``nki.builtin``, ``nki.compiler``
or ``nki.tensor`` for kernels to use, so those are empty (the harness only aliases them, and
nki-library's kernels do not use them).  The harness's compile path (``test/utils/
kernel_tracer.py``, for tests marked ``trace_only``) imports ``nki.compiler.frontend``: AWS's
compiler front end (Python to MLIR), which is not part of NKI's public API and not provided.
"""

import sys
import types

import nki as _nki
import nki.dtype
import nki.isa
import nki.isa.constants
import nki.language
import nki.typing


def _view(name, target, **extra):
    """A module named ``name`` with ``extra`` attributes, reading all others from ``target``."""
    module = types.ModuleType(name, target.__doc__)
    module.__dict__.update(extra, __getattr__=lambda attr: getattr(target, attr))
    sys.modules[name] = module
    return module


def _empty(name):
    module = types.ModuleType(name, "not provided by this simulator")
    sys.modules[name] = module
    return module


_language = _view(f"{__name__}.nki.language", _nki.language, dtypes=_nki.dtype)
sys.modules[f"{__name__}.nki.language.dtypes"] = _nki.dtype
nki = _view(
    f"{__name__}.nki",
    _nki,
    language=_language,
    builtin=_empty(f"{__name__}.nki.builtin"),
    compiler=_empty(f"{__name__}.nki.compiler"),
    tensor=_empty(f"{__name__}.nki.tensor"),
)
for _name in ("isa", "isa.constants", "typing"):
    sys.modules[f"{__name__}.nki.{_name}"] = sys.modules[f"nki.{_name}"]
