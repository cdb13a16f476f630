"""HostGraph: how compiled host code's outputs become neuron tensors."""

import pytest
import torch

from torch_neuronx._dynamo.runtime import HOST, HostGraph


@pytest.mark.graph_calls("none")  # HostGraph called directly
def test_outputs_keep_layout_sharing_and_aliasing():
    def compiled(args):
        (x,) = args
        assert x.device.type == "cpu"  # a host alias of the neuron input
        x.mul_(2)
        base = torch.arange(12.0).reshape(3, 4)
        return [base.t(), base[1], x[1:], torch.empty(0, 5), base.sum()]

    x = torch.ones(4, device="neuron")
    graph = HostGraph(compiled, ["current", "current", "current", "current", HOST], [])
    transposed, row, tail, empty, total = graph([x])
    assert (x.cpu() == 2).all()  # written in place through the alias
    for t in (transposed, row, tail, empty):
        assert t.device.type == "neuron"
    assert transposed.stride() == (1, 4) and row.storage_offset() == 4
    assert transposed.untyped_storage().data_ptr() == row.untyped_storage().data_ptr()
    assert torch.equal(row.cpu(), torch.tensor([4.0, 5.0, 6.0, 7.0]))
    assert tail.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert empty.shape == (0, 5)
    assert total.device.type == "cpu"


@pytest.mark.graph_calls("none")  # HostGraph called directly
def test_results_are_pool_memory_taken_over_without_a_copy():
    made = []

    def compiled(args):
        made.append(torch.full((4096,), 3.0))
        return [made[-1], made[-1][:16]]

    before = torch.neuron.memory_allocated()
    full, head = HostGraph(compiled, ["current", "current"], [])([])
    assert torch.neuron.memory_allocated() - before >= 4096 * 4
    assert full.data_ptr() == made[0].data_ptr()  # the same memory, not a copy
    assert head.untyped_storage().data_ptr() == full.untyped_storage().data_ptr()
    made.clear()
    assert torch.equal(full.cpu(), torch.full((4096,), 3.0))
    del full, head
    assert torch.neuron.memory_allocated() == before


def test_compiled_saved_activations_count_as_device_memory():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 1)
    ).to("neuron")
    step = torch.compile(model, backend="neuron")
    x = torch.randn(64, 256, device="neuron")
    step(x).sum().backward()
    base = torch.neuron.memory_allocated()
    loss = step(x).sum()
    assert torch.neuron.memory_allocated() - base >= 64 * 1024 * 4  # the hidden activation
    loss.backward()
    del loss
    assert torch.neuron.memory_allocated() == base


def test_compiled_random_ops_draw_from_the_neuron_generator():
    drop = torch.compile(
        lambda x: torch.nn.functional.dropout(x, 0.5, training=True), backend="neuron"
    )
    x = torch.ones(4096, device="neuron")
    masks = []
    for cpu_seed in (1, 2):
        torch.neuron.manual_seed(7)
        torch.default_generator.manual_seed(cpu_seed)  # the CPU generator only
        masks.append(drop(x).cpu())
    assert torch.equal(masks[0], masks[1])
    assert 1000 < int((masks[0] == 0).sum()) < 3000
    cpu_state, core_state = torch.get_rng_state(), torch.neuron.get_rng_state()
    drop(x)
    assert torch.equal(torch.get_rng_state(), cpu_state)
    assert not torch.equal(torch.neuron.get_rng_state(), core_state)
