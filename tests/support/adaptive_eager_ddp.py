"""A rank of tests/test_adaptive_eager_integration.py: a few DDP or FSDP2 steps of a small GPT.

    torchrun --nproc-per-node=2 tests/support/adaptive_eager_ddp.py {ddp,fsdp2} OUT_PREFIX

Each rank trains twice from the same start: first with adaptive eager as
TORCH_NEURONX_ENABLE_CONCATENATION set it, then with it off. It saves to OUT_PREFIX.rank<N>.pt,
for each run, the full parameters and the result of an all-reduce of queued work, and, for the
first, whether the queue was on and its counters.
"""

import sys

import torch
import torch.distributed as dist
from gpt import GPT, batch, loss_fn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel

import torch_neuronx.distributed  # noqa: F401  (registers the "neuron" c10d backend)
from torch_neuronx import adaptive_eager

STEPS, BATCH = 3, 8


def wrap(model, mode, world):
    if mode == "ddp":
        # Gradients as views of the bucket that the all-reduce writes: the optimizer's queued
        # ops read memory a collective wrote.
        return DistributedDataParallel(model, gradient_as_bucket_view=True)
    mesh = init_device_mesh("neuron", (world,))
    # bf16 compute, so that bf16 ops queue too; the gradient reduction and the update are fp32.
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks.values():
        fully_shard(block, mesh=mesh, mp_policy=policy)
    return fully_shard(model, mesh=mesh, mp_policy=policy)


def train(mode, rank, world):
    """Full parameters after STEPS, and an all-reduce of queued work."""
    device = torch.device("neuron", torch.neuron.current_device())
    torch.manual_seed(0)
    model = wrap(GPT().to(device), mode, world)
    # foreach=False: the per-parameter elementwise update is what the queue fuses.
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, foreach=False)
    per_rank = BATCH // world
    for step in range(STEPS):
        x, y = batch(step, BATCH)
        rows = slice(rank * per_rank, (rank + 1) * per_rank)
        opt.zero_grad()
        loss_fn(model(x[rows].to(device)), y[rows].to(device)).backward()
        opt.step()
    # Queued ops whose results the collective itself must read.
    summed = (torch.full((1 << 19,), rank + 1.0, device=device) * 0.75 + 0.5).exp().log()
    dist.all_reduce(summed)
    params = {
        k: (v.full_tensor() if isinstance(v, DTensor) else v).detach().cpu()
        for k, v in model.state_dict().items()
    }
    return {"params": params, "summed": summed.cpu()}


def main():
    mode, prefix = sys.argv[1], sys.argv[2]
    dist.init_process_group("neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    out = {"enabled": adaptive_eager.is_enabled(), "on": train(mode, rank, world)}
    out["stats"] = adaptive_eager.stats()
    with adaptive_eager.enabled(False):
        out["off"] = train(mode, rank, world)
    torch.save(out, f"{prefix}.rank{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
