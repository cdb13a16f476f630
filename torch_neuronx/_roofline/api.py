"""``torch_neuronx.estimate``: the ESTIMATE of one call of a model, from Python."""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .capture import Recorder, tensors_in
from .report import Estimate

if TYPE_CHECKING:
    import torch


def estimate(
    model: Callable[..., Any],
    *inputs: Any,
    train: bool = False,
    optimizer: "torch.optim.Optimizer | None" = None,
    lnc: int | None = None,
    price_per_hour: float | None = None,
    steps_per_epoch: int | None = None,
    **kwargs: Any,
) -> Estimate:
    """ESTIMATE of one step of ``model(*inputs, **kwargs)`` on trn2 and trn3.

    ``train`` adds the backward of the output (its ``.loss``, the output itself when it is a
    scalar, else its sum) and, with ``optimizer``, its ``step()``. Inputs and parameters may be
    neuron tensors or meta tensors (shapes only: nothing is computed, so full-size models cost
    no memory or time). ``torch.compile``d code is estimated as its eager ops.
    """
    if lnc is None:
        from torch_neuronx import _config as config

        lnc = config.logical_core_size()
    import torch

    # Compiled code runs as its eager ops (as under the CLI): the mode must see them.
    with torch.compiler.set_stance("force_eager"), Recorder() as recorder:
        out = model(*inputs, **kwargs)
        if train:
            _loss(out).backward()
            if optimizer is not None:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    if not recorder.run:
        raise ValueError(
            "torch_neuronx.estimate: the call ran no op on a neuron or meta tensor; move the "
            "model and inputs to the neuron device, or build them on the meta device"
        )
    what = (
        "forward, backward" + (" and optimizer step" if optimizer else "") if train else "forward"
    )
    return Estimate(
        recorder.run,
        lnc=lnc,
        world_size=recorder.world_size,
        step=f"one call of the model ({what})",
        price_per_hour=price_per_hour,
        steps_per_epoch=steps_per_epoch,
    )


def _loss(out):
    import torch

    loss = getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    tensors = tensors_in(out)
    if not tensors:
        raise ValueError("torch_neuronx.estimate(train=True): the model returned no tensor")
    first = tensors[0]
    return first if first.dim() == 0 else first.float().sum()
