"""The cost model's implementation: engine timing per instruction, scheduling of a recorded
trace, reports and ``nki.benchmark``.  The model and its assumptions are described in the public
``nki.cost_model``, which re-exports the constants below."""

import bisect
from collections import defaultdict
from dataclasses import dataclass, field

from . import targets
from .jit import Kernel, Launch

STATIC_CYCLES = 60  # fixed SBUF access overhead of a Vector/Scalar/GpSimd instruction
PE_MIN_CYCLES = 64  # minimum nc_matmul issue interval
DESCRIPTOR_BYTES = 512  # per-descriptor DMA overhead, in bytes of bandwidth
DMA_LATENCY_NS = 1300.0  # fixed DMA completion latency
SYNC_NS = 50.0  # cross-engine semaphore hand-off
ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")
LABEL = "ESTIMATE (analytical model, not measured)"


def instruction_ns(ins, target):
    """Engine occupancy of one instruction, in nanoseconds."""
    if ins.engine == "tensor":
        cycles = max(ins.moving, PE_MIN_CYCLES) * (4 if ins.fp32 else 1)
        return cycles / (2 if ins.double_row else 1) / target.pe_ghz
    if ins.engine == "dma":
        descriptors = -(-ins.nbytes // max(ins.chunk, 1))
        return (ins.nbytes + descriptors * DESCRIPTOR_BYTES) / target.dma_bytes_per_ns
    if ins.engine == "scalar":
        rate = 2 if ins.narrow and target.scalar_16bit_double_rate else 1
        return (STATIC_CYCLES + ins.free / rate) / target.scalar_ghz
    streamed = ins.free * max(ins.inputs, 1)
    if ins.engine == "vector":
        return (STATIC_CYCLES + streamed / (2 if ins.narrow else 1)) / target.vector_ghz
    return (STATIC_CYCLES + streamed) / target.gpsimd_ghz


class _Timeline:
    """Busy intervals of one engine; instructions go into the earliest gap that fits."""

    def __init__(self):
        self.starts, self.ends = [], []

    def place(self, ready, duration):
        """Start time of a ``duration``-long instruction that may not start before ``ready``."""
        start = ready
        j = bisect.bisect_right(self.ends, ready)
        while j < len(self.starts) and start + duration > self.starts[j]:
            start = max(start, self.ends[j])
            j += 1
        self.starts.insert(j, start)
        self.ends.insert(j, start + duration)
        return start


def schedule(trace, target):
    """(latency ns, busy ns per engine, instructions per engine) of one instance's trace."""
    timelines = defaultdict(_Timeline)
    ready = {}  # alloc id -> (time data is visible, producing engine)
    last_read = defaultdict(float)
    busy = defaultdict(float)
    count = defaultdict(int)
    finish = 0.0
    for ins in trace:
        start = 0.0
        for a in ins.reads:
            when, producer = ready.get(a, (0.0, ins.engine))
            start = max(start, when + (SYNC_NS if producer != ins.engine else 0.0))
        for a in ins.on_chip_writes:
            start = max(start, last_read[a], ready.get(a, (0.0, None))[0])
        duration = instruction_ns(ins, target)
        start = timelines[ins.engine].place(start, duration)
        end = start + duration
        busy[ins.engine] += duration
        count[ins.engine] += 1
        visible = end + (DMA_LATENCY_NS if ins.engine == "dma" else 0.0)
        for a in ins.writes:
            if visible >= ready.get(a, (0.0, None))[0]:
                ready[a] = (visible, ins.engine)
        for a in ins.reads:
            last_read[a] = max(last_read[a], end)
        finish = max(finish, visible)
    return finish, busy, count


@dataclass
class CostReport:
    """Estimated latency of one kernel launch; printing it shows the per-engine breakdown."""

    kernel: str
    target: str
    instances: int
    latency_us: float
    busy_us: dict = field(default_factory=dict)
    instructions: dict = field(default_factory=dict)
    flops: int = 0
    dma_bytes: int = 0
    peak_sbuf_bytes: int = 0
    peak_psum_bytes: int = 0
    label: str = LABEL

    def get_latency_percentile(self, percentile=50):
        """The estimate (in us) stands in for every percentile: the model is deterministic."""
        return self.latency_us

    @property
    def bottleneck(self):
        """The engine with the most busy time."""
        return max(self.busy_us, key=self.busy_us.get)

    def __str__(self):
        lines = [
            f"nki cost model: {self.label}",
            f"kernel {self.kernel} on {self.target}, {self.instances} SPMD instance(s), "
            f"one NeuronCore each",
            f"estimated latency: {self.latency_us:.2f} us",
            f"{'engine':<8}{'busy us':>10}{'util':>7}{'instrs':>8}",
        ]
        for e in ENGINES:
            util = self.busy_us[e] / self.latency_us if self.latency_us else 0.0
            lines.append(f"{e:<8}{self.busy_us[e]:>10.2f}{util:>7.0%}{self.instructions[e]:>8}")
        work = f"DMA {self.dma_bytes / 2**20:.2f} MiB, bottleneck: {self.bottleneck}"
        if self.flops:
            tflops = self.flops / (self.latency_us * 1e6)
            work = f"matmul {self.flops / 1e9:.3f} GFLOP ({tflops:.1f} TFLOPS), " + work
        lines.append(work)
        lines.append(
            f"peak on-chip use per partition: SBUF {self.peak_sbuf_bytes / 1024:.1f} KiB, "
            f"PSUM {self.peak_psum_bytes / 1024:.1f} KiB"
        )
        return "\n".join(lines)


def report(special, name):
    """Build the CostReport of a Specialization."""
    target = special.target
    per_instance = [schedule(trace, target) for trace in special.traces]
    busy = {e: max(b[e] for _, b, _ in per_instance) / 1e3 for e in ENGINES}
    count = {e: max(c[e] for _, _, c in per_instance) for e in ENGINES}
    all_ins = [ins for trace in special.traces for ins in trace]
    return CostReport(
        kernel=name,
        target=target.name,
        instances=len(special.traces),
        latency_us=max(lat for lat, _, _ in per_instance) / 1e3,
        busy_us=busy,
        instructions=count,
        flops=sum(i.flops for i in all_ins),
        dma_bytes=sum(i.nbytes for i in all_ins),
        peak_sbuf_bytes=special.peak_sbuf,
        peak_psum_bytes=special.peak_psum,
    )


def _launch(kernel):
    if isinstance(kernel, Launch):
        return kernel
    return (kernel if isinstance(kernel, Kernel) else Kernel(kernel))[()]


def estimate(kernel, *args, target=None, **kwargs):
    """Estimated latency of ``kernel(*args, **kwargs)`` (or ``kernel[grid]``) on ``target``.

    Runs the kernel once on copies of the arguments if this signature was not specialized yet.
    """
    launch = _launch(kernel)
    special = launch.specialization(args, kwargs, targets.get(target) if target else None)
    return report(special, launch.kernel.fn.__name__)


class BenchmarkResult:
    """``kernel.benchmark_result.nc_latency.get_latency_percentile(p)`` as in the old API."""

    def __init__(self, nc_latency):
        self.nc_latency = nc_latency


class BenchmarkKernel:
    """A kernel whose calls also attach an estimated ``benchmark_result`` (no hardware runs)."""

    def __init__(self, kernel, target=None):
        self.launch = _launch(kernel)
        self.target = target
        self.benchmark_result = None

    def __getitem__(self, grid):
        return BenchmarkKernel(self.launch.kernel[grid], self.target)

    def __call__(self, *args, **kwargs):
        self.benchmark_result = BenchmarkResult(
            estimate(self.launch, *args, target=self.target, **kwargs)
        )
        return self.launch(*args, **kwargs)


def benchmark(kernel=None, *, target=None, **ignored):
    """Decorator (``warmup``/``iters``... accepted and ignored) attaching cost-model estimates."""
    if kernel is None:
        return lambda k: BenchmarkKernel(k, target)
    return BenchmarkKernel(kernel, target)
