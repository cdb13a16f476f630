"""The names of ``torch.cuda.__all__`` that ``torch.neuron`` leaves out on purpose, each with
what it is and the way out. docs/device_module.md lists the same names (a test checks)."""

import torch

_GRAPHS = (
    "CUDA graphs: TorchNeuron has no CUDA-graph equivalent. torch.compile(model, "
    "backend='neuron') compiles a whole step into one graph, which is how Trainium removes "
    "per-op launch overhead"
)
_CUDA_RUNTIME = "the CUDA runtime API, which the neuron device does not have"
_SENSOR = (
    "a hardware sensor reading (nvidia-smi); the emulated NeuronCore has no {} to read. On "
    "Trainium, neuron-monitor / neuron-top report it"
)

_POOLS = (
    "a custom allocator or memory pool; each NeuronCore has one caching allocator (its "
    "emulated HBM). Bound it with torch.neuron.set_per_process_memory_fraction"
)

DOCUMENTED = {
    "CUDAPluggableAllocator": _POOLS,
    "change_current_allocator": _POOLS,
    "MemPool": _POOLS,
    "use_mem_pool": _POOLS,
    "CUDAGraph": _GRAPHS,
    "graph": _GRAPHS,
    "graphs": _GRAPHS,
    "graph_pool_handle": _GRAPHS,
    "make_graphed_callables": _GRAPHS,
    "graph_annotations": _GRAPHS,
    "export_dot": _GRAPHS,
    "export_graph_data": _GRAPHS,
    "cudart": _CUDA_RUNTIME,
    "cudaStatus": _CUDA_RUNTIME,
    "CudaError": f"{_CUDA_RUNTIME}; neuron errors are RuntimeError (torch.OutOfMemoryError "
    "for memory)",
    "check_error": _CUDA_RUNTIME,
    "DeferredCudaCallError": "CUDA's lazy-init queue; torch.neuron initialises on first use "
    "and raises the runtime's own error there",
    "current_blas_handle": "a cuBLAS handle; matmuls on neuron need no library handle",
    "current_solver_handle": "a cuSOLVER handle; linalg solvers on neuron run on the "
    "CPU-fallback tier (docs/limitations.md)",
    "has_magma": "whether CUDA's MAGMA library is built in; linalg solvers on neuron run on the "
    "CPU-fallback tier (docs/limitations.md)",
    "ExternalStream": "a stream made by another CUDA library; neuron streams come only from "
    "torch.neuron.Stream",
    "get_stream_from_external": "a stream made by another CUDA library; neuron streams come "
    "only from torch.neuron.Stream",
    "GreenContext": "CUDA green contexts (SM partitions); a logical NeuronCore is already the "
    "unit of partition: set NEURON_LOGICAL_NC_CONFIG / NEURON_RT_VISIBLE_CORES",
    "get_sync_debug_mode": "CUDA's warnings on synchronizing calls; the emulated device runs "
    "every op synchronously, so there is no asynchronous work for a sync to stall",
    "set_sync_debug_mode": "CUDA's warnings on synchronizing calls; the emulated device runs "
    "every op synchronously, so there is no asynchronous work for a sync to stall",
    "get_gencode_flags": "nvcc flags the library was built with; no device code is built ahead "
    "of time for neuron (torch.neuron.get_arch_list() lists the platforms)",
    "jiterator": "CUDA's runtime-compiled elementwise kernels; write an NKI kernel "
    "(torch_neuronx.nki_op) or use torch.compile(backend='neuron')",
    "nccl": "the NCCL bindings; use torch.distributed with backend='neuron'",
    "nvtx": "NVTX ranges for Nsight; use torch.profiler.record_function",
    "profiler": "cudaProfilerStart/Stop for nvprof/Nsight; use torch.profiler with "
    "ProfilerActivity.PrivateUse1",
    "sparse": "CUDA's legacy sparse tensor classes; sparse tensors are not supported on neuron "
    "(docs/limitations.md)",
    "tunable": "TunableOp, cuBLAS/hipBLASLt GEMM tuning; neuron matmuls have no tunable library",
    "power_draw": _SENSOR.format("power sensor"),
    "temperature": _SENSOR.format("temperature sensor"),
    "clock_rate": _SENSOR.format("clock to sample"),
    "memory_usage": "the share of time device memory was being read or written; the emulated "
    "HBM is host memory, whose traffic the runtime cannot tell apart. Use torch.neuron.utilization "
    "for busy time, or torch.profiler (ProfilerActivity.PrivateUse1) for device time",
    "default_generators": "the per-core default generators, which torch 2.13 gives Python no "
    "way to reach (torch 2.14 has torch._C._accelerator_getDefaultGenerator). Use "
    "torch.neuron.manual_seed / get_rng_state / set_rng_state, or torch 2.14",
}

OMITTED = {
    name: why
    for name, why in DOCUMENTED.items()
    if name != "default_generators" or not hasattr(torch._C, "_accelerator_getDefaultGenerator")
}


def missing(name: str) -> AttributeError:
    """The AttributeError for a name of torch.cuda that torch.neuron leaves out."""
    return AttributeError(
        f"torch.neuron has no {name!r}: it is {OMITTED[name]}. See docs/device_module.md"
    )


def markdown_table() -> str:
    """docs/device_module.md's table of the names left out."""
    rows = ["| Name of `torch.cuda` | What it is, and the way out |", "|---|---|"]
    rows += [f"| `{name}` | {why}. |" for name, why in sorted(DOCUMENTED.items())]
    return "\n".join(rows)
