"""Debug artifacts: one job directory per compiled graph, kept on request.

TorchNeuron keeps a job-based hierarchy under ``TORCH_NEURONX_DEBUG_DIR`` (AWS's "What are
Neuron Compiler artifacts?"): for each graph, its FX graph and the compiler's working directory
with the options it ran with (``compiler_args.txt``). Here, with
``TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1``, each Dynamo graph is a job directory
``proc_<rank>/<model>_<compile id>_<time>_<pid>/`` holding

- ``dynamo.fx.txt``: the graph Dynamo captured;
- ``<part>.fx.txt`` for each part AOT autograd made of it (``forward``, ``backward``,
  ``inference``), as it was compiled;
- ``<part>.py``: the code Inductor generated for that part (C++ kernels included), where
  TorchNeuron has StableHLO and a NEFF;
- ``compiler_args.txt``: what the job compiled with, one ``name=value`` per line.
"""

import os
import time

import torch

from torch_neuronx._dynamo import cache, config


def job(name):
    """The job directory's name for graph ``name``: unique per run, as TorchNeuron's are."""
    return f"{name}_{time.strftime('%Y%m%d-%H%M%S')}_{os.getpid()}"


def _write(job_name, filename, text):
    folder = os.path.join(config.debug_dir(), f"proc_{os.environ.get('RANK', '0')}", job_name)
    with cache.owner_only():
        os.makedirs(folder, mode=0o700, exist_ok=True)
        with open(os.path.join(folder, filename), "w") as f:
            f.write(text)


def save_args(job_name, options):
    """Records the job's options and the settings that shape its code."""
    if not config.preserve_artifacts():
        return
    from torch_neuronx import _config as runtime_config
    from torch_neuronx._dynamo.compiler import CODEGEN_VERSION

    args = {
        "model_name": options.model_name,
        "fallback_execution": options.fallback_execution,
        "platform": torch.ops.neuron.platform(torch.neuron.current_device())[0],
        "logical_nc_config": runtime_config.logical_core_size(),
        "64bit_policy": torch.ops.neuron.policy_64bit(),
        "rng_source": torch.ops.neuron.rng_source(),
        "torch": torch.__version__,
        "codegen": CODEGEN_VERSION,
    }
    _write(job_name, "compiler_args.txt", "".join(f"{k}={v}\n" for k, v in args.items()))


def save_graph(job_name, part, gm):
    """Keeps the readable code of an FX graph, shapes and devices included."""
    if config.preserve_artifacts():
        text = gm.print_readable(print_output=False, include_stride=True, include_device=True)
        _write(job_name, f"{part}.fx.txt", text)


def save_code(job_name, part, compiled):
    """Keeps the code that Inductor generated for a part of the graph."""
    source = getattr(compiled, "source_code", None)
    if config.preserve_artifacts() and source:
        _write(job_name, f"{part}.py", source)
