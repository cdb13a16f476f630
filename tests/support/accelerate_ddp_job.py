"""Data-parallel training under `accelerate launch`: each process trains on its shard of a global
batch and prints, as one JSON line, its device, gradients and final weights.

Also the single-process CPU reference on the whole batch, which tests/ecosystem compares them to.
"""

import json
import os

import torch

STEPS = 2
SHARD = 4  # samples per process and step


def model():
    """The same small MLP every call."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def global_batches(world):
    """STEPS global batches (x, y) of SHARD * world samples, the same for every process."""
    generator = torch.Generator().manual_seed(1)
    return [
        (
            torch.randn(SHARD * world, 8, generator=generator),
            torch.randn(SHARD * world, 1, generator=generator),
        )
        for _ in range(STEPS)
    ]


def flat(tensors):
    return torch.cat([t.detach().cpu().flatten() for t in tensors]).tolist()


def train(net, optimizer, batches, backward, device, shard=slice(None)):
    """SGD steps on `shard` of each batch; returns the gradients of the first step."""
    first_grads = None
    for x, y in batches:
        loss = torch.nn.functional.mse_loss(net(x[shard].to(device)), y[shard].to(device))
        backward(loss)
        if first_grads is None:
            first_grads = flat(p.grad for p in net.parameters())
        optimizer.step()
        optimizer.zero_grad()
    return first_grads


def cpu_reference(world):
    """The first step's gradients and the final weights of training on whole batches."""
    net = model()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    grads = train(net, optimizer, global_batches(world), torch.Tensor.backward, "cpu")
    return grads, flat(net.parameters())


def main():
    from accelerate import Accelerator

    accelerator = Accelerator()
    net = model()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    net, optimizer = accelerator.prepare(net, optimizer)
    rank, world = accelerator.process_index, accelerator.num_processes
    grads = train(
        net,
        optimizer,
        global_batches(world),
        accelerator.backward,
        accelerator.device,
        shard=slice(SHARD * rank, SHARD * (rank + 1)),
    )
    report = {
        "rank": rank,
        "world": world,
        "device": str(accelerator.device),
        "distributed_type": accelerator.distributed_type.value,
        "wrapper": type(net).__name__,
        "weight_devices": sorted({str(p.device) for p in net.parameters()}),
        "grads": grads,
        "weights": flat(net.parameters()),
    }
    # One file per rank: the ranks' stdout lines can run into each other.
    with open(os.path.join(os.environ["REPORT_DIR"], f"rank{rank}.json"), "w") as f:
        json.dump(report, f)
    accelerator.end_training()


if __name__ == "__main__":
    main()
