"""Training a small transformer on neuron gives exactly the CPU's numbers."""

import pytest
import torch
import torch.nn.functional as F
from tiny_gpt import train

OPTIMIZERS = {
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
    "adamw_loop": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=False),
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=True),
    "adamw_fused": lambda p: torch.optim.AdamW(p, lr=1e-3, fused=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_twenty_steps_bit_identical(name):
    kw = dict(d=64, layers=2, seq=32)
    neuron_losses, neuron_model = train("neuron", 20, OPTIMIZERS[name], **kw)
    cpu_losses, cpu_model = train("cpu", 20, OPTIMIZERS[name], **kw)
    assert neuron_losses == cpu_losses
    assert neuron_losses[-1] < neuron_losses[0]
    for pn, pc in zip(neuron_model.parameters(), cpu_model.parameters()):
        assert pn.device.type == "neuron"
        assert torch.equal(pn.detach().cpu(), pc.detach())


def _reseeded_adamw(params):
    # Called once the model is built: on the CPU, building it drew from the generator that
    # dropout then uses, while neuron's dropout has a generator of its own. Reseeding puts
    # the dropout generator of either device in the same state.
    torch.manual_seed(1)
    return OPTIMIZERS["adamw_foreach"](params)


def test_dropout_training_matches_cpu():
    kw = dict(d=32, layers=1, seq=16)
    neuron, _ = train("neuron", 5, _reseeded_adamw, dropout=0.2, **kw)
    assert train("neuron", 5, _reseeded_adamw, dropout=0.2, **kw)[0] == neuron
    assert train("cpu", 5, _reseeded_adamw, dropout=0.2, **kw)[0] == neuron
    assert train("neuron", 5, _reseeded_adamw, **kw)[0] != neuron, "dropout changed nothing"


def test_dropout_drops_and_rescales_like_cpu():
    torch.manual_seed(0)
    y = F.dropout(torch.ones(100_000, device="neuron"), 0.2, training=True)
    torch.manual_seed(0)
    assert torch.equal(y.cpu(), F.dropout(torch.ones(100_000), 0.2, training=True))
    assert torch.all((y == 0) | (y == 1.25))
    assert 0.19 < (y == 0).float().mean().item() < 0.21


def test_no_memory_growth_over_300_steps():
    from tiny_gpt import TinyGPT, batches

    torch.manual_seed(0)
    model = TinyGPT(d=32, layers=1, seq=16).to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    allocated = []
    for step, (x, y) in enumerate(batches(300, batch=4, seq=16)):
        loss = model(x.to("neuron"), y.to("neuron"))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step in (10, 299):
            allocated.append(torch.neuron.memory_allocated())
    assert allocated[1] == allocated[0]
