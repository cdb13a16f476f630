"""Debug artifacts: the FX graphs and generated code of each compile, kept on request.

With ``TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1`` they are written under
``TORCH_NEURONX_DEBUG_DIR`` as ``fx_graphs/proc_<rank>/<name>.fx.txt`` and
``generated/proc_<rank>/<name>.py``, the generated module holding the C++ kernels.
"""

import os
import time

from torch_neuronx._dynamo import cache, config


def _write(kind, filename, text):
    rank = os.environ.get("RANK", "0")
    folder = os.path.join(config.debug_dir(), kind, f"proc_{rank}")
    with cache.owner_only():
        os.makedirs(folder, mode=0o700, exist_ok=True)
        with open(os.path.join(folder, filename), "w") as f:
            f.write(text)


def stamp(name):
    """``name`` made unique per run, as TorchNeuron names its artifacts."""
    return f"{name}_{time.strftime('%Y%m%d-%H%M%S')}_{os.getpid()}"


def save_graph(name, gm):
    """Keeps the readable code of an FX graph, shapes and devices included."""
    if config.preserve_artifacts():
        text = gm.print_readable(print_output=False, include_stride=True, include_device=True)
        _write("fx_graphs", f"{name}.fx.txt", text)


def save_code(name, compiled):
    """Keeps the code that Inductor generated for a graph."""
    source = getattr(compiled, "source_code", None)
    if config.preserve_artifacts() and source:
        _write("generated", f"{name}.py", source)
