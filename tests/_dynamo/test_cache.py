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


def _compile_and_run(fns, x):
    """Compiles each function afresh (Dynamo's and Inductor's in-memory caches emptied first);
    returns the neuron results and the cache hits."""
    torch._dynamo.reset()
    torch._inductor.utils.clear_inductor_caches()
    neuron_dynamo.reset_dynamo_metrics()
    outs = [torch.compile(fn, backend="neuron")(x.to("neuron")).cpu() for fn in fns]
    return outs, neuron_dynamo.get_dynamo_metrics()["cache_hits"]


_GRAPHS = (lambda t: t.sin() * 2, lambda t: t.cos() + 3, lambda t: (t * t).tanh())


def _complete_entries(root):
    return sorted(p.name for p in root.iterdir() if (p / cache.MANIFEST).is_file())


@pytest.mark.parametrize(
    "name", ["TORCH_NEURONX_NEFF_DISABLE_CACHE", "TORCH_NEURONX_DISABLE_NEFF_CACHE"]
)
def test_disabling_the_cache_compiles_every_time_and_keeps_nothing(monkeypatch, tmp_path, name):
    """AWS's environment-variable reference (awsdocs-neuron .../torch/reference/env-vars.html,
    compilation caching): the NEFF cache can be turned off."""
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(name, "1")
    x = torch.randn(16)
    for _ in range(2):
        outs, hits = _compile_and_run(_GRAPHS[:1], x)
        torch.testing.assert_close(outs[0], x.sin() * 2)
        assert hits == 0
    assert not (tmp_path / "cache").exists() or not _complete_entries(tmp_path / "cache")


def test_the_entry_limit_keeps_the_most_recently_used(monkeypatch, tmp_path):
    """NEURON_COMPILATION_CACHE_MAX_ENTRIES bounds the cache (env-vars reference)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(root))
    x = torch.randn(16)
    outs, _ = _compile_and_run(_GRAPHS, x)
    for out, fn in zip(outs, _GRAPHS):
        torch.testing.assert_close(out, fn(x))
    assert len(_complete_entries(root)) == 3
    monkeypatch.setenv("NEURON_COMPILATION_CACHE_MAX_ENTRIES", "2")
    _, hits = _compile_and_run(_GRAPHS[2:], x)  # uses the third: the first is the oldest
    assert hits == 1
    kept = _complete_entries(root)
    assert len(kept) == 2
    _, hits = _compile_and_run(_GRAPHS[:1], x)
    assert hits == 0, "the oldest entry was evicted"


def test_the_size_limit_evicts_down_to_the_newest(monkeypatch, tmp_path):
    root = tmp_path / "cache"
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(root))
    monkeypatch.setenv("NEURON_COMPILATION_CACHE_MAX_SIZE_MB", "1")
    _compile_and_run(_GRAPHS, torch.randn(16))
    sizes = [
        sum(f.stat().st_size for f in (root / e).rglob("*") if f.is_file())
        for e in _complete_entries(root)
    ]
    assert len(sizes) >= 1 and (len(sizes) == 1 or sum(sizes) <= 2**20)


@pytest.mark.graph_calls("none")
def test_bad_limits_are_refused(monkeypatch):
    monkeypatch.setenv("NEURON_COMPILATION_CACHE_MAX_ENTRIES", "0")
    with pytest.raises(
        ValueError, match="NEURON_COMPILATION_CACHE_MAX_ENTRIES=0 must be at least 1"
    ):
        cache.evict("/nonexistent", keep="")
