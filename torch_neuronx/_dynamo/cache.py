"""The persistent compile cache, in the role of TorchNeuron's NEFF cache.

Each compiled graph owns one directory, named after the model and a hash of the graph. It is
used as Inductor's cache directory while that graph compiles, so it ends up holding
everything needed to load the graph again without code generation or a C++ compile: the
FX-graph cache record, the generated wrapper module and the kernel libraries. A manifest of
SHA-256 checksums, written last, marks the directory complete. A directory whose manifest is
missing or does not match its files is deleted and compiled afresh, so a corrupted entry
costs a recompile, never a crash. A per-entry ``flock`` makes a second process wait for the
first one's compile and then load its result.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings

from torch_neuronx._dynamo import config

MANIFEST = "MANIFEST.json"
# Inductor keeps lock files here that change whenever the entry is used.
_VOLATILE_DIRS = ("locks",)


@contextlib.contextmanager
def owner_only():
    """Files created meanwhile, by us, Inductor or the C++ compiler, are private to the owner."""
    # The umask is the only control over files that gcc and Inductor create themselves.
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Entry:
    """One graph's directory in the cache."""

    def __init__(self, path, key):
        self.path = path
        self.key = key

    def _files(self):
        for parent, dirs, files in os.walk(self.path):
            if parent == self.path:
                dirs[:] = [d for d in dirs if d not in _VOLATILE_DIRS]
            for name in files:
                if name != MANIFEST and not name.startswith("."):
                    full = os.path.join(parent, name)
                    yield os.path.relpath(full, self.path), full

    def verify(self):
        """True when the manifest exists, names this key, and every file matches its checksum."""
        try:
            with open(os.path.join(self.path, MANIFEST)) as f:
                manifest = json.load(f)
            files = manifest["files"]
            return manifest["key"] == self.key and all(
                _sha256(os.path.join(self.path, rel)) == digest for rel, digest in files.items()
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return False

    def reset(self):
        """Deletes whatever the directory holds and starts it empty."""
        shutil.rmtree(self.path, ignore_errors=True)
        os.makedirs(self.path, mode=0o700)

    def adopt(self, paths):
        """Copies in files that the compiled graph loaded from another directory."""
        # Inductor reuses a kernel this process already compiled for another graph; a fresh
        # process looks for it in this entry, at the same place relative to the cache root.
        for path in paths:
            target = os.path.join(
                self.path, os.path.basename(os.path.dirname(path)), os.path.basename(path)
            )
            if not os.path.exists(target):
                os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
                shutil.copyfile(path, target)

    def commit(self):
        """Writes the manifest, atomically, which makes the entry valid."""
        manifest = {"key": self.key, "files": {rel: _sha256(full) for rel, full in self._files()}}
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".manifest-")
        with os.fdopen(fd, "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
        os.replace(tmp, os.path.join(self.path, MANIFEST))

    @contextlib.contextmanager
    def as_inductor_cache(self):
        """Points Inductor's caches (FX graphs, wrapper modules, kernels) at this entry."""
        # Inductor reads TORCHINDUCTOR_CACHE_DIR on every access and writes it back.
        old = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = self.path
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = old


def _lock(path, timeout):
    """An exclusive flock on ``path``, or None after ``timeout`` seconds."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.05)


@contextlib.contextmanager
def open_entry(name, key):
    """Yields the locked entry, verified or emptied, and whether it was complete (``warm``)."""
    if config.cache_disabled():
        with owner_only(), tempfile.TemporaryDirectory(prefix="neuron-compile-") as tmp:
            yield Entry(tmp, key), False
        return
    root = config.cache_dir()
    with owner_only():
        os.makedirs(root, mode=0o700, exist_ok=True)
        fd = _lock(os.path.join(root, name + ".lock"), config.cache_lock_timeout())
        if fd is None:
            warnings.warn(
                f"Timed out waiting for another process compiling {name}; compiling "
                "it without the persistent cache",
                stacklevel=4,
            )
            with tempfile.TemporaryDirectory(prefix="neuron-compile-") as tmp:
                yield Entry(tmp, key), False
            return
        try:
            entry = Entry(os.path.join(root, name), key)
            warm = entry.verify()
            if not warm:
                entry.reset()
            os.utime(entry.path)  # its last use, which eviction goes by
            yield entry, warm
        finally:
            os.close(fd)
        evict(root, keep=name)


def _entry_bytes(path):
    total = 0
    for parent, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(parent, f)).st_size
    return total


def evict(root, keep):
    """Deletes the least recently used complete entries beyond the cache's limits
    (NEURON_COMPILATION_CACHE_MAX_SIZE_MB / _MAX_ENTRIES), never ``keep`` nor one in use."""
    max_bytes, max_entries = config.cache_limits()
    if max_bytes is None and max_entries is None:
        return
    entries = []
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if os.path.isfile(os.path.join(path, MANIFEST)):
            entries.append((os.path.getmtime(path), name, _entry_bytes(path)))
    entries.sort(reverse=True)  # newest first
    kept_bytes = 0
    for count, (_, name, size) in enumerate(entries, start=1):
        kept_bytes += size
        over = (max_entries is not None and count > max_entries) or (
            max_bytes is not None and kept_bytes > max_bytes
        )
        if not over or name == keep:
            continue
        fd = _lock(os.path.join(root, name + ".lock"), 0)
        if fd is None:  # another process is using it
            continue
        try:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            kept_bytes -= size
        finally:
            os.close(fd)
