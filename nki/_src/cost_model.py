"""The cost model's implementation: engine timing per instruction, scheduling of a recorded
trace, reports and ``nki.benchmark``.  The model and its assumptions are described in the public
``nki.cost_model``, which re-exports the constants below."""

import bisect
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import targets
from .jit import Kernel, Launch

# Every constant is documented by AWS (NKI ISA API "Estimated instruction cost" sections and
# the architecture guides) unless marked "fitted"; nki/README.md lists what each was fitted to.
MIN_II = 64  # minimum initiation interval of a Vector/Scalar instruction, engine cycles
DEPENDENT_CYCLES = 100  # extra cycles of an instruction reading its predecessor's output
GPSIMD_START = 150  # GpSimd instruction start-up, engine cycles
PE_MIN_CYCLES = 64  # minimum nc_matmul issue interval (MM_INIT_LATENCY)
DMA_LATENCY_NS = 1300.0  # fixed DMA completion latency (semaphore-to-start, ~1.3 us)
SYNC_NS = 50.0  # cross-engine semaphore hand-off (assumed)
LAUNCH_NS = 30000.0  # start-up and tear-down of one kernel execution (fitted)
COLLECTIVE_LATENCY_NS = 10000.0  # handshake of one collective across ranks (assumed)
ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")
LABEL = "ESTIMATE (analytical model, not measured)"

# Engine cycles per element per partition (N = ``Instr.free``) of each instruction, from the
# ISA docs' cost formulas; a pair is (cost, cost when one tile input is in PSUM and the other
# in SBUF: both are then read in parallel).  Instructions not listed stream each input once.
PER_ELEMENT = {
    "tensor_tensor": (2, 1),
    "tensor_copy_predicated": (2, 1),
    "scalar_tensor_tensor": (2, 1),
    "tensor_tensor_scan": (2, 2),
    "select_reduce": (2, 1),
    "reciprocal": (8, 8),
    "bn_aggr": (13 / 3, 13 / 3),
    "nc_n_gather": (2, 2),
    "quantize_mx": (4, 4),  # N counts 4-element words: one element per cycle
}
# Instructions that add one MIN_II for a fused free-axis reduction.
REDUCING = {"tensor_scalar_reduce", "activation_reduce", "select_reduce"}
# 2-byte operands that run at one element per cycle where two inputs otherwise take 2N.
NARROW_SINGLE_PASS = {"tensor_tensor", "scalar_tensor_tensor"}
# Reductions and fills twice as fast on all-2-byte operands.
NARROW_HALF = {"tensor_reduce", "memset", "reduce"}
# Recorded for dependencies only: the pre-0.2 ``psum_tile += matmul`` is the matmul's own
# PSUM accumulation on the device, not a separate instruction.
FREE = {"psum +="}
# Name prefixes of the nki.collectives operations (all_reduce, all_gather_v, ...).
COLLECTIVES = ("all_", "reduce_scatter", "collective_permute")


def _elementwise_cycles(ins, psum_reads, target):
    """Engine cycles of a Vector/Scalar/GpSimd instruction, before the dependency overhead."""
    n = ins.free
    inputs = max(ins.inputs, 1)
    split = ins.inputs == 2 and psum_reads == 1
    if ins.name in PER_ELEMENT:
        per = PER_ELEMENT[ins.name][1 if split else 0]
    else:
        per = 1 if split or ins.engine == "scalar" else inputs
    if ins.narrow and ins.name in NARROW_SINGLE_PASS:
        per = 1
    elif ins.narrow and ins.name in NARROW_HALF:
        per /= 2
    elif ins.narrow and ins.engine == "vector":
        per /= target.narrow_speedup
    elif ins.narrow and ins.engine == "scalar" and target.scalar_16bit_double_rate:
        per /= 2
    cycles = max(MIN_II, per * n) + (MIN_II if ins.name in REDUCING else 0)
    if ins.engine == "gpsimd":
        cycles += GPSIMD_START
    return cycles


def _dma_ns(ins, target):
    if ins.name.startswith(COLLECTIVES):
        return ins.nbytes / target.link_bytes_per_ns + COLLECTIVE_LATENCY_NS
    descriptors = -(-ins.nbytes // max(ins.chunk, 1))
    return (ins.nbytes + descriptors * target.descriptor_bytes) / target.dma_bytes_per_ns


def instruction_ns(ins, target, psum_reads=0, dependent=False):
    """Engine occupancy of one instruction, in nanoseconds.

    ``psum_reads`` counts its tile inputs in PSUM; ``dependent`` says it reads the output of
    the previous instruction on the same engine (no pipelining across the two)."""
    if ins.name in FREE:
        return 0.0
    if ins.engine == "tensor":
        cycles = max(ins.moving, PE_MIN_CYCLES) * (4 if ins.fp32 else 1)
        return cycles / (2 if ins.double_row else 1) / target.pe_ghz
    if ins.engine == "dma":
        return _dma_ns(ins, target)
    cycles = _elementwise_cycles(ins, psum_reads, target) + (DEPENDENT_CYCLES if dependent else 0)
    ghz = {"scalar": target.scalar_ghz, "vector": target.vector_ghz}
    return cycles / ghz.get(ins.engine, target.gpsimd_ghz)


class _Timeline:
    """Busy intervals of one engine, touching ones merged (so a busy engine has few);
    instructions go into the earliest gap that fits."""

    def __init__(self):
        self.starts, self.ends = [], []
        # duration -> a time before which no gap fits it. Placing only ever shrinks gaps, so
        # the bound holds for good, and a search for the same duration starts there instead
        # of walking again the gaps it found too short (instructions ready at 0, as loads of
        # kernel inputs are, would walk the whole timeline).
        self.no_fit_before = {}

    def place(self, ready, duration):
        """Start time of a ``duration``-long instruction that may not start before ``ready``."""
        starts, ends = self.starts, self.ends
        floor = self.no_fit_before.get(duration, 0.0)
        start = max(ready, floor)
        j = bisect.bisect_right(ends, start)
        while j < len(starts) and start + duration > starts[j]:
            start = max(start, ends[j])
            j += 1
        if ready <= floor:
            self.no_fit_before[duration] = start
        end = start + duration
        if j > 0 and ends[j - 1] >= start:
            j -= 1
            ends[j] = end
        else:
            starts.insert(j, start)
            ends.insert(j, end)
        if j + 1 < len(starts) and starts[j + 1] <= end:
            ends[j] = ends.pop(j + 1)
            del starts[j + 1]
        return start


def _covered(intervals):
    """Total length of the union of (start, end) intervals."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def schedule(trace, target):
    """(latency ns, busy ns per engine, active ns per engine, instructions per engine) of one
    instance's trace.  An engine is active while it has an instruction in flight: as busy for
    compute engines, for DMA also until the data is visible."""
    timelines = defaultdict(_Timeline)
    ready = {}  # alloc id -> (time data is visible, producing engine)
    last_read = defaultdict(float)
    busy = defaultdict(float)
    count = defaultdict(int)
    last_writes = {}  # engine -> allocations its previous instruction wrote
    psum = set()  # TensorE only writes PSUM, so its destinations identify PSUM tiles
    in_flight = []
    finish = 0.0
    for ins in trace:
        start = 0.0
        for a in ins.reads:
            when, producer = ready.get(a, (0.0, ins.engine))
            start = max(start, when + (SYNC_NS if producer != ins.engine else 0.0))
        for a in ins.on_chip_writes:
            start = max(start, last_read[a], ready.get(a, (0.0, None))[0])
        streamed = ins.reads[: ins.inputs]
        dependent = bool(set(ins.reads) & last_writes.get(ins.engine, set()))
        duration = instruction_ns(ins, target, sum(a in psum for a in streamed), dependent)
        start = timelines[ins.engine].place(start, duration)
        end = start + duration
        busy[ins.engine] += duration
        count[ins.engine] += 1
        last_writes[ins.engine] = set(ins.writes)
        if ins.engine == "tensor":
            psum.update(ins.writes)
        visible = end + (DMA_LATENCY_NS if ins.engine == "dma" else 0.0)
        if ins.engine == "dma":
            in_flight.append((start, visible))
        for a in ins.writes:
            if visible >= ready.get(a, (0.0, None))[0]:
                ready[a] = (visible, ins.engine)
        for a in ins.reads:
            last_read[a] = max(last_read[a], end)
        finish = max(finish, visible)
    active = defaultdict(float, busy, dma=_covered(in_flight))
    return finish + LAUNCH_NS, busy, active, count


@dataclass
class CostReport:
    """Estimated latency of one kernel launch; printing it shows the per-engine breakdown."""

    kernel: str
    target: str
    instances: int
    latency_us: float
    busy_us: dict = field(default_factory=dict)
    active_us: dict = field(default_factory=dict)  # time with an instruction in flight
    instructions: dict = field(default_factory=dict)
    flops: int = 0
    dma_bytes: int = 0
    peak_sbuf_bytes: int = 0
    peak_psum_bytes: int = 0
    label: str = LABEL

    def get_latency_percentile(self, percentile: float = 50) -> float:
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
            f"{'engine':<8}{'busy us':>10}{'util':>7}{'active':>8}{'instrs':>8}",
        ]
        for e in ENGINES:
            util, active = (
                (self.busy_us[e] / self.latency_us, self.active_us[e] / self.latency_us)
                if self.latency_us
                else (0.0, 0.0)
            )
            lines.append(
                f"{e:<8}{self.busy_us[e]:>10.2f}{util:>7.0%}{active:>8.0%}{self.instructions[e]:>8}"
            )
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
    busy = {e: max(b[e] for _, b, _, _ in per_instance) / 1e3 for e in ENGINES}
    active = {e: max(a[e] for _, _, a, _ in per_instance) / 1e3 for e in ENGINES}
    count = {e: max(c[e] for _, _, _, c in per_instance) for e in ENGINES}
    all_ins = [ins for trace in special.traces for ins in trace]
    return CostReport(
        kernel=name,
        target=target.name,
        instances=len(special.traces),
        latency_us=max(lat for lat, _, _, _ in per_instance) / 1e3,
        busy_us=busy,
        active_us=active,
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


def estimate(
    kernel: Kernel | Launch | Callable[..., Any],
    *args: Any,
    target: str | None = None,
    **kwargs: Any,
) -> CostReport:
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


def benchmark(
    kernel: Kernel | Launch | Callable[..., Any] | None = None,
    *,
    target: str | None = None,
    **ignored: object,
) -> BenchmarkKernel | Callable[[Kernel | Launch | Callable[..., Any]], BenchmarkKernel]:
    """Decorator (``warmup``/``iters``... accepted and ignored) attaching cost-model estimates."""
    if kernel is None:
        return lambda k: BenchmarkKernel(k, target)
    return BenchmarkKernel(kernel, target)
