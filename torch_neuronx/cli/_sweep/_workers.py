"""Worker processes that run the sweep's tasks, so that a sample which crashes its process (or
hangs) is recorded as crashed and the sweep goes on in a fresh worker."""

import collections
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection, Pipe, wait

from torch_neuronx.cli._sweep import _outcomes as outcomes


@dataclasses.dataclass(frozen=True)
class Task:
    """One database entry in one dtype."""

    database: str
    index: int  # the entry's position in the database (databases.load)
    name: str
    dtype: str
    grad: bool


# The events of a task, in order: SAMPLES (how many) or SKIPPED (why none), then a SAMPLE per
# sample (index, verdict, fallback ops, description), then DONE. A sample that ends its worker
# is a SAMPLE with a crashed verdict.
SAMPLES, SKIPPED, SAMPLE, DONE = "samples", "skipped", "sample", "done"


class WorkerStartError(RuntimeError):
    """A worker process died before it was ready: the sweep cannot run in this environment."""


# What a worker sends once it has imported torch and torchneuron.
READY = "ready"


def main(argv):
    """A worker's main loop: runs (task, first sample) requests from the pool until it receives
    None. `argv` is [connection fd, threads, plugins...]."""
    import faulthandler
    import logging
    import warnings

    import torch

    from torch_neuronx.cli._sweep import _databases as databases

    connection = Connection(int(argv[0]))
    threads, plugins = int(argv[1]), argv[2:]
    # A crash's last words (the Python stack) go to the log the pool reads.
    faulthandler.enable()
    warnings.filterwarnings("ignore")
    # CPU-fallback warnings would fill the log; the sweep records the fallback ops itself.
    logging.getLogger("torch_neuronx").setLevel(logging.ERROR)
    torch.set_num_threads(threads)
    connection.send((READY,))
    entries = {}
    while (request := connection.recv()) is not None:
        task, start = request
        if task.database not in entries:
            entries[task.database] = databases.load(task.database, plugins)
        _run_task(connection, entries[task.database][task.index], task, start)


def _run_task(connection, entry, task, start):
    import torch

    from torch_neuronx.cli._sweep import _databases as databases

    database = databases.DATABASES[task.database]
    dtype = databases.DTYPES[task.dtype]
    databases.seed()
    try:
        samples = database.samples(entry, dtype, task.grad)
    except Exception as e:  # noqa: BLE001 - a generator that fails on the CPU makes no samples
        connection.send((SKIPPED, f"{outcomes.GENERATOR_FAILED}: {_first_line(e)}"))
        return
    connection.send((SAMPLES, len(samples)))
    for index in range(start, len(samples)):
        ran = []
        for device in ("cpu", "neuron"):
            torch.ops.neuron.clear_counters()
            try:
                ran.append(database.run(entry, samples[index], device, dtype, task.grad))
            except Exception as e:  # noqa: BLE001 - an error is an outcome
                ran.append(e)
        names, values = torch.ops.neuron.counters()
        counters = dict(zip(names, values))
        fallback = sorted(n.split("::", 1)[1] for n in counters if n.startswith("FallbackOp::"))
        verdict = outcomes.judge(
            *ran,
            fallback,
            counters.get("Narrowed64BitValues", 0),
            outcomes.DOCUMENTED_DIFFERENCES.get(task.name.split("[")[0], ""),
        )
        connection.send(
            (
                SAMPLE,
                index,
                dataclasses.asdict(verdict),
                fallback,
                database.describe(samples[index]),
            )
        )
    connection.send((DONE,))


def _first_line(error, limit=200):
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:limit] if lines else ''}"


class _Worker:
    """A worker process and the pool's end of its connection."""

    def __init__(self, plugins, threads, log_path):
        self.log_path = log_path
        self.connection, child = Pipe()
        with open(log_path, "ab") as log:
            # Its own output (warnings, ops that print) goes to the log, not the terminal.
            self.process = subprocess.Popen(
                [sys.executable, "-c", _MAIN, str(child.fileno()), str(threads), *plugins],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(child.fileno(),),
            )
        child.close()
        self.task = None
        self.ready = False

    def start(self, task, first):
        self.task, self.next, self.samples = task, first, None
        self.since = time.monotonic()
        # A worker that died meanwhile is found by the next check (_crash).
        with contextlib.suppress(OSError):
            self.connection.send((task, first))

    def alive(self):
        return self.process.poll() is None

    def last_words(self):
        """What the worker wrote as it died: faulthandler's error and innermost frame, or else
        its last line."""
        try:
            with open(self.log_path, errors="replace") as f:
                lines = [line.strip() for line in f.read()[-20000:].splitlines() if line.strip()]
        except OSError:
            return ""
        fatal = [i for i, line in enumerate(lines) if line.startswith("Fatal Python error")]
        if not fatal:
            return lines[-1] if lines else ""
        frames = [line for line in lines[fatal[-1] :] if line.startswith("File ")]
        return "; ".join([lines[fatal[-1]], *frames[:1]])

    def stop(self, kill=False):
        if not kill:
            with contextlib.suppress(OSError):
                self.connection.send(None)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
        if self.alive():
            self.process.kill()
        self.process.wait()
        self.connection.close()


# A fresh interpreter rather than multiprocessing's spawn, which would re-run the parent's
# main module (`python -m torch_neuronx`, a script, pytest) in each worker.
_MAIN = "import sys; from torch_neuronx.cli._sweep._workers import main; main(sys.argv[1:])"


def run(tasks, *, workers, plugins=(), timeout=300.0):
    """Runs `tasks` on `workers` processes; yields (task, kind, data) events as they come (see
    SAMPLES...DONE). A sample that kills its worker, or runs longer than `timeout` seconds,
    is reported as crashed and the task goes on from the next sample in a fresh worker."""
    pending = collections.deque((task, 0) for task in tasks)
    if not pending:
        return
    count = max(1, min(workers, len(pending)))
    threads = max(1, (os.cpu_count() or 1) // count)
    with tempfile.TemporaryDirectory(prefix="torchneuron-coverage-") as logs:
        serial = iter(range(1 << 30))

        def spawn():
            path = os.path.join(logs, f"worker-{next(serial)}.log")
            return _Worker(plugins, threads, path)

        pool = [spawn() for _ in range(count)]
        try:
            while pending or any(w.task for w in pool):
                for worker in pool:
                    if worker.task is None and pending:
                        worker.start(*pending.popleft())
                wait([w.connection for w in pool if w.task], 1.0)
                for i, worker in enumerate(pool):
                    if worker.task is None:
                        continue
                    # Checked before reading: whatever a dead worker sent is read first.
                    alive = worker.alive()
                    yield from _receive(worker)
                    crash = _crash(worker, alive, timeout)
                    if crash:
                        yield from _crashed(worker, crash, pending)
                        worker.stop(kill=True)
                        pool[i] = spawn()
        finally:
            for worker in pool:
                worker.stop()


def _receive(worker):
    """Yields the events that `worker` has sent so far."""
    while worker.task and worker.connection.poll():
        try:
            message = worker.connection.recv()
        except (EOFError, OSError):
            return
        kind, data = message[0], message[1:]
        worker.since = time.monotonic()
        if kind == READY:
            worker.ready = True
            continue
        if kind == SAMPLES:
            worker.samples = data[0]
        elif kind == SAMPLE:
            worker.next = data[0] + 1
        yield worker.task, kind, data
        if kind in (DONE, SKIPPED):
            worker.task = None


def _crash(worker, alive, timeout):
    """Why the worker's current task stopped, or None while it is running."""
    if worker.task is None:
        return None
    if not alive:
        code = worker.process.wait()
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        words = worker.last_words()
        if not worker.ready:
            raise WorkerStartError(
                f"a coverage worker process could not start ({how}): {words or 'no output'}"
            )
        return f"the worker process died ({how})" + (f": {words}" if words else "")
    if time.monotonic() - worker.since > timeout:
        return f"no result after {timeout:g} s; the worker process was killed"
    return None


def _crashed(worker, why, pending):
    """Reports the worker's current sample as crashed and queues the samples after it."""
    task, worker.task = worker.task, None
    crashed = dataclasses.asdict(outcomes.Verdict(outcomes.CRASHED, detail=why))
    if worker.samples is None:
        # The sample generator itself crashed: the entry is one crashed sample.
        crashed["detail"] = f"while making the samples: {why}"
        yield task, SAMPLES, (1,)
        yield task, SAMPLE, (None, crashed, [], "")
        yield task, DONE, ()
        return
    yield task, SAMPLE, (worker.next, crashed, [], "")
    if worker.next + 1 < worker.samples:
        pending.appendleft((task, worker.next + 1))
    else:
        yield task, DONE, ()
