"""The ``torch_neuronx`` logger. TORCH_NEURONX_LOG_LEVEL sets its level: a name (DEBUG, INFO,
WARNING, ERROR) or a number (0 = ERROR, 1 = WARNING, 2 = INFO, 3 = DEBUG)."""

import logging

import torch

from torch_neuronx import config

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
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False


def _log(level, message):
    logger.log(getattr(logging, level, logging.WARNING), message)


_configure()
# The C++ runtime reports through this op, so it needs no Python bindings of its own.
_library = torch.library.Library("neuron", "FRAGMENT")
_library.define("log(str level, str message) -> ()")
_library.impl("log", _log, "CompositeImplicitAutograd")
