"""Settings of the neuron compile backend: environment variables and ``torch.compile`` options."""

import dataclasses
import os
import re
import warnings

DEFAULT_MODEL_NAME = "model"


def env_flag(name, default):
    """A boolean environment variable (0/false/no/off are False; unset means ``default``)."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    return value not in ("0", "false", "no", "off")


def cache_dir():
    """Root of the persistent compile cache (the NEFF cache's role)."""
    path = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR") or "~/.cache/torchneuron"
    return os.path.abspath(os.path.expanduser(path))


def cache_lock_timeout():
    """Seconds to wait for another process that is compiling the same graph."""
    return float(os.environ.get("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", "600"))


def debug_dir():
    """Where FX graphs and generated code go when artifacts are preserved."""
    return os.environ.get("TORCH_NEURONX_DEBUG_DIR") or "/tmp/neuron_backend"


def preserve_artifacts():
    """True when TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS asks to keep graphs and code."""
    return env_flag("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", False)


def cpu_autocopy_disabled():
    """True when CPU inputs to a compiled graph must raise instead of being taken as device data."""
    return env_flag("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", False)


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
                stacklevel=3)
        options = options or {}
        # The option overrides the environment; the environment defaults to raising.
        fallback = options.get("fallback_execution")
        if fallback is None:
            fallback = not env_flag("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", True)
        name = str(options.get("model_name") or DEFAULT_MODEL_NAME)
        # The name becomes part of file names, so keep it to a portable alphabet.
        return cls(model_name=re.sub(r"[^A-Za-z0-9_.-]", "_", name),
                   fallback_execution=bool(fallback))
