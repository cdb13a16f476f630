"""``torch.neuron``: the device module, shaped like ``torch.cuda``.

Every name of ``torch.cuda.__all__`` that means something for a non-CUDA device is here with
that meaning; the rest are listed, with the way out, in ``_omitted.OMITTED`` and
docs/device_module.md."""

from torch_neuronx._dynamo.metrics import get_dynamo_metrics, reset_dynamo_metrics
from torch_neuronx.neuron import _omitted, amp, memory, random, streams
from torch_neuronx.neuron._device import (
    _is_in_bad_fork,
    _lazy_init,
    can_device_access_peer,
    current_device,
    device,
    device_count,
    device_memory_used,
    device_of,
    get_amp_supported_dtype,
    get_arch_list,
    get_device_capability,
    get_device_name,
    get_device_properties,
    has_half,
    init,
    ipc_collect,
    is_available,
    is_bf16_supported,
    is_initialized,
    is_neuron_runtime_initialized,
    is_tf32_supported,
    set_device,
    synchronize,
    utilization,
)
from torch_neuronx.neuron._tensors import STORAGE_TYPES, TENSOR_TYPES
from torch_neuronx.neuron.random import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from torch_neuronx.neuron.streams import (
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    is_current_stream_capturing,
    set_stream,
    stream,
)

# memory.py's names appear here as it adds them.
globals().update({name: getattr(memory, name) for name in memory.__all__})
globals().update(TENSOR_TYPES)
globals().update(STORAGE_TYPES)

_default_generators = None


def __getattr__(name: str) -> object:
    global _default_generators
    if name in _omitted.OMITTED:
        raise _omitted.missing(name)
    if name == "default_generators":
        # Built on first use: counting the cores would start the runtime at import.
        if _default_generators is None:
            _default_generators = random._default_generators()
        return _default_generators
    raise AttributeError(f"module 'torch.neuron' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "Event",
    "Stream",
    "StreamContext",
    "amp",
    "can_device_access_peer",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "device_memory_used",
    "device_of",
    "get_amp_supported_dtype",
    "get_arch_list",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_dynamo_metrics",
    "get_rng_state",
    "get_rng_state_all",
    "has_half",
    "init",
    "initial_seed",
    "ipc_collect",
    "is_available",
    "is_bf16_supported",
    "is_current_stream_capturing",
    "is_initialized",
    "is_neuron_runtime_initialized",
    "is_tf32_supported",
    "manual_seed",
    "manual_seed_all",
    "memory",
    "random",
    "reset_dynamo_metrics",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "stream",
    "streams",
    "synchronize",
    "utilization",
    *TENSOR_TYPES,
    *STORAGE_TYPES,
    *memory.__all__,
]
if "default_generators" not in _omitted.OMITTED:
    __all__.append("default_generators")

# The names TorchNeuron's guides and examples call on ``torch_neuronx`` itself
# (``torch_neuronx.current_device()``, ``torch_neuronx.Stream``, ``torch_neuronx.memory_*``):
# torch_neuronx re-exports these objects, so each has one definition.
DEVICE_API = (
    "current_device",
    "set_device",
    "device_count",
    "get_device_properties",
    "synchronize",
    "Stream",
    "Event",
    "stream",
    "StreamContext",
    "current_stream",
    "default_stream",
    "set_stream",
    "device",
    "empty_cache",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "memory_stats",
    "memory_summary",
    "reset_peak_memory_stats",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "is_neuron_runtime_initialized",
)
