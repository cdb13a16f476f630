"""Memory debugging as on CUDA: allocator history and snapshots in torch.cuda's format (read by
PyTorch's own _memory_viz), the per-process memory fraction, OOM errors, nested stats."""

import os
import pickle

import pytest
import torch
from torch.cuda import _memory_viz

import torch_neuronx  # noqa: F401

memory = torch.neuron.memory
THIS_FILE = os.path.abspath(__file__)


@pytest.fixture
def history():
    """Records history with Python stacks for one test, from a clean state."""
    torch.neuron.empty_cache()
    memory._record_memory_history("all", context="all", stacks="python", clear_history=True)
    yield
    memory._record_memory_history(None)


def allocate_kept():
    return torch.empty(1000, device="neuron")  # 4000 bytes: a 4096-byte block


def allocate_and_free():
    t = torch.empty(300, device="neuron")  # 1200 bytes: a 1280-byte block
    addr = t.untyped_storage().data_ptr()
    del t
    return addr


def frame_names(frames):
    return [(os.path.abspath(f["filename"]), f["name"]) for f in frames]


def test_snapshot_has_blocks_with_their_allocation_stacks(history):
    kept = allocate_kept()
    addr = kept.untyped_storage().data_ptr()
    snap = memory._snapshot()
    (seg,) = [s for s in snap["segments"] if s["address"] == addr]
    assert seg["device"] == 0 and seg["total_size"] == 4096 and seg["segment_type"] == "small"
    (block,) = seg["blocks"]
    assert block["state"] == "active_allocated"
    assert (block["size"], block["requested_size"]) == (4096, 4000)
    assert (THIS_FILE, "allocate_kept") in frame_names(block["frames"])


def test_history_records_allocs_and_frees_in_order(history):
    addr = allocate_and_free()
    trace = memory._snapshot()["device_traces"][0]
    mine = [e for e in trace if e["addr"] == addr and e["action"] != "segment_alloc"]
    assert [e["action"] for e in mine] == ["alloc", "free_requested", "free_completed"]
    assert all(e["size"] == 1200 for e in mine)
    assert (THIS_FILE, "allocate_and_free") in frame_names(mine[0]["frames"])
    # context="all": frees keep the stack that freed them too.
    assert (THIS_FILE, "allocate_and_free") in frame_names(mine[1]["frames"])
    assert mine[0]["time_us"] <= mine[2]["time_us"]
    segment = [e for e in trace if e["action"] == "segment_alloc" and e["addr"] == addr]
    assert segment and segment[0]["size"] == 1280


def test_empty_cache_records_segment_frees(history):
    addr = allocate_and_free()
    torch.neuron.empty_cache()
    trace = memory._snapshot()["device_traces"][0]
    assert ("segment_free", addr) in [(e["action"], e["addr"]) for e in trace]
    assert addr not in [s["address"] for s in memory._snapshot()["segments"]]


def test_context_none_keeps_no_stacks():
    memory._record_memory_history("all", context=None, clear_history=True)
    try:
        kept = allocate_kept()
        snap = memory._snapshot()
    finally:
        memory._record_memory_history(None)
    addr = kept.untyped_storage().data_ptr()
    assert all(not e["frames"] for e in snap["device_traces"][0])
    (seg,) = [s for s in snap["segments"] if s["address"] == addr]
    assert seg["blocks"][0]["frames"] == []


def test_state_mode_keeps_stacks_but_no_history():
    memory._record_memory_history("state", context="state", stacks="python", clear_history=True)
    try:
        kept = allocate_kept()
        snap = memory._snapshot()
    finally:
        memory._record_memory_history(None)
    assert snap["device_traces"][0] == []
    (seg,) = [s for s in snap["segments"] if s["address"] == kept.untyped_storage().data_ptr()]
    assert (THIS_FILE, "allocate_kept") in frame_names(seg["blocks"][0]["frames"])


def test_max_entries_keeps_the_newest():
    memory._record_memory_history("all", context=None, max_entries=4, clear_history=True)
    try:
        addrs = [allocate_and_free() for _ in range(3)]
        trace = memory._snapshot()["device_traces"][0]
    finally:
        memory._record_memory_history(None)
    assert len(trace) == 4
    assert [e["action"] for e in trace][-3:] == ["alloc", "free_requested", "free_completed"]
    assert trace[-1]["addr"] == addrs[-1]


def test_nothing_recorded_when_disabled():
    memory._record_memory_history(None)
    allocate_and_free()
    assert all(t == [] for t in memory._snapshot()["device_traces"])


def test_memory_viz_renders_a_dumped_snapshot(history, tmp_path):
    kept = allocate_kept()
    allocate_and_free()
    path = tmp_path / "snap.pickle"
    memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        snap = pickle.load(f)
    assert snap["segments"] and snap["device_traces"][0]
    for html in (_memory_viz.trace_plot(snap), _memory_viz.segment_plot(snap)):
        assert "snapshot.pickle" in html and "MemoryViz.js" in html
    # The flame graph inputs name the allocating function with the size it asked for, and the
    # block's rounding as a gap.
    lines = _memory_viz.memory(snap, format_flamegraph=lambda text: text).splitlines()
    assert any("allocate_kept" in line and line.endswith(" 4000") for line in lines)
    assert any(line.endswith("<gaps> 96") for line in lines)
    assert "allocate_kept" in _memory_viz.segments(snap, format_flamegraph=lambda text: text)
    summary = _memory_viz.segsum(snap)
    assert f"segments: {len(snap['segments'])}" in summary
    text = _memory_viz.trace(snap)
    assert "alloc" in text and "free" in text
    del kept


def test_memory_snapshot_lists_the_segments(history):
    kept = allocate_kept()
    segments = torch.neuron.memory_snapshot()
    assert kept.untyped_storage().data_ptr() in [s["address"] for s in segments]
    reserved = sum(s["total_size"] for s in segments if s["device"] == 0)
    assert reserved == torch.neuron.memory_reserved(0)


@pytest.fixture
def fraction():
    yield
    torch.neuron.set_per_process_memory_fraction(1.0)
    torch.neuron.empty_cache()


def test_memory_fraction_is_enforced(fraction, history):
    capacity = torch.neuron.get_device_properties(0).total_memory
    torch.neuron.set_per_process_memory_fraction(0.001)
    assert torch.neuron.get_per_process_memory_fraction() == 0.001
    limit = int(capacity * 0.001)
    fits = torch.empty(limit // 8, dtype=torch.uint8, device="neuron")  # well under the limit
    with pytest.raises(torch.OutOfMemoryError, match="set_per_process_memory_fraction"):
        torch.empty(limit, dtype=torch.uint8, device="neuron")
    ooms = [e for e in memory._snapshot()["device_traces"][0] if e["action"] == "oom"]
    assert ooms and ooms[-1]["size"] == limit and 0 < ooms[-1]["device_free"] <= capacity
    torch.neuron.set_per_process_memory_fraction(1.0)
    torch.empty(limit, dtype=torch.uint8, device="neuron")
    del fits


def test_memory_fraction_rejects_bad_values():
    with pytest.raises(ValueError, match="0~1"):
        torch.neuron.set_per_process_memory_fraction(1.5)
    with pytest.raises(TypeError, match="float"):
        torch.neuron.set_per_process_memory_fraction(1)


def test_out_of_memory_error_is_torchs():
    assert torch.neuron.OutOfMemoryError is torch.OutOfMemoryError
    capacity = torch.neuron.get_device_properties(0).total_memory
    with pytest.raises(torch.neuron.OutOfMemoryError, match="Neuron out of memory"):
        torch.empty(capacity + 1, dtype=torch.uint8, device="neuron")


def test_memory_stats_as_nested_dict_matches_flat_stats():
    kept = allocate_kept()
    flat = torch.neuron.memory_stats()
    nested = torch.neuron.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == torch.neuron.memory_allocated()
    for key, value in flat.items():
        node = nested
        for part in key.split("."):
            node = node[part]
        assert node == value, key
    del kept


def test_list_gpu_processes_lists_this_process():
    kept = allocate_kept()
    listing = torch.neuron.list_gpu_processes()
    assert listing.splitlines()[0] == "neuron:0"
    pid, mib = listing.splitlines()[1].split()[1], float(listing.splitlines()[1].split()[3])
    assert int(pid) == os.getpid()
    assert mib == pytest.approx(torch.neuron.memory_reserved() / 2**20, abs=1e-3)
    del kept


def test_bad_history_options_are_refused():
    with pytest.raises(ValueError, match="context"):
        memory._record_memory_history("all", context="everything")
    with pytest.raises(TypeError, match="record_pinned_host_memory"):
        memory._record_memory_history("all", record_pinned_host_memory=True)


def test_caching_allocator_alloc_and_delete():
    before = torch.neuron.memory_allocated(0)
    ptr = torch.neuron.caching_allocator_alloc(5000, device=0)
    assert ptr != 0 and torch.neuron.memory_allocated(0) == before + 5120
    torch.neuron.caching_allocator_delete(ptr)
    assert torch.neuron.memory_allocated(0) == before
    with pytest.raises(RuntimeError, match="caching_allocator_alloc"):
        torch.neuron.caching_allocator_delete(ptr)


def test_caching_allocator_disabled_returns_freed_memory():
    torch.neuron.empty_cache()
    with torch.neuron.caching_allocator_disabled():
        reserved = torch.neuron.memory_reserved(0)
        t = torch.empty(1000, device="neuron")
        assert torch.neuron.memory_reserved(0) == reserved + 4096
        del t
        assert torch.neuron.memory_reserved(0) == reserved
    t = torch.empty(1000, device="neuron")
    del t
    assert torch.neuron.memory_reserved(0) == reserved + 4096  # cached again
    torch.neuron.empty_cache()


def test_host_memory_stats_resets():
    pinned = torch.empty(1000).pin_memory()
    del pinned
    assert torch.neuron.host_memory_stats()["allocations.allocated"] > 0
    torch.neuron.reset_accumulated_host_memory_stats()
    assert torch.neuron.host_memory_stats()["allocations.allocated"] == 0
    torch.neuron.reset_peak_host_memory_stats()
    nested = torch.neuron.host_memory_stats_as_nested_dict()
    stats = torch.neuron.host_memory_stats()
    assert nested["allocations"]["peak"] == stats["allocations.peak"]
