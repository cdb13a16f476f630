"""Adaptive eager execution with the rest of the stack: autocast, several cores, streams and
threads, torch.compile, the profiler, DDP/FSDP2 and memory statistics. Each runs the same code
with the queue off and on, and on CPU, and compares bit for bit where eager neuron is CPU's."""

import json
import os
import subprocess
import sys
import threading

import pytest
import torch
from dist_harness import EXAMPLES, free_port
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
from torch.utils._pytree import tree_leaves

from torch_neuronx import adaptive_eager

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(autouse=True)
def _queue_state_restored():
    before = adaptive_eager.is_enabled()
    yield
    adaptive_eager.enable() if before else adaptive_eager.disable()


def grown(before):
    """The adaptive eager counters that grew since `before`, by how much."""
    after = adaptive_eager.stats()
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def off_and_on(fn):
    """fn() with the queue off, fn() with it on, and the counters the queued run grew."""
    with adaptive_eager.enabled(False):
        off = fn()
    before = adaptive_eager.stats()
    with adaptive_eager.enabled(True):
        on = fn()
    return off, on, grown(before)


def assert_bitwise(actual, expected):
    actual, expected = tree_leaves(actual), tree_leaves(expected)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.device.type == "cpu" and a.dtype == e.dtype and a.shape == e.shape
        assert torch.equal(a, e), f"max difference {(a.double() - e.double()).abs().max()}"


def chain(x, y):
    """Fusable float ops, as one queue run."""
    return ((x * 1.5 + y).tanh() * y - x).exp().sub(0.25).mul(y).clamp(-2, 2)


def inputs(n=1 << 19, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=g), torch.randn(n, generator=g)


# Autocast


def mlp_training(device):
    """Losses and parameters after 3 AdamW steps of an MLP under bf16 autocast."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.GELU(approximate="tanh"), torch.nn.Linear(1024, 512)
    ).to(device)
    # foreach=False: the per-parameter float update is elementwise ops the queue fuses (each
    # weight spans two chunks).
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=False)
    x = torch.randn(32, 512).to(device)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
            out = model(x)
            assert out.dtype == torch.bfloat16
            loss = (out.float() - x).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.detach().cpu())
    return losses, [p.detach().cpu() for p in model.parameters()]


def test_autocast_mlp_training_is_bitwise_unqueued_and_cpu():
    off, on, counters = off_and_on(lambda: mlp_training("neuron"))
    assert counters["fused_kernels"] > 0 and counters["queued_ops"] > 0, counters
    assert_bitwise(on, off)
    assert_bitwise(on, mlp_training("cpu"))


# Several cores


def test_queues_follow_the_device():
    x, y = inputs()
    expected = [chain(x, y), chain(chain(x, y), y)]

    def run():
        x0, y0 = x.to("neuron:0"), y.to("neuron:0")
        x1, y1 = x.to("neuron:1"), y.to("neuron:1")
        first = chain(x0, y0)
        # Queued on neuron:1 while neuron:0's run is pending: that run must go first.
        second = chain(x1, y1)
        third = chain(second, y1)
        with torch.neuron.device(1):
            fourth = chain(first.to("neuron:1"), y1)
        assert (first.device.index, third.device.index, fourth.device.index) == (0, 1, 1)
        return [first.cpu(), second.cpu(), third.cpu(), fourth.cpu()]

    off, on, counters = off_and_on(run)
    assert counters["runs.shape"] >= 1 and counters["fused_kernels"] >= 3, counters
    assert_bitwise(on, off)
    assert_bitwise(on, [expected[0], expected[0], expected[1], expected[1]])


def test_ops_across_devices_fail_as_unqueued():
    def run():
        a = torch.ones(16, device="neuron:0") * 2
        b = torch.ones(16, device="neuron:1") * 3
        with pytest.raises(RuntimeError) as error:
            a + b
        return str(error.value).split("\n")[0]

    off, on, _ = off_and_on(run)
    assert on == off and "neuron:0" in on and "neuron:1" in on


# Streams and events


def stream_api(kind):
    """A side stream, a context that makes it current, and an event class, for `kind`."""
    if kind == "torch.neuron":
        s = torch.neuron.Stream()
        return s, torch.neuron.stream(s), torch.neuron.Event
    s = torch.Stream("neuron")
    return s, s, lambda: torch.Event("neuron")


@pytest.mark.parametrize("kind", ["torch.neuron", "torch.Stream"])
def test_work_on_a_side_stream_with_events(kind):
    x, y = inputs()

    def run():
        xn, yn = x.to("neuron"), y.to("neuron")
        side, current, make_event = stream_api(kind)
        first = chain(xn, yn)
        with current:
            second = chain(first, yn)
            done = make_event()
            done.record()
        torch.neuron.current_stream().wait_event(done)
        third = chain(second, yn)
        side.wait_stream(torch.neuron.current_stream())
        return [first.cpu(), second.cpu(), third.cpu()]

    off, on, counters = off_and_on(run)
    assert counters["runs.stream"] >= 1 and counters["runs.event"] >= 1, counters
    expected = chain(x, y)
    assert_bitwise(on, off)
    assert_bitwise(on, [expected, chain(expected, y), chain(chain(expected, y), y)])


@pytest.mark.parametrize(
    "call, boundary",
    [
        (lambda s, e: torch.neuron.current_stream().wait_event(e), "event"),
        (lambda s, e: torch.neuron.current_stream().wait_stream(s), "event"),
        (lambda s, e: e.record(s), "event"),
        (lambda s, e: s.synchronize(), "synchronize"),
        (lambda s, e: s.query(), "synchronize"),
        (lambda s, e: e.synchronize(), "synchronize"),
        (lambda s, e: e.query(), "synchronize"),
        (lambda s, e: torch.neuron.synchronize(), "synchronize"),
        (lambda s, e: torch.neuron.set_stream(s), "stream"),
    ],
    ids=[
        "wait_event",
        "wait_stream",
        "record",
        "stream.synchronize",
        "stream.query",
        "event.synchronize",
        "event.query",
        "synchronize",
        "set_stream",
    ],
)
def test_stream_and_event_calls_run_the_queue(call, boundary):
    side, event = torch.neuron.Stream(), torch.neuron.Event()
    event.record(side)
    x, y = inputs()
    xn, yn = x.to("neuron"), y.to("neuron")
    adaptive_eager.enable()
    result = chain(xn, yn)
    before = adaptive_eager.stats()
    call(side, event)
    counters = grown(before)
    torch.neuron.set_stream(torch.neuron.default_stream())
    assert counters.get(f"runs.{boundary}") == 1 and counters["fused_kernels"] == 1, counters
    assert_bitwise(result.cpu(), chain(x, y))


def long_chain(t):
    for _ in range(20):
        t = (t * 1.5).tanh()
    return t


def test_read_waits_for_the_run_another_thread_started():
    adaptive_eager.enable()
    # 16 MB: the fused run takes long enough for this thread to read while it is under way.
    x = torch.full((1 << 22,), 0.5, device="neuron:0")
    other = torch.ones(8, device="neuron:1")
    expected = long_chain(torch.full((1 << 22,), 0.5))[-1].item()
    for _ in range(2):
        y = long_chain(x)
        runs = adaptive_eager.stats().get("runs.shape", 0)
        # An op on another core runs neuron:0's queue in that thread.
        thread = threading.Thread(target=lambda: other * 2)
        thread.start()
        while adaptive_eager.stats().get("runs.shape", 0) == runs and thread.is_alive():
            pass
        got = y[-1].item()
        thread.join()
        assert got == expected


# torch.compile


def compiled_program(x, y, compiled):
    a = chain(x, y)
    b = compiled(a, y)
    return chain(b, a)


def test_compiled_graph_between_queued_ops():
    compiled = torch.compile(lambda a, b: torch.sin(a) * b + a.cos(), backend="neuron")
    x, y = inputs()

    def run():
        xn = x.to("neuron").requires_grad_()
        out = compiled_program(xn, y.to("neuron"), compiled)
        out.sum().backward()
        return [out.detach().cpu(), xn.grad.cpu()]

    off, on, counters = off_and_on(run)
    assert counters["fused_kernels"] >= 2, counters
    assert_bitwise(on, off)
    xc = x.clone().requires_grad_()
    expected = compiled_program(xc, y, lambda a, b: torch.sin(a) * b + a.cos())
    expected.sum().backward()
    torch.testing.assert_close(on, [expected.detach(), xc.grad], rtol=1e-5, atol=1e-6)


# Its own process: the suite's graph-call logging (tests/conftest.py) reads metrics.counters(),
# whose memory statistics run the queue before any graph does.
COUNT_GRAPH_BOUNDARY = """
import json, sys, torch
from torch_neuronx import adaptive_eager
neuron_inputs = sys.argv[1] == "1"
if neuron_inputs:
    compiled = torch.compile(lambda a: a * 3, backend="neuron")
else:
    compiled = torch.compile(lambda n: torch.ones(n, device="neuron") * 3, backend="neuron")
x = torch.randn(1 << 19)
xn = x.to("neuron")
arg = xn if neuron_inputs else 1 << 19
compiled(arg)
adaptive_eager.enable()
queued = xn * 2 + 1
before = adaptive_eager.stats()
result = compiled(arg)
after = adaptive_eager.stats()
expected = x * 3 if neuron_inputs else torch.full((1 << 19,), 3.0)
assert torch.equal(queued.cpu(), x * 2 + 1) and torch.equal(result.cpu(), expected)
print(json.dumps({k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}))
"""


@pytest.mark.parametrize(
    "neuron_inputs",
    [
        True,
        False,
    ],
    ids=["neuron-inputs", "no-neuron-inputs"],
)
def test_compiled_graph_is_counted_as_its_boundary(neuron_inputs):
    done = subprocess.run(
        [sys.executable, "-c", COUNT_GRAPH_BOUNDARY, str(int(neuron_inputs))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    counters = json.loads(done.stdout.strip().splitlines()[-1])
    assert counters.get("runs.compiled_graph") == 1, counters


# Profiler


def test_profiler_shows_fused_kernels_on_their_core_and_stream(tmp_path):
    x, y = inputs()
    xn, yn = x.to("neuron:1"), y.to("neuron:1")
    side = torch.neuron.Stream(device=1)
    adaptive_eager.enable()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        first = (xn * 1.5 + yn).tanh().exp()
        with torch.neuron.stream(side):
            second = (first - yn).relu().sqrt()
        host = [first.cpu(), second.cpu()]
    expected = (x * 1.5 + y).tanh().exp()
    assert_bitwise(host, [expected, (expected - y).relu().sqrt()])
    events = prof.profiler.kineto_results.events()
    kernels = [e for e in events if e.device_type() == DeviceType.PrivateUse1]
    fused = [e for e in kernels if e.name().startswith("nc::fused")]
    # Each on the core and the stream that issued its ops.
    assert [(e.name(), e.device_index(), e.device_resource_id()) for e in fused] == [
        ("nc::fused mul.Tensor+add.Tensor+tanh+exp", 1, 0),
        ("nc::fused sub.Tensor+relu+sqrt", 1, side.stream_id),
    ]
    assert all(e.duration_ns() > 0 for e in fused)
    # The ops in them run as no kernels of their own, yet each is there as the CPU op issued.
    assert not [e for e in kernels if e.name().startswith("nc::aten::")]
    cpu_ops = {e.name() for e in events if e.device_type() == DeviceType.CPU}
    assert {"aten::mul", "aten::add", "aten::tanh", "aten::exp", "aten::relu"} <= cpu_ops
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    trace = json.loads((tmp_path / "trace.json").read_text())
    rows = [e for e in trace["traceEvents"] if e.get("name", "").startswith("nc::fused")]
    assert len(rows) == 2
    assert all(e["args"]["category"] == "fused" and e["args"]["device"] == "neuron:1" for e in rows)


# Distributed


def torchrun(mode, prefix):
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", TORCH_NEURONX_ENABLE_CONCATENATION="1")
    env["PYTHONPATH"] = os.pathsep.join([EXAMPLES, env.get("PYTHONPATH", "")])
    script = os.path.join(HERE, "support", "adaptive_eager_ddp.py")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node=2",
            "--master-addr=127.0.0.1",
            f"--master-port={free_port()}",
            script,
            mode,
            prefix,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )


@pytest.mark.parametrize("mode", ["ddp", "fsdp2"])
def test_data_parallel_training_is_bitwise_unqueued(mode, tmp_path):
    done = torchrun(mode, str(tmp_path / mode))
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [torch.load(tmp_path / f"{mode}.rank{r}.pt") for r in range(2)]
    expected_sum = sum((torch.full((1 << 19,), r + 1.0) * 0.75 + 0.5).exp().log() for r in range(2))
    for rank in ranks:
        assert rank["enabled"]
        stats = rank["stats"]
        assert stats["fused_kernels"] > 0 and stats.get("runs.collective", 0) >= 1, stats
        assert_bitwise(rank["on"], rank["off"])
        assert_bitwise(rank["on"]["summed"], expected_sum)
    assert_bitwise(ranks[0]["on"]["params"], ranks[1]["on"]["params"])


# Memory statistics


def memory_program(x, y):
    kept = [chain(x * i, y) for i in range(4)]
    for t in kept:
        t.sum().item()
    return kept


CURRENT = [
    "allocated_bytes.all.current",
    "active_bytes.all.current",
    "requested_bytes.all.current",
    "allocation.all.current",
    "active.all.current",
]


def test_memory_statistics_exact_after_a_run():
    x, y = inputs()
    xn, yn = x.to("neuron"), y.to("neuron")

    def run():
        torch.neuron.synchronize()
        base, before = torch.neuron.memory_allocated(), torch.neuron.memory_stats()
        kept = memory_program(xn, yn)
        allocated, after = torch.neuron.memory_allocated(), torch.neuron.memory_stats()
        deltas = {k: after[k] - before[k] for k in CURRENT}
        return allocated - base, deltas, [t.cpu() for t in kept]

    (off_bytes, off_stats, off_kept), (on_bytes, on_stats, on_kept), counters = off_and_on(run)
    assert counters["fused_kernels"] >= 1, counters
    assert on_bytes == off_bytes == 4 * x.nbytes
    assert on_stats == off_stats
    assert_bitwise(on_kept, off_kept)


def active_bytes(snapshot):
    return sum(
        b["size"] for seg in snapshot for b in seg["blocks"] if b["state"] == "active_allocated"
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda: torch.neuron.memory_allocated(),
        lambda: torch.neuron.max_memory_allocated(),
        lambda: torch.neuron.memory_reserved(),
        lambda: torch.neuron.memory_stats()["allocated_bytes.all.current"],
        lambda: torch.accelerator.memory_allocated(0),
        lambda: torch.neuron.reset_peak_memory_stats(),
        lambda: torch.neuron.empty_cache(),
        lambda: active_bytes(torch.neuron.memory_snapshot()),
    ],
    ids=[
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "memory_stats",
        "accelerator",
        "reset_peak_memory_stats",
        "empty_cache",
        "memory_snapshot",
    ],
)
def test_memory_statistics_call_runs_the_queue(call):
    x, y = inputs()
    xn, yn = x.to("neuron"), y.to("neuron")
    adaptive_eager.enable()
    result = chain(xn, yn)
    before = adaptive_eager.stats()
    call()
    assert grown(before).get("runs.memory_stats") == 1
    assert_bitwise(result.cpu(), chain(x, y))


def test_peak_memory_same_as_unqueued():
    x, y = inputs()
    xn, yn = x.to("neuron"), y.to("neuron")

    def run():
        torch.neuron.synchronize()
        torch.neuron.reset_peak_memory_stats()
        base = torch.neuron.memory_allocated()
        memory_program(xn, yn)
        return torch.neuron.max_memory_allocated() - base

    off, on, _ = off_and_on(run)
    assert on == off


def test_a_dropped_result_is_freed_before_a_factory_allocates():
    # torch.empty_like reads nothing queued, so it does not run the queue; the dropped y must
    # still be freed before it allocates, as eager has freed it by then.
    x, _ = inputs()
    xn = x.to("neuron")

    def run():
        torch.neuron.synchronize()
        torch.neuron.reset_peak_memory_stats()
        base = torch.neuron.memory_allocated()
        y = xn * 2
        z = y + 1
        del y
        w = torch.empty_like(xn)
        peak = torch.neuron.max_memory_allocated() - base
        return peak, z.cpu(), w.shape

    (off_peak, off_z, _), (on_peak, on_z, _), counters = off_and_on(run)
    assert counters["fused_kernels"] == 1, counters
    assert on_peak == off_peak
    assert_bitwise(on_z, off_z)
