import pytest
import torch


def test_streams_and_context():
    default = torch.neuron.default_stream()
    assert torch.neuron.current_stream() == default
    s = torch.neuron.Stream()
    assert s.device == torch.device("neuron:0") and s != default
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
        y = torch.ones(3, device="neuron") * 2
    assert torch.neuron.current_stream() == default
    torch.neuron.set_stream(s)
    assert torch.accelerator.current_stream() == s
    torch.neuron.set_stream(default)
    assert torch.equal(y.cpu(), torch.full((3,), 2.0))
    assert s.query()
    s.synchronize()


@pytest.mark.parametrize("priority", [-1, 0])
def test_stream_on_other_core_and_priority(priority):
    # torch.Stream keeps no priority to read back: what a priority must leave intact is a
    # new stream of the requested core, that work can run on and that is then released.
    s = torch.neuron.Stream(device=2, priority=priority)
    other = torch.neuron.Stream(device=2, priority=priority)
    assert s.device_index == 2 and other.device_index == 2
    assert len({s.stream_id, other.stream_id, torch.neuron.default_stream(2).stream_id}) == 3
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream(2) == s
        y = torch.arange(3.0, device="neuron:2") * 2
    assert torch.neuron.current_stream(2) == torch.neuron.default_stream(2)
    assert s.query() and torch.equal(y.cpu(), torch.tensor([0.0, 2.0, 4.0]))
    t = torch.Stream(device="neuron")
    assert t.device.type == "neuron"


def test_stream_context_restores_the_current_device():
    with torch.neuron.stream(torch.neuron.Stream(device=2)):
        assert torch.neuron.current_device() == 2
    assert torch.neuron.current_device() == 0


def test_events_and_elapsed_time():
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    start.record()
    a = torch.randn(256, 256, device="neuron")
    for _ in range(10):
        a = a @ a / 256
    end.record()
    end.synchronize()
    assert start.query() and end.query()
    assert start.elapsed_time(end) > 0


def test_wait_and_record_stream():
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    with torch.neuron.stream(s1):
        x = torch.full((1024,), 3.0, device="neuron")
    e = s1.record_event()
    assert e.query()
    s2.wait_event(e)
    s2.wait_stream(s1)
    with torch.neuron.stream(s2):
        y = x + 1
    assert torch.equal(y.cpu(), torch.full((1024,), 4.0))
    # Work is synchronous, so a block recorded on another stream is free as soon as it is
    # released: record_stream must not keep it allocated.
    allocated = torch.neuron.memory_allocated()
    x.record_stream(s2)
    del x
    assert torch.neuron.memory_allocated() == allocated - 4096
    torch.neuron.synchronize()
    torch.accelerator.synchronize()
    assert s1.query() and s2.query()
