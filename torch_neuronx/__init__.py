"""torchneuron: PyTorch's ``neuron`` (AWS Trainium) device, with NeuronCores emulated on the host.

Importing torch loads this package through the ``torch.backends`` entry point; afterwards
``torch.device("neuron")``, ``torch.neuron`` and ``torch.accelerator`` work as on Trainium.
"""


def _autoload():
    """Entry point for ``torch.backends``: importing this module is all the work."""


# Defined before importing torch: `import torch_neuronx` imports torch, whose autoload then
# looks up _autoload on this partially initialised module. The order below is the load order.
import importlib.metadata as _metadata
import pkgutil as _pkgutil

# In a checkout, the compiled modules come from the build directory of the installed torch (one
# per supported version, named by torch_neuronx.pkg in the venv: see the Makefile), ahead of any
# copy that an editable install built beside this file for another torch.
__path__ = _pkgutil.extend_path(__path__, __name__)[::-1]

import torch as _torch

from torch_neuronx import _library

# TorchNeuron's torch.neuron reference: with another PrivateUse1 backend imported first,
# torch_neuronx leaves the device registration to it, and torch.neuron is not created.
_OTHER_BACKEND = _library.other_privateuse1_backend()
if _OTHER_BACKEND:
    _library.yield_to(_OTHER_BACKEND)
else:
    _library.load()

    from torch_neuronx import _log  # C++ logs through it

    _log.warn_hardware_only()
    from torch_neuronx import neuron  # needs the library

    _library.register_device_module(neuron)
    # TorchNeuron's top-level device API is torch.neuron's own functions and classes.
    globals().update({_name: getattr(neuron, _name) for _name in neuron.DEVICE_API})

    from torch_neuronx import adaptive_eager
    from torch_neuronx import distributed  # registers the "neuron" c10d backend
    from torch_neuronx import _flex_attention
    from torch_neuronx import metrics
    from torch_neuronx import profiler
    from torch_neuronx import profiling
    from torch_neuronx._dynamo import default_backend as _default_backend
    from torch_neuronx._dynamo.metrics import counters as _dynamo_counters
    from torch_neuronx._dynamo.metrics import get_dynamo_metrics, reset_dynamo_metrics
    from torch_neuronx._op_tracking import clear_op_tracking, get_executed_ops, get_fallback_ops
    from torch_neuronx.profiler import NeuronConfig, NeuronProfiler, ProfileMode
    from torch_neuronx._rng import get_rng_source, rng_source, set_rng_source
    from torch_neuronx._roofline import estimate

    metrics.register_source(_dynamo_counters, reset_dynamo_metrics)
    _default_backend.install()
    _flex_attention.install()

__version__ = _metadata.version("torch-neuronx")


def __getattr__(name):
    # NKI is imported on first use so that `import torch` stays cheap.
    if name == "nki":
        import nki

        return nki
    if name in ("nki_op", "wrap_nki"):
        from nki import torch_integration

        return getattr(torch_integration, name)
    if _OTHER_BACKEND:
        raise AttributeError(
            f"torch_neuronx.{name}: the neuron device is not registered, since PrivateUse1 is "
            f"the {_OTHER_BACKEND!r} device of a backend imported before torch_neuronx"
        )
    raise AttributeError(f"module 'torch_neuronx' has no attribute {name!r}")


__all__ = [
    "NeuronConfig",
    "NeuronProfiler",
    "ProfileMode",
    "adaptive_eager",
    "clear_op_tracking",
    "distributed",
    "estimate",
    "get_dynamo_metrics",
    "get_executed_ops",
    "get_fallback_ops",
    "get_rng_source",
    "metrics",
    "neuron",
    "nki",
    "nki_op",
    "profiler",
    "profiling",
    "wrap_nki",
    "reset_dynamo_metrics",
    "rng_source",
    "set_rng_source",
]
__all__ = [] if _OTHER_BACKEND else [*__all__, *neuron.DEVICE_API]
