"""The persistent compile cache: reuse across processes, concurrency, corruption, permissions."""

import fcntl
import json
import os
import stat

import mlp_job
import pytest
import torch._inductor.utils

import torch_neuronx._dynamo as neuron_dynamo
from torch_neuronx._dynamo import cache


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """A cache that two processes started together compiled the same model into."""
    root = tmp_path_factory.mktemp("shared-cache")
    procs = [mlp_job.start(root) for _ in range(2)]
    return root, [mlp_job.result(p) for p in procs]


@pytest.fixture
def in_process_cache(monkeypatch, shared_cache):
    """``shared_cache`` used from this process, with Inductor's in-memory caches emptied so
    that compiled code is read from disk."""
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(shared_cache[0]))
    torch._inductor.utils.clear_inductor_caches()
    return shared_cache[0]


@pytest.mark.graph_calls("none")  # in subprocesses, which check their own (mlp_job.main)
def test_one_process_compiles_and_the_other_hits_the_cache(shared_cache):
    results = shared_cache[1]
    assert all(r["ok"] for r in results)
    # The lock makes the later process wait for the earlier one's compile, then load it.
    for kind in ("forward", "backward"):
        assert sorted(r["hits"][kind] for r in results) == [False, True]


@pytest.mark.graph_calls("none")
def test_cache_files_are_private_to_the_owner(shared_cache):
    root = shared_cache[0]
    paths = [root, *root.rglob("*")]
    assert len(paths) > 10
    assert not [p for p in paths if stat.S_IMODE(p.lstat().st_mode) & 0o077]


def test_corrupted_entries_are_recompiled(in_process_cache):
    libraries = list(in_process_cache.rglob("*.so"))
    assert libraries
    for path in libraries:
        path.write_bytes(b"not a shared library")
    again = mlp_job.run()
    assert again["ok"]
    assert again["hits"] == {"forward": False, "backward": False}
    for entry in (p for p in in_process_cache.iterdir() if p.is_dir()):
        key = json.loads((entry / cache.MANIFEST).read_text())["key"]
        assert cache.Entry(str(entry), key).verify()


@pytest.mark.graph_calls("none")
def test_a_damaged_manifest_is_a_miss_not_an_error(tmp_path):
    entry = cache.Entry(str(tmp_path / "e"), "k")
    entry.reset()
    (tmp_path / "e" / "data").write_text("payload")
    entry.commit()
    assert entry.verify()
    (tmp_path / "e" / "data").write_text("changed")
    assert not entry.verify()
    (tmp_path / "e" / cache.MANIFEST).write_text("{truncated")
    assert not entry.verify()


def test_lock_timeout_compiles_without_the_cache(monkeypatch, in_process_cache):
    # Another process's compile of the same graphs, as seen through their locks.
    held = []
    for lock in in_process_cache.glob("*.lock"):
        fd = os.open(lock, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        held.append(fd)
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", "0.2")
    try:
        with pytest.warns(UserWarning, match="without the persistent cache"):
            again = mlp_job.run()
    finally:
        for fd in held:
            os.close(fd)
    assert again["ok"]
    assert again["hits"] == {"forward": False, "backward": False}
    assert neuron_dynamo.get_dynamo_metrics()["cache_misses"] == 2
