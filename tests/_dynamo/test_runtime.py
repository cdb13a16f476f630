"""HostGraph: how compiled host code's outputs become neuron tensors."""

import torch

from torch_neuronx._dynamo.runtime import HOST, HostGraph


def test_outputs_keep_layout_sharing_and_aliasing():
    def compiled(args):
        (x,) = args
        assert x.device.type == "cpu"  # a host alias of the neuron input
        x.mul_(2)
        base = torch.arange(12.0).reshape(3, 4)
        return [base.t(), base[1], x[1:], torch.empty(0, 5), base.sum()]

    x = torch.ones(4, device="neuron")
    graph = HostGraph(compiled, ["current", "current", "current", "current", HOST])
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



def test_results_are_pool_memory_taken_over_without_a_copy():
    made = []

    def compiled(args):
        made.append(torch.full((4096,), 3.0))
        return [made[-1], made[-1][:16]]

    before = torch.neuron.memory_allocated()
    full, head = HostGraph(compiled, ["current", "current"])([])
    assert torch.neuron.memory_allocated() - before >= 4096 * 4
    assert full.data_ptr() == made[0].data_ptr()  # the same memory, not a copy
    assert head.untyped_storage().data_ptr() == full.untyped_storage().data_ptr()
    made.clear()
    assert torch.equal(full.cpu(), torch.full((4096,), 3.0))
    del full, head
    assert torch.neuron.memory_allocated() == before


def test_compiled_saved_activations_count_as_device_memory():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(),
                                torch.nn.Linear(1024, 1)).to("neuron")
    step = torch.compile(model, backend="neuron")
    x = torch.randn(64, 256, device="neuron")
    step(x).sum().backward()
    base = torch.neuron.memory_allocated()
    loss = step(x).sum()
    assert torch.neuron.memory_allocated() - base >= 64 * 1024 * 4  # the hidden activation
    loss.backward()
    del loss
    assert torch.neuron.memory_allocated() == base
