import pytest
import torch


def test_stats_follow_allocations():
    torch.neuron.empty_cache()
    base = torch.neuron.memory_allocated()
    x = torch.empty(1 << 20, device="neuron")
    assert torch.neuron.memory_allocated() == base + 4 * (1 << 20)
    assert torch.neuron.memory_reserved() >= torch.neuron.memory_allocated()
    stats = torch.neuron.memory_stats()
    for key in (
        "allocated_bytes.all.current",
        "allocated_bytes.all.peak",
        "reserved_bytes.all.current",
        "active_bytes.all.peak",
        "allocation.all.current",
        "num_alloc_retries",
        "num_ooms",
        "requested_bytes.all.current",
        "segment.large_pool.current",
    ):
        assert key in stats
    del x
    assert torch.neuron.memory_allocated() == base


def test_caching_and_empty_cache():
    torch.neuron.empty_cache()
    x = torch.empty(4 << 20, dtype=torch.uint8, device="neuron")
    ptr = x.data_ptr()
    del x
    reserved = torch.neuron.memory_reserved()
    y = torch.empty(4 << 20, dtype=torch.uint8, device="neuron")
    assert y.data_ptr() == ptr, "a freed block of the same size class is reused"
    del y
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() < reserved


def test_peak_reset():
    x = torch.empty(1 << 20, device="neuron")
    del x
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == torch.neuron.memory_allocated()
    y = torch.empty(2 << 20, device="neuron")
    assert torch.neuron.max_memory_allocated() >= 8 << 20
    del y


def test_mem_get_info_and_per_core_capacity():
    free, total = torch.neuron.mem_get_info(1)
    assert total == 24 * 2**30 and 0 < free <= total
    x = torch.empty(1 << 20, device="neuron:1")
    assert torch.neuron.mem_get_info(1)[0] <= free - (4 << 20)
    assert torch.neuron.memory_allocated(1) >= 4 << 20
    del x


def test_out_of_memory_and_recovery():
    before = torch.neuron.memory_stats()["num_ooms"]
    keep = torch.ones(10, device="neuron")
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(30 * 2**30, dtype=torch.uint8, device="neuron")
    msg = str(info.value)
    assert "neuron:0" in msg and "Tried to allocate 30.00 GiB" in msg
    assert "allocated" in msg and "reserved" in msg and "capacity 24.00 GiB" in msg
    assert torch.neuron.memory_stats()["num_ooms"] == before + 1
    assert (keep * 2).sum().item() == 20.0
    assert torch.empty(1024, device="neuron").numel() == 1024


def test_oom_counts_cached_blocks_first():
    # Cached blocks are given back before an allocation is declared out of memory.
    torch.neuron.empty_cache()
    x = torch.empty(13 * 2**30, dtype=torch.uint8, device="neuron:3")
    del x
    assert torch.neuron.memory_reserved(3) >= 13 * 2**30
    y = torch.empty(14 * 2**30, dtype=torch.uint8, device="neuron:3")
    assert torch.neuron.memory_stats(3)["num_alloc_retries"] >= 1
    del y
    torch.neuron.empty_cache()


def test_memory_summary():
    x = torch.empty(100, device="neuron")
    text = torch.neuron.memory_summary()
    assert "neuron:0 memory summary" in text and "Allocated memory" in text
    del x


def test_untyped_storage_resize_frees_and_regrows():
    x = torch.arange(1024.0, device="neuron")
    before = torch.neuron.memory_allocated()
    storage = x.untyped_storage()
    storage.resize_(0)
    assert storage.size() == 0
    assert torch.neuron.memory_allocated() < before
    storage.resize_(4096)
    assert storage.size() == 4096 and x.data_ptr() != 0


def test_accelerator_memory_api():
    import gc

    gc.collect()
    x = torch.empty(1000, device="neuron")
    assert torch.accelerator.memory_allocated() == torch.neuron.memory_allocated() >= 4000
    del x
    torch.accelerator.empty_cache()
    torch.accelerator.empty_host_cache()
    assert torch.accelerator.get_memory_info(0)[1] == 24 * 2**30


def test_host_memory_stats_follow_pinned_allocations():
    before = torch.neuron.host_memory_stats()["active_requests.current"]
    pinned = torch.empty(1000).pin_memory()
    stats = torch.neuron.host_memory_stats()
    assert stats["active_requests.current"] == before + 1
    assert stats["active_bytes.current"] >= 4000 and "num_host_alloc" in stats
    del pinned
    assert torch.neuron.host_memory_stats()["active_requests.current"] == before


@pytest.mark.parametrize(
    "nbytes, reserved",
    [
        (100, 256),  # the minimum block
        (1000, 1024),  # 256-byte steps below 1 MiB
        ((1 << 20) + 1, (1 << 20) + (1 << 18)),  # quarter powers of two up to 16 MiB
        ((16 << 20) - 1, 16 << 20),
        (16 << 20, 16 << 20),  # 16 MiB and larger: not rounded
        ((16 << 20) + 1, (16 << 20) + 1),
        ((40 << 20) + 12345, (40 << 20) + 12345),
    ],
)
def test_size_classes_of_the_memory_management_guide(nbytes, reserved):
    """AWS's memory-management guidelines (awsdocs-neuron .../torch/reference/
    guidelines-memory-management.html): requests under 16 MB round up to size classes (minimum
    256 B), requests of 16 MB and above are not rounded."""
    torch.neuron.empty_cache()
    before = torch.neuron.memory_allocated(2)
    x = torch.empty(nbytes, dtype=torch.uint8, device="neuron:2")
    assert torch.neuron.memory_allocated(2) - before == reserved
    stats = torch.neuron.memory_stats(2)
    assert stats["requested_bytes.all.current"] - stats["allocated_bytes.all.current"] <= 0
    del x
