"""vLLM's worker and model runner on a NeuronCore.

The worker is vLLM's CPU worker (its host-memory checks, no sleep-mode allocator) with the
model, its inputs and the KV cache on ``neuron:<local_rank>``. The runner is vLLM's GPU model
runner, as the CPU and XPU runners are: its device buffers stay on the device (the CPU runner
points them at host memory), ``torch.cuda``'s streams and events are the neuron device's, and
the CPU runner's model loading, block zeroing and result reading are reused. When vLLM is
asked to compile, the runner serves bucketed static graphs (_graphs.py).
"""

import contextlib
import dataclasses
import os

import torch
from vllm.config import CompilationMode, CUDAGraphMode
from vllm.logger import init_logger
from vllm.platforms import current_platform
from vllm.utils.torch_utils import set_random_seed
from vllm.v1.worker.cpu_model_runner import CPUModelRunner
from vllm.v1.worker.cpu_worker import CPUWorker
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
from vllm.v1.worker.gpu_worker import init_worker_distributed_environment

from torch_neuronx import _roofline as roofline
from torch_neuronx.vllm import _graphs as graphs
from torch_neuronx.vllm import _patches as patches

# Under vLLM's logger, which its logging configuration prints.
logger = init_logger("vllm." + __name__)


class NeuronModelRunner(CPUModelRunner):
    def __init__(self, vllm_config, device: torch.device):
        with _neuron_streams():
            GPUModelRunner.__init__(self, vllm_config, device)
        self.use_cuda_graph = False
        self.bucketed_forward: graphs.BucketedForward | None = None
        self._decode_tokens: int | None = None  # of the step being executed

    def load_model(self, load_dummy_weights: bool = False) -> None:
        super().load_model(load_dummy_weights)
        # The platform hands compilation to the runner (STOCK_TORCH_COMPILE) on the device.
        if self.compilation_config.mode == CompilationMode.STOCK_TORCH_COMPILE:
            sizes = graphs.buckets(
                self.vllm_config.additional_config,
                self.scheduler_config.max_num_batched_tokens,
            )
            self.bucketed_forward = graphs.BucketedForward(self.model.forward, sizes)
            self.model.forward = self.bucketed_forward

    def _determine_batch_execution_and_padding(self, num_tokens: int, *args, **kwargs):
        mode, batch, *rest = super()._determine_batch_execution_and_padding(
            num_tokens, *args, **kwargs
        )
        if self.bucketed_forward is not None:
            padded = graphs.bucket_for(batch.num_tokens, self.bucketed_forward.sizes)
            batch = dataclasses.replace(batch, num_tokens=padded)
        return (mode, batch, *rest)

    def warming_up_model(self) -> None:
        if self.bucketed_forward is None:
            super().warming_up_model()
            return
        sizes = self.bucketed_forward.sizes
        logger.info("Compiling the model for %d buckets of batched tokens: %s", len(sizes), sizes)
        with self.bucketed_forward.warming_up():
            for size in sizes:
                self._dummy_run(size, cudagraph_runtime_mode=CUDAGraphMode.NONE)

    def execute_model(self, scheduler_output, *args, **kwargs):
        self._decode_tokens = _decode_tokens(scheduler_output)
        return super().execute_model(scheduler_output, *args, **kwargs)

    def sample_tokens(self, *args, **kwargs):
        output = super().sample_tokens(*args, **kwargs)
        # One engine step, for `torchneuron estimate` (a no-op unless it records).
        roofline.end_serving_step(self._decode_tokens)
        return output

    def _sync_device(self) -> None:
        torch.neuron.synchronize(self.device)


def _decode_tokens(scheduler_output) -> int | None:
    """The tokens a decode-only step produces (one per sequence); None for a step that
    prefills."""
    scheduled = scheduler_output.num_scheduled_tokens
    if not scheduled or scheduler_output.scheduled_new_reqs:
        return None
    if any(n != 1 for n in scheduled.values()):
        return None
    return len(scheduled)


class NeuronWorker(CPUWorker):
    def init_device(self):
        if self.use_v2_model_runner:
            raise RuntimeError(
                "vLLM's V2 model runner is not supported on neuron (as in vLLM Neuron); unset "
                "VLLM_USE_V2_MODEL_RUNNER"
            )
        # vLLM's _custom_ops imports the kernels while it loads; its functions exist only now.
        patches.apply()
        self.device = torch.device("neuron", self.local_rank)
        torch.neuron.set_device(self.device)
        init_method = self.distributed_init_method
        # The CPU communicator's shared-memory channel is named after the init method.
        os.environ["VLLM_DIST_IDENT"] = (
            os.path.basename(init_method.removeprefix("file://"))
            if init_method.startswith("file://")
            else init_method.split(":")[-1]
        )
        init_worker_distributed_environment(
            self.vllm_config,
            self.rank,
            self.distributed_init_method,
            self.local_rank,
            current_platform.dist_backend,
        )
        set_random_seed(self.model_config.seed)
        self.model_runner = NeuronModelRunner(self.vllm_config, self.device)
        logger.info("vLLM serves on %s (torchneuron)", self.device)


@contextlib.contextmanager
def _neuron_streams():
    """torch.cuda's stream and event classes as the neuron device's, while the runner is built
    (it creates them through torch.cuda, as CUDA code does)."""
    names = ("Stream", "Event", "current_stream", "stream")
    saved = {name: getattr(torch.cuda, name) for name in names}
    torch.cuda.Stream = torch.neuron.Stream
    torch.cuda.Event = torch.neuron.Event
    torch.cuda.current_stream = torch.neuron.current_stream
    torch.cuda.stream = torch.neuron.stream
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(torch.cuda, name, value)
