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


def test_stream_on_other_core_and_priority():
    s = torch.neuron.Stream(device=2, priority=-1)
    assert s.device_index == 2
    t = torch.Stream(device="neuron")
    assert t.device.type == "neuron"


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
    e = s1.record_event()
    s2.wait_event(e)
    s2.wait_stream(s1)
    x = torch.ones(4, device="neuron")
    x.record_stream(s2)
    torch.neuron.synchronize()
    torch.accelerator.synchronize()
