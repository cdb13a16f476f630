"""``torch_neuronx.profiling``: NeuronConfig's documented parameters and NeuronProfiler's
``export_trace``, as AWS's Neuron Explorer page describes them ("Capture profiles with Neuron
Explorer", awsdocs-neuron .../tools/neuron-explorer/how-to-profile-pytorch.html: NeuronConfig
parameters, supported torch.profiler arguments, expected output per rank)."""

import glob
import json
import os

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, schedule

import torch_neuronx
from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def device_events(prof):
    events = prof.profiler.kineto_results.events()
    return [e for e in events if e.device_type() == DeviceType.PrivateUse1]


def test_the_documented_import_path_holds_the_profiler_module_s_names():
    assert NeuronConfig is torch_neuronx.profiler.NeuronConfig is torch_neuronx.NeuronConfig
    assert NeuronProfiler is torch_neuronx.profiler.NeuronProfiler
    assert ProfileMode is torch_neuronx.profiler.ProfileMode
    assert {m.name for m in ProfileMode} >= {"DEVICE", "RUNTIME", "CPU_UTIL", "HOST_MEMORY"}


def test_defaults_are_the_documented_ones():
    config = NeuronConfig()
    assert config.modes == {ProfileMode.DEVICE, ProfileMode.RUNTIME}
    assert config.precache_node_info is True
    assert config.max_events_per_nc is None and config.capture_enabled_for_nc is None
    assert config.settings()["modes"] == ["DEVICE", "RUNTIME"]


def test_capture_enabled_for_nc_keeps_the_named_cores():
    a = torch.randn(16, 16)
    x0, x1, x2 = (a.to(f"neuron:{i}") for i in range(3))
    config = NeuronConfig(capture_enabled_for_nc="1-2")
    with profile(activities=ACTIVITIES, experimental_config=config) as prof:
        results = [x0.exp(), x1.exp(), x2.exp()]
    assert {e.device_index() for e in device_events(prof)} == {1, 2}
    assert {e.name() for e in device_events(prof)} == {"nc::aten::exp"}
    for r in results:
        torch.testing.assert_close(r.cpu(), a.exp())


def test_max_events_per_nc_keeps_the_first_events_of_each_core():
    x0, x1 = torch.ones(8, device="neuron:0"), torch.ones(8, device="neuron:1")
    config = NeuronConfig(modes=[ProfileMode.DEVICE], max_events_per_nc=2)
    with profile(activities=ACTIVITIES, experimental_config=config) as prof:
        x0.neg(), x0.cos(), x0.sin(), x1.tan()
    names = [(e.device_index(), e.name()) for e in device_events(prof)]
    assert sorted(names) == [(0, "nc::aten::cos"), (0, "nc::aten::neg"), (1, "nc::aten::tan")]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"capture_enabled_for_nc": "0,x"}, "capture_enabled_for_nc='0,x'"),
        ({"capture_enabled_for_nc": "3-1"}, "not a core index or range"),
        ({"max_events_per_nc": 0}, "positive integer"),
        ({"modes": ["neff"]}, "ProfileMode"),
    ],
)
def test_bad_parameters_say_what_to_pass(kwargs, message):
    with pytest.raises(ValueError, match=message):
        NeuronConfig(**kwargs)


def test_export_trace_writes_each_cycle_under_profile_output_dir(tmp_path):
    """The documented basic example, with a schedule of two active cycles."""
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    x, y = a.to("neuron"), b.to("neuron")
    config = NeuronConfig(
        modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME, ProfileMode.CPU_UTIL],
        profile_output_dir=str(tmp_path / "profile_output"),
        capture_enabled_for_nc="0",
    )
    exporter = NeuronProfiler(config)
    with profile(
        activities=ACTIVITIES,
        experimental_config=config,
        on_trace_ready=exporter.export_trace,
        schedule=schedule(wait=0, warmup=0, active=1, repeat=2),
        record_shapes=True,
    ) as prof:
        for _ in range(2):
            out = torch.matmul(x, y)
            torch.neuron.synchronize()
            prof.step()
    torch.testing.assert_close(out.cpu(), a @ b)
    sessions = sorted(glob.glob(str(tmp_path / "profile_output" / "*_pid_*" / "*")))
    assert len(sessions) == 2 and exporter.trace_paths == [
        os.path.join(s, "trace.json") for s in sessions
    ]
    for session in sessions:
        assert os.path.basename(os.path.dirname(session)).endswith(f"_pid_{os.getpid()}")
        with open(os.path.join(session, "trace.json")) as f:
            trace = json.load(f)
        assert any(e.get("name") == "nc::aten::mm" for e in trace["traceEvents"])
        with open(os.path.join(session, "neuron_session.json")) as f:
            record = json.load(f)
        assert record["rank"] == 0 and record["world_size"] == 1
        assert record["device_events"]["neuron:0"] >= 1
        assert record["settings"]["capture_enabled_for_nc"] == "0"


def test_export_trace_needs_a_directory():
    config = NeuronConfig(profile_output_dir=None)
    with profile(activities=ACTIVITIES, experimental_config=config) as prof:
        torch.ones(2, device="neuron").neg()
    with pytest.raises(ValueError, match="profile_output_dir"):
        NeuronProfiler(config).export_trace(prof)


def test_neuron_profiler_takes_a_config_or_a_directory():
    with pytest.raises(TypeError, match="NeuronConfig"):
        NeuronProfiler("./out")
    with pytest.raises(ValueError, match="either a config"):
        NeuronProfiler(NeuronConfig(), output_dir="./out")
