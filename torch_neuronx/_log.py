"""The ``torch_neuronx`` logger. TORCH_NEURONX_LOG_LEVEL sets its level: a name (DEBUG, INFO,
WARNING, ERROR) or a number (0 = ERROR, 1 = WARNING, 2 = INFO, 3 = DEBUG); TORCH_NEURONX_LOG_FILE
sends it to a file; TORCH_NEURONX_ENABLE_STACK_TRACE=1 adds the Python stack to its warnings."""

import logging

import torch

from torch_neuronx import _config as config

logger = logging.getLogger("torch_neuronx")
_NUMERIC = {"0": logging.ERROR, "1": logging.WARNING, "2": logging.INFO, "3": logging.DEBUG}


def _configure():
    level = config.get("TORCH_NEURONX_LOG_LEVEL").upper()
    if level:
        value = _NUMERIC.get(level, getattr(logging, level, None))
        if not isinstance(value, int):
            raise ValueError(
                f"TORCH_NEURONX_LOG_LEVEL={level!r} is not a log level; use DEBUG, "
                "INFO, WARNING, ERROR or 0-3"
            )
        logger.setLevel(value)
    if not logger.handlers:
        path = config.get("TORCH_NEURONX_LOG_FILE")
        handler = logging.FileHandler(path) if path else logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False


def _log(level, message):
    value = getattr(logging, level, logging.WARNING)
    logger.log(value, message, stack_info=value >= logging.WARNING and _stack_traces)


def warn_hardware_only():
    """Logs one line naming the hardware-only variables set, if any (config.HARDWARE_ONLY)."""
    chosen = config.hardware_only_set()
    if chosen:
        logger.warning(
            "%s: TorchNeuron variable%s for Trainium hardware, with no effect on the emulator "
            "(`torchneuron info` says why)",
            ", ".join(f"{n}={v}" for n, v in chosen.items()),
            "s" if len(chosen) > 1 else "",
        )


_configure()
_stack_traces = config.get("TORCH_NEURONX_ENABLE_STACK_TRACE")
# The C++ runtime reports through this op, so it needs no Python bindings of its own.
_library = torch.library.Library("neuron", "FRAGMENT")
_library.define("log(str level, str message) -> ()")
_library.impl("log", _log, "CompositeImplicitAutograd")
