"""Settings of the neuron compile backend: environment variables and ``torch.compile`` options."""

import dataclasses
import os
import re
import warnings

from torch_neuronx import _config as env

DEFAULT_MODEL_NAME = "model"


def cache_dir():
    """Root of the persistent compile cache (the NEFF cache's role)."""
    return os.path.abspath(os.path.expanduser(env.get("TORCH_NEURONX_NEFF_CACHE_DIR")))


def cache_disabled():
    """True when TORCH_NEURONX_NEFF_DISABLE_CACHE (or its other spelling) turns the cache off."""
    return env.get("TORCH_NEURONX_NEFF_DISABLE_CACHE") or env.get(
        "TORCH_NEURONX_DISABLE_NEFF_CACHE"
    )


def cache_limits():
    """(most bytes, most entries) the persistent cache keeps; None where there is no limit."""
    size_mb = env.get("NEURON_COMPILATION_CACHE_MAX_SIZE_MB")
    entries = env.get("NEURON_COMPILATION_CACHE_MAX_ENTRIES")
    for name, value in (
        ("NEURON_COMPILATION_CACHE_MAX_SIZE_MB", size_mb),
        ("NEURON_COMPILATION_CACHE_MAX_ENTRIES", entries),
    ):
        if value != "" and value < 1:
            raise ValueError(f"{name}={value} must be at least 1 (unset means no limit)")
    return (size_mb * 2**20 if size_mb != "" else None, entries if entries != "" else None)


def cache_lock_timeout():
    """Seconds to wait for another process that is compiling the same graph."""
    return env.get("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT")


def debug_dir():
    """Where FX graphs and generated code go when artifacts are preserved."""
    return env.get("TORCH_NEURONX_DEBUG_DIR")


def preserve_artifacts():
    """True when TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS asks to keep graphs and code."""
    return env.get("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS")


def cpu_autocopy_disabled():
    """True when CPU inputs to a compiled graph must raise instead of being taken as device data."""
    return env.get("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY")


@dataclasses.dataclass(frozen=True)
class Options:
    """What one ``torch.compile(backend="neuron", ...)`` call asked for."""

    model_name: str = DEFAULT_MODEL_NAME
    fallback_execution: bool = False

    @classmethod
    def parse(cls, mode=None, options=None):
        """Reads ``mode`` and ``options`` as TorchNeuron does: only a few keys mean anything."""
        if mode not in (None, "default"):
            warnings.warn(
                f"Neuron backend does not support mode={mode!r}, falling back to default",
                stacklevel=3,
            )
        options = options or {}
        # The option overrides the environment; the environment defaults to raising.
        fallback = options.get("fallback_execution")
        if fallback is None:
            fallback = not env.get("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION")
        name = str(options.get("model_name") or DEFAULT_MODEL_NAME)
        # The name becomes part of file names, so keep it to a portable alphabet.
        return cls(
            model_name=re.sub(r"[^A-Za-z0-9_.-]", "_", name), fallback_execution=bool(fallback)
        )
