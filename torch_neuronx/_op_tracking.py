"""Which ops ran natively on the emulated NeuronCore and which went through the CPU fallback."""

import torch

_NATIVE, _FALLBACK = "NativeOp::", "FallbackOp::"


def _ops(prefix):
    names, values = torch.ops.neuron.counters()
    return sorted(n[len(prefix) :] for n, v in zip(names, values) if v and n.startswith(prefix))


def get_fallback_ops() -> list[str]:
    """Ops that executed via CPU fallback since the last clear, e.g. ``['aten::nonzero']``."""
    return _ops(_FALLBACK)


def get_executed_ops() -> list[str]:
    """Ops that executed natively on the device since the last clear."""
    return _ops(_NATIVE)


def clear_op_tracking() -> None:
    """Forgets the ops recorded so far (the metrics op counters too)."""
    torch.ops.neuron.clear_counters()
