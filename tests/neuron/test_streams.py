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


def test_streams_handed_out_are_neuron_streams():
    s = torch.neuron.Stream(device=1)
    handed_out = [
        torch.neuron.current_stream(),
        torch.neuron.default_stream(2),
        s,
    ]
    with torch.neuron.stream(s):
        handed_out.append(torch.neuron.current_stream(1))
    for stream in handed_out:
        assert isinstance(stream, torch.neuron.Stream) and isinstance(stream, torch.Stream)
    assert handed_out[0] == torch.accelerator.current_stream()
    assert handed_out[1].device_index == 2 and handed_out[1].stream_id == 0
    assert handed_out[3] == s and hash(handed_out[3]) == hash(s)
    assert not isinstance(torch.accelerator.current_stream(), torch.neuron.Stream)
    assert not torch.neuron.is_current_stream_capturing()


def test_neuron_events_time_against_each_other_and_torch_events():
    s = torch.neuron.Stream()
    start = s.record_event(torch.neuron.Event(enable_timing=True))
    assert isinstance(start, torch.neuron.Event) and isinstance(start, torch.Event)
    a = torch.randn(128, 128, device="neuron")
    for _ in range(5):
        a = a @ a / 128
    end = torch.neuron.Event(enable_timing=True)
    end.record()
    plain = torch.Event(device="neuron", enable_timing=True)
    plain.record()
    assert start.elapsed_time(end) > 0
    assert start.elapsed_time(plain) >= start.elapsed_time(end)
    assert isinstance(s.record_event(), torch.neuron.Event)
    # A plain torch.Stream accepts a neuron event where it takes any torch.Event.
    torch.accelerator.current_stream().wait_event(end)
    with pytest.raises(ValueError, match="enable_timing=True"):
        torch.neuron.Event().elapsed_time(torch.neuron.Event())
