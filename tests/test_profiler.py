"""torch.profiler on the neuron device: device events for every kind of work a NeuronCore runs,
linked to the CPU ops that launched them, memory events, and traces that trace viewers load."""

import glob
import json
import math
import os

import pytest
import torch
from dist_harness import spawn
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function, schedule

import nki
import nki.language as nl
import torch_neuronx
from nki.torch_integration import nki_op
from torch_neuronx import NeuronConfig, NeuronProfiler, ProfileMode

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def run_profiled(fn, **kwargs):
    with profile(activities=ACTIVITIES, **kwargs) as prof:
        fn()
    return prof


def kineto_events(prof):
    return list(prof.profiler.kineto_results.events())


def device_events(prof):
    return [e for e in kineto_events(prof) if e.device_type() == DeviceType.PrivateUse1]


def by_correlation(prof):
    return {e.correlation_id(): e for e in kineto_events(prof) if e.device_type() == DeviceType.CPU}


def launcher(prof, event):
    """The CPU op or range a device event is linked to."""
    return by_correlation(prof)[event.linked_correlation_id()]


def named(events, prefix):
    return [e for e in events if e.name().startswith(prefix)]


def test_eager_ops_are_kernels_linked_to_their_ops():
    a = torch.randn(64, 64, device="neuron")
    b = torch.randn(64, 64, device="neuron")
    prof = run_profiled(lambda: (a @ b + 1).relu())
    kernels = {e.name(): e for e in device_events(prof)}
    assert {"nc::aten::mm", "nc::aten::add.Tensor", "nc::aten::relu"} <= set(kernels)
    for name, op in [("nc::aten::mm", "aten::mm"), ("nc::aten::relu", "aten::relu")]:
        kernel = kernels[name]
        assert kernel.duration_ns() > 0
        assert (kernel.device_index(), kernel.device_resource_id()) == (0, 0)
        cpu = launcher(prof, kernel)
        assert cpu.name() == op
        # The kernel runs inside the op that launched it.
        assert cpu.start_ns() <= kernel.start_ns()
        assert kernel.start_ns() + kernel.duration_ns() <= cpu.start_ns() + cpu.duration_ns()


def test_key_averages_has_device_time():
    a = torch.randn(128, 128, device="neuron")
    prof = run_profiled(lambda: a @ a)
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["aten::mm"].self_device_time_total > 0
    assert rows["nc::aten::mm"].device_time_total == rows["aten::mm"].self_device_time_total
    assert "Self NEURON" in prof.key_averages().table()


def test_cpu_ops_have_no_device_events():
    a = torch.randn(16)
    prof = run_profiled(lambda: a + 1)
    assert device_events(prof) == []


def test_core_and_stream_are_recorded():
    if torch.neuron.device_count() < 2:
        pytest.skip("needs two visible NeuronCores")
    x = torch.ones(8, device="neuron:1")
    s = torch.neuron.Stream(device="neuron:1")

    def work():
        with torch.neuron.stream(s):
            x.mul_(2)

    (kernel,) = named(device_events(run_profiled(work)), "nc::aten::mul_")
    assert (kernel.device_index(), kernel.device_resource_id()) == (1, s.stream_id)


def test_copies_are_memcpy_rows_with_their_bytes(tmp_path):
    host = torch.randn(1000)

    def work():
        d = host.to("neuron")
        d.cpu()

    prof = run_profiled(work)
    names = [e.name() for e in device_events(prof)]
    assert "Memcpy HtoD (host -> neuron)" in names
    assert "Memcpy DtoH (neuron -> host)" in names
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    rows = [e for e in json.load(open(tmp_path / "t.json"))["traceEvents"]]
    copies = [e for e in rows if e.get("cat") == "gpu_memcpy"]
    assert {e["args"]["bytes"] for e in copies} == {str(host.nbytes)}


def test_cpu_fallback_op_and_its_copies():
    m = torch.randn(4, 4, device="neuron")
    prof = run_profiled(lambda: torch.linalg.det(m))
    events = device_events(prof)
    (kernel,) = named(events, "nc::cpu_fallback aten::_linalg_det")
    assert kernel.duration_ns() > 0
    assert launcher(prof, kernel).name() == "aten::_linalg_det"
    assert named(events, "Memcpy DtoH (neuron -> host, CPU fallback of aten::_linalg_det)")
    assert named(events, "Memcpy HtoD (host -> neuron, CPU fallback of aten::_linalg_det)")


def test_host_composite_is_one_kernel():
    q = torch.randn(1, 2, 8, 16, device="neuron")
    prof = run_profiled(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q))
    (kernel,) = named(device_events(prof), "nc::aten::scaled_dot_product_attention")
    assert kernel.duration_ns() > 0
    assert launcher(prof, kernel).name() == "aten::scaled_dot_product_attention"


def test_reading_a_value_back_is_a_copy():
    x = torch.ones(4, device="neuron")
    prof = run_profiled(lambda: x.sum().item())
    (copy,) = named(device_events(prof), "Memcpy DtoH")
    assert launcher(prof, copy).name() == "aten::_local_scalar_dense"


def test_record_function_ranges_nest():
    a = torch.randn(32, device="neuron")

    def work():
        with record_function("outer"):
            with record_function("inner"):
                a.sin()

    prof = run_profiled(work)
    (kernel,) = named(device_events(prof), "nc::aten::sin")
    events = {e.name: e for e in prof.events()}
    sin = events["aten::sin"]
    assert sin.cpu_parent.name == "inner" and sin.cpu_parent.cpu_parent.name == "outer"
    assert events["outer"].time_range.start <= events["inner"].time_range.start
    assert events["inner"].time_range.end <= events["outer"].time_range.end
    # The ranges carry the device time of the kernels run inside them.
    assert events["outer"].device_time_total == pytest.approx(kernel.duration_ns() / 1000)


@pytest.mark.graph_calls("compiled")
def test_compiled_graph_is_one_kernel():
    f = torch.compile(lambda t: (t * 2).sin().sum(), backend="neuron")
    x = torch.randn(16, 16, device="neuron")
    f(x)
    prof = run_profiled(lambda: f(x))
    graphs = named(device_events(prof), "nc::graph ")
    assert len(graphs) == 1 and graphs[0].duration_ns() > 0
    assert launcher(prof, graphs[0]).name() == "neuron::enter_core"
    # Its ops ran as the graph's generated code, not as eager neuron kernels.
    assert not named(device_events(prof), "nc::aten::sin")


@nki.jit
def _double_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(x), 2.0))
    return out


@nki_op("profiler_tests::double", mutates_args=())
def _double(x: torch.Tensor) -> torch.Tensor:
    return _double_kernel(x)


def test_nki_kernel_is_a_device_event():
    x = torch.randn(8, 16, device="neuron")
    out = {}
    prof = run_profiled(lambda: out.setdefault("y", _double(x)))
    torch.testing.assert_close(out["y"].cpu(), x.cpu() * 2)
    (kernel,) = named(device_events(prof), "nc::nki profiler_tests::double")
    assert kernel.duration_ns() > 0
    assert launcher(prof, kernel).name() == "nki profiler_tests::double"


def _allreduce_profiled(rank, world):
    import torch.distributed as dist

    dist.init_process_group("neuron", rank=rank, world_size=world)
    try:
        t = torch.full((1024,), float(rank + 1), device="neuron")
        dist.all_reduce(t)  # connects the ranks outside the profile
        with profile(activities=ACTIVITIES) as prof:
            dist.all_reduce(t)
        collectives = named(device_events(prof), "nc::cc ")
        return t.cpu()[0].item(), [
            (e.name(), e.duration_ns(), e.device_resource_id(), launcher(prof, e).name())
            for e in collectives
        ]
    finally:
        dist.destroy_process_group()


def test_collectives_are_device_events_on_both_ranks():
    results = spawn(_allreduce_profiled, 2)
    for value, error in results:
        assert error is None, error
        total, collectives = value
        assert total == 6.0  # (1 + 2) summed twice
        assert len(collectives) == 1
        name, duration, stream, op = collectives[0]
        assert name == "nc::cc ALLREDUCE" and duration > 0
        assert stream == 1 << 20  # the collectives' row (runtime/Trace.h)
        assert "allreduce" in op


@pytest.mark.parametrize("activities", [ACTIVITIES, [ProfilerActivity.CPU]], ids=["neuron", "cpu"])
def test_profile_memory_records_neuron_allocations_and_frees(activities):
    def work():
        t = torch.empty(1024, device="neuron")  # 4 KiB: one block of exactly that size
        del t

    with profile(activities=activities, profile_memory=True) as prof:
        work()
    records = [
        e
        for e in kineto_events(prof)
        if e.name() == "[memory]" and e.device_type() == DeviceType.PrivateUse1
    ]
    assert [r.nbytes() for r in records] == [4096, -4096]
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["aten::empty"].self_device_memory_usage == 4096


def check_trace_json(path):
    """The structure Perfetto and chrome://tracing load: the JSON object format's traceEvents."""
    with open(path) as f:
        trace = json.load(f)
    assert isinstance(trace["traceEvents"], list) and trace["traceEvents"]
    for e in trace["traceEvents"]:
        assert e["ph"] in {"X", "i", "M", "s", "f", "C", "B", "E"}, e
        assert isinstance(e["pid"], (int, str)) and isinstance(e.get("tid", 0), (int, str)), e
        if e["ph"] == "X":
            assert math.isfinite(e["ts"]) and math.isfinite(e["dur"]) and e["dur"] >= 0, e
        if e["ph"] == "M":
            assert "name" in e["args"] or "labels" in e["args"] or "sort_index" in e["args"], e
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    names = {
        (e["pid"], e["args"]["name"])
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    assert kernels and all(e["dur"] > 0 for e in kernels)
    # The device's rows are named after the core.
    assert {(k["pid"], f"neuron:{k['pid']}") for k in kernels} <= names
    return trace


def test_schedule_and_tensorboard_trace_handler(tmp_path):
    x = torch.randn(32, 32, device="neuron")
    with profile(
        activities=ACTIVITIES,
        schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w"),
    ) as prof:
        for _ in range(5):
            with record_function("step"):
                x @ x
            prof.step()
    (path,) = glob.glob(os.path.join(tmp_path, "*.pt.trace.json"))
    trace = check_trace_json(path)
    steps = [e for e in trace["traceEvents"] if e.get("name") == "step"]
    mms = [e for e in trace["traceEvents"] if e.get("name") == "nc::aten::mm"]
    assert len(steps) == 2 and len(mms) == 2  # only the active steps


def test_exported_chrome_trace_has_neuron_rows(tmp_path):
    x = torch.randn(8, device="neuron")
    prof = run_profiled(lambda: x.exp())
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    trace = check_trace_json(tmp_path / "trace.json")
    (kernel,) = [e for e in trace["traceEvents"] if e.get("name") == "nc::aten::exp"]
    assert kernel["args"]["device"] == "neuron:0" and kernel["args"]["category"] == "eager"


@pytest.mark.parametrize(
    "modes, kinds",
    [
        ([ProfileMode.DEVICE], {"kernel"}),
        (["runtime"], {"memcpy"}),
        ([ProfileMode.DEVICE, ProfileMode.RUNTIME], {"kernel", "memcpy"}),
        ([ProfileMode.CPU_UTIL], set()),
    ],
)
def test_neuron_config_modes_choose_the_rows(modes, kinds):
    host = torch.randn(64)

    def work():
        host.to("neuron").neg()

    with profile(activities=ACTIVITIES, experimental_config=NeuronConfig(modes)) as prof:
        work()
    seen = {"memcpy" if e.name().startswith("Memcpy") else "kernel" for e in device_events(prof)}
    assert seen == kinds


def test_neuron_config_rejects_unknown_modes():
    with pytest.raises(ValueError, match="ProfileMode"):
        NeuronConfig(["neff"])
    with pytest.raises(ValueError, match="at least one"):
        NeuronConfig([])


def test_neuron_profiler_writes_a_trace(tmp_path):
    x = torch.randn(16, device="neuron")
    with NeuronProfiler(output_dir=str(tmp_path)) as p:
        x.cos()
    assert p.trace_path == str(tmp_path / f"neuron_profile_{os.getpid()}.json")
    trace = check_trace_json(p.trace_path)
    assert any(e.get("name") == "nc::aten::cos" for e in trace["traceEvents"])
    assert {r.key for r in p.key_averages()} >= {"aten::cos", "nc::aten::cos"}


def test_nothing_is_recorded_outside_a_profile():
    x = torch.randn(16, device="neuron")
    assert not torch_neuronx.profiler.collecting()
    first = run_profiled(lambda: x.tan())
    x.atan()  # between the profiles
    second = run_profiled(lambda: x.sinh())
    assert [e.name() for e in device_events(first)] == ["nc::aten::tan"]
    assert [e.name() for e in device_events(second)] == ["nc::aten::sinh"]
    assert not torch_neuronx.profiler.collecting()
