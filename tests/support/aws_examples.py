"""What AWS's TorchNeuron examples do, as rank functions for dist_harness.spawn: the multi-node
data-parallel example (aws-neuron/torch-neuronx examples: DDP of a toy model, parameters
compared across ranks) and the Neuron Explorer multi-rank profiling example (compute and an
all-reduce on a second stream under a NeuronConfig profile)."""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

import torch_neuronx
from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def data_parallel_rank(rank, world, backend, steps):
    """Trains as the example does (its seeds, sampler, SGD step, loss = output sum); returns
    this rank's parameters and gradients on the CPU."""
    dist.init_process_group(backend)
    try:
        torch.manual_seed(1234 + rank)
        if backend == "neuron":
            device = torch.device("neuron", torch_neuronx.current_device())
            ddp_args = {"device_ids": [torch_neuronx.current_device()]}
        else:
            device, ddp_args = torch.device("cpu"), {}
        dataset = torch.randn(512, 10)
        model = DistributedDataParallel(ToyModel().to(device), init_sync=True, **ddp_args)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        sampler = DistributedSampler(dataset, num_replicas=world, rank=rank)
        for step, batch in enumerate(DataLoader(dataset, batch_size=4, sampler=sampler)):
            optimizer.zero_grad()
            model(batch.to(device)).sum().backward()
            optimizer.step()
            if step + 1 >= steps:
                break
        return {
            "weights": {k: v.cpu() for k, v in model.state_dict().items()},
            "grads": {k: p.grad.cpu() for k, p in model.named_parameters()},
            "device": str(device),
        }
    finally:
        dist.destroy_process_group()


def profiled_rank(rank, world, output_dir):
    """The multi-rank profiling example, smaller: returns the all-reduced tensor, the matmul
    result and the trace paths of this rank."""
    dist.init_process_group(backend="neuron")
    try:
        device = torch.device("neuron")
        cc_stream = torch_neuronx.Stream(device)
        config = NeuronConfig(
            modes=[
                ProfileMode.DEVICE,
                ProfileMode.RUNTIME,
                ProfileMode.CPU_UTIL,
                ProfileMode.HOST_MEMORY,
            ],
            profile_output_dir=output_dir,
            max_events_per_nc=100000,
            capture_enabled_for_nc="0,1",
        )
        exporter = NeuronProfiler(config)
        generator = torch.Generator().manual_seed(rank)
        a, b, t = (torch.randn(n, 64, generator=generator) for n in (64, 64, 16))
        with torch.profiler.profile(
            activities=[
                torch.profiler.ProfilerActivity.CPU,
                torch.profiler.ProfilerActivity.PrivateUse1,
            ],
            experimental_config=config,
            with_stack=True,
            on_trace_ready=exporter.export_trace,
        ):
            with torch.profiler.record_function("model_inference"):
                x, y, reduced = a.to(device), b.to(device), t.to(device)
                for _ in range(3):
                    product = torch.matmul(x, y)
                    with torch_neuronx.stream(cc_stream):
                        dist.all_reduce(reduced)
                torch_neuronx.synchronize()
                dist.barrier()
        return {
            "reduced": reduced.cpu(),
            "product": product.cpu(),
            "traces": exporter.trace_paths,
            "pid": os.getpid(),
        }
    finally:
        dist.destroy_process_group()
