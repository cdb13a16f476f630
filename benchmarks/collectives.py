"""all_reduce bus bandwidth: the neuron backend on device tensors vs gloo on CPU tensors.

Run: python benchmarks/collectives.py [--ranks 2] [--iters 50]
Bus bandwidth follows nccl-tests: bytes * 2 * (n - 1) / n / time.
"""

import argparse
import datetime
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from targets import verdict

import torch_neuronx.distributed  # noqa: F401  (registers the backend without the autoload hook)

SIZES_MB = [1, 2, 4, 8, 16, 32, 64]


def timings(tensors, groups, iters):
    """Seconds of each all_reduce call, per (tensor, group) pair, `iters` calls each.

    The pairs take turns within each iteration, in alternating order, so that load from
    other processes on the machine hits both sides alike.
    """
    times = [[] for _ in tensors]
    runs = list(zip(tensors, groups, times))
    for i in range(iters + 3):
        for tensor, group, samples in runs if i % 2 else runs[::-1]:
            dist.barrier(group=group)
            start = time.perf_counter()
            dist.all_reduce(tensor, group=group)
            if i >= 3:
                samples.append(time.perf_counter() - start)
    return times


def median(values):
    return sorted(values)[len(values) // 2]


def worker(rank, world, port, iters):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    timeout = datetime.timedelta(seconds=120)
    dist.init_process_group("neuron", rank=rank, world_size=world, timeout=timeout)
    torch.neuron.set_device(rank)
    # As under torchrun: idle OpenMP workers spinning next to the other rank add noise.
    torch.set_num_threads(1)
    gloo = dist.new_group(backend="gloo")
    if rank == 0:
        print(
            f"all_reduce bus bandwidth, {world} ranks, float32, median of {iters} calls; "
            "ratio: median of paired calls"
        )
        print(f"{'size':>7} {'neuron GB/s':>12} {'gloo GB/s':>10} {'ratio':>6}")
    ratios = []
    for mb in SIZES_MB:
        numel = mb * 2**20 // 4
        neuron, cpu = timings(
            [torch.ones(numel, device="neuron"), torch.ones(numel)], [dist.group.WORLD, gloo], iters
        )
        bus_bytes = numel * 4 * 2 * (world - 1) / world
        # The ratio of calls made back to back cancels most of the noise of a shared machine.
        ratio = median([c / n for n, c in zip(neuron, cpu)])
        ratios.append(ratio)
        if rank == 0:
            print(
                f"{mb:>5}MB {bus_bytes / median(neuron) / 1e9:>12.3f} "
                f"{bus_bytes / median(cpu) / 1e9:>10.3f} {ratio:>6.3f}"
            )
    if rank == 0:
        geomean = torch.tensor(ratios).log().mean().exp().item()
        met = verdict("all_reduce bus bandwidth vs gloo", geomean, 0.95, at_most=False)
        print(f"geometric mean ratio neuron/gloo: {geomean:.3f} (target >= 0.95: {met})")
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--iters", type=int, default=50)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(args.ranks, port, args.iters), nprocs=args.ranks)


if __name__ == "__main__":
    main()
