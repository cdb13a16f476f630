"""Trains a small GPT with FSDP2 on NeuronCores, one process per core.

    torchrun --nproc-per-node=4 examples/distributed/train_fsdp2.py --steps 20 --bf16

Every process takes core LOCAL_RANK; collectives run on device memory over gloo's TCP
transport, so the same command with --nnodes/--rdzv-endpoint spans several hosts. With
--device cpu the same program trains on CPU tensors through gloo: the reference the neuron run
must match.
"""

import argparse

import torch
import torch.distributed as dist
from gpt import GPT, batch, loss_fn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

import torch_neuronx.distributed  # noqa: F401  (registers the "neuron" c10d backend)


def main():
    parser = argparse.ArgumentParser(description="FSDP2 training of a small GPT on NeuronCores")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8, help="global batch, split across ranks")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--bf16", action="store_true", help="bf16 compute, fp32 gradient reduction")
    parser.add_argument("--device", choices=("neuron", "cpu"), default="neuron")
    args = parser.parse_args()

    dist.init_process_group("neuron" if args.device == "neuron" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = (
        torch.device("neuron", torch.neuron.current_device())
        if args.device == "neuron"
        else torch.device("cpu")
    )
    mesh = init_device_mesh(args.device, (world,))

    torch.manual_seed(0)
    model = GPT().to(device)
    bf16 = dict(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if args.bf16 else {}
    policy = MixedPrecisionPolicy(**bf16)
    for block in model.blocks.values():
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)

    per_rank = args.batch // world
    for step in range(args.steps):
        x, y = batch(step, args.batch)
        rows = slice(rank * per_rank, (rank + 1) * per_rank)
        x, y = x[rows].to(device), y[rows].to(device)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        mean = loss.detach().float()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"step {step}: loss {mean.item():.6f}", flush=True)
    print(f"rank {rank} of {world} trained on {device}", flush=True)
    # On torch 2.13, gloo's worker thread may free the last all_reduce's work (and with it a
    # tensor's Python object) after the interpreter began to exit, which aborts the CPU run.
    # Waiting here for every rank gives that thread the time to let go first.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
