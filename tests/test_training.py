"""Training a small transformer on neuron gives exactly the CPU's numbers."""

import pytest
import torch

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


def test_dropout_training_is_reproducible_on_neuron():
    kw = dict(d=32, layers=1, seq=16, dropout=0.2)
    a, _ = train("neuron", 5, OPTIMIZERS["adamw_foreach"], **kw)
    b, _ = train("neuron", 5, OPTIMIZERS["adamw_foreach"], **kw)
    assert a == b


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
