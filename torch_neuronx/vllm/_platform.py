"""The neuron platform for vLLM: vLLM's CPU platform, its tensors on the emulated device.

vLLM's CPU build supplies the kernels (its ``_C`` library), the CPU attention backend and the
CPU worker's memory checks. The platform declares itself out of tree (as vLLM Neuron does)
and, in ``is_cpu``, that it runs vLLM's CPU kernels: every kernel choice vLLM makes by
platform (CustomOp ``forward_cpu``, the oneDNN GEMM, ``greedy_argmax``, the CPU samplers and
batch defaults) is then the CPU's, which is what makes the tokens and logprobs equal vLLM-CPU's
bit for bit. Those kernels run on neuron tensors through the device's host-kernel path
(_kernels.py).
"""

import psutil
import torch
from vllm.logger import init_logger
from vllm.platforms.cpu import CpuPlatform
from vllm.platforms.interface import PlatformEnum

from torch_neuronx.vllm import _graphs as graphs
from torch_neuronx.vllm import _kernels as kernels
from torch_neuronx.vllm import cpu_mode

# Under vLLM's logger, which its logging configuration prints.
logger = init_logger("vllm." + __name__)

# The emulated HBM is host RAM: the KV cache takes at most this share of the host memory
# available when serving starts, the rest staying for the weights and the processes.
HOST_MEMORY_SHARE = 0.5

_WORKER = "torch_neuronx.vllm._worker.NeuronWorker"


def kv_cache_budget(utilization: float, hbm_bytes: int, host_available: int) -> int:
    """The KV cache's bytes on one core: vLLM's share of the core's (emulated) HBM, capped by
    HOST_MEMORY_SHARE of the host memory available."""
    if not 0 < utilization <= 1:
        raise ValueError(
            f"gpu_memory_utilization must be in (0, 1], got {utilization}: it is the share of "
            "the NeuronCore's HBM vLLM may use"
        )
    return int(min(utilization * hbm_bytes, HOST_MEMORY_SHARE * host_available))


class NeuronPlatform(CpuPlatform):
    _enum = PlatformEnum.OOT
    device_name: str = "cpu" if cpu_mode() else "neuron"
    device_type: str = "cpu" if cpu_mode() else "neuron"
    dispatch_key: str = "CPU" if cpu_mode() else "PrivateUse1"
    ray_device_key: str = "neuron_cores"
    device_control_env_var: str = "NEURON_RT_VISIBLE_CORES"
    # vLLM's small helper graphs (e.g. the logprobs' ranks) stay eager: the neuron backend
    # takes static shapes only.
    simple_compile_backend: str = "eager"

    def is_cpu(self) -> bool:
        # vLLM asks is_cpu() where it picks a kernel; these are the CPU's (see the module doc).
        return True

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        if cpu_mode():
            return super().get_device_name(device_id)
        return torch.neuron.get_device_name(device_id)

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        if cpu_mode():
            return super().get_device_total_memory(device_id)
        return torch.neuron.get_device_properties(device_id).total_memory

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        if device.type == "neuron":
            torch.neuron.set_device(device)

    @classmethod
    def get_current_memory_usage(cls, device: torch.types.Device | None = None) -> float:
        if cpu_mode():
            return super().get_current_memory_usage(device)
        return float(torch.neuron.memory_allocated(device))

    @classmethod
    def import_kernels(cls) -> None:
        super().import_kernels()
        if not cpu_mode():
            kernels.route()

    @classmethod
    def check_and_update_config(cls, vllm_config) -> None:
        parallel_config = vllm_config.parallel_config
        choose_worker = parallel_config.worker_cls == "auto"
        # CpuPlatform's settings are the ones wanted; it asserts a cpu device, which the
        # device config names only for its check.
        device_config = vllm_config.device_config
        device_type, device = device_config.device_type, device_config.device
        device_config.device_type = "cpu"
        try:
            super().check_and_update_config(vllm_config)
        finally:
            device_config.device_type, device_config.device = device_type, device
        if choose_worker and not cpu_mode():
            parallel_config.worker_cls = _WORKER
        if not cpu_mode():
            _size_kv_cache(vllm_config.cache_config)
            _compile_per_bucket(vllm_config)


def _compile_per_bucket(vllm_config) -> None:
    """Compiled serving on the device is the runner's, one static graph per bucket (_graphs.py):
    vLLM's own compile path marks the token dimension dynamic, which the neuron backend
    refuses."""
    # vllm.config imports the platform: the name is only there once it has.
    from vllm.config import CompilationMode

    compilation_config = vllm_config.compilation_config
    if compilation_config.mode == CompilationMode.NONE:
        return
    sizes = graphs.buckets(
        vllm_config.additional_config, vllm_config.scheduler_config.max_num_batched_tokens
    )
    compilation_config.mode = CompilationMode.STOCK_TORCH_COMPILE
    compilation_config.backend = "neuron"
    logger.info("Neuron compiled serving: one graph per bucket of batched tokens, %s", sizes)


def _size_kv_cache(cache_config) -> None:
    """Sets the KV cache's size from the emulated HBM unless vLLM's own settings name one
    (--kv-cache-memory-bytes, or VLLM_CPU_KVCACHE_SPACE, applied by CpuPlatform)."""
    if cache_config.kv_cache_memory_bytes is not None:
        logger.info(
            "Neuron KV cache: %.2f GiB, as vLLM's settings ask",
            cache_config.kv_cache_memory_bytes / 2**30,
        )
        return
    hbm = torch.neuron.get_device_properties(0).total_memory
    available = psutil.virtual_memory().available
    budget = kv_cache_budget(cache_config.gpu_memory_utilization, hbm, available)
    cache_config.kv_cache_memory_bytes = budget
    logger.info(
        "Neuron KV cache: %.2f GiB = min(gpu_memory_utilization %.2f x %.1f GiB emulated HBM, "
        "%.0f%% of the host's %.1f GiB available); set --kv-cache-memory-bytes to choose",
        budget / 2**30,
        cache_config.gpu_memory_utilization,
        hbm / 2**30,
        HOST_MEMORY_SHARE * 100,
        available / 2**30,
    )
