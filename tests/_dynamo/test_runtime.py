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

