"""Runs the user's script, unchanged, in a child process on neuron or on the CPU, and reads back
what it recorded (_launch.py).

The neuron run is the script as the user runs it, with torchneuron loaded by ``import torch``.
The CPU run is a CPU-only machine: TORCH_DEVICE_BACKEND_AUTOLOAD=0, so torchneuron is not loaded
at all, CUDA is hidden (CUDA_VISIBLE_DEVICES empty) and no accelerator is current (the launcher's
--cpu-only; a CUDA build of torch names ``cuda`` as the accelerator even with no GPU). Scripts
that pick ``torch.accelerator`` when it is there (``current_accelerator() or cpu``, the
``--accel`` convention, Hugging Face) then run on the CPU with no edits.

Random numbers: a neuron run draws them from the device's generators, unless ``rng="cpu"``
(``torchneuron parity``'s default), which sets TORCH_NEURONX_RNG=cpu so that random ops on
neuron tensors draw from the CPU's default generator, the stream the CPU run draws from.
"""

import argparse
import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time

LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_launch.py")
DEVICE_ENV = {
    "neuron": {"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"},
    "cpu": {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "CUDA_VISIBLE_DEVICES": ""},
}


@dataclasses.dataclass
class Target:
    """What the user runs: a script path or a module name, and its arguments."""

    name: str
    args: list
    as_module: bool = False

    def command(self, extra_args=()):
        """The command line, as the user would type it."""
        head = ["python", "-m", self.name] if self.as_module else ["python", self.name]
        return shlex.join([*head, *self.args, *extra_args])


def add_target_arguments(parser):
    """Adds ``[-m] TARGET [ARGS...]`` (everything after TARGET goes to the script)."""
    parser.add_argument(
        "-m",
        dest="as_module",
        action="store_true",
        help="SCRIPT is a module name, run as `python -m MODULE ARGS` would",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="stop a run that takes longer than this (it is reported as timed out)",
    )
    parser.add_argument(
        "target",
        nargs=argparse.REMAINDER,
        metavar="SCRIPT [ARGS...]",
        help="the script (or, with -m, the module) and its arguments, exactly as given to "
        "python; this command's own options go before it",
    )


def target_from(args):
    """The Target named on the command line; exits with status 2 (usage) if there is none."""
    problem = None
    if not args.target:
        problem = "name the script to run, e.g. `torchneuron check train.py`"
    elif not args.as_module and not os.path.isfile(args.target[0]):
        problem = f"{args.target[0]!r} is not a file: give the path of a script, or -m MODULE"
    if problem:
        print(f"torchneuron: {problem}", file=sys.stderr)
        raise SystemExit(2)
    return Target(args.target[0], list(args.target[1:]), args.as_module)


@dataclasses.dataclass
class RunResult:
    """What one run of the script did."""

    device: str
    command: str
    status: str  # ok, failed, crashed or timed out
    exit_code: int
    wall_time_s: float  # of the whole child process
    error: dict = None
    script_time_s: float = None  # of the script itself, as the child measured it
    losses: list = dataclasses.field(default_factory=list)  # (value, device type)
    findings: dict = None
    stdout: list = dataclasses.field(default_factory=list)  # captured lines
    stderr_tail: list = dataclasses.field(default_factory=list)

    def summary(self):
        """A JSON-able digest: status, exit code, time, and the error if any."""
        return {
            "device": self.device,
            "command": self.command,
            "status": self.status,
            "exit_code": self.exit_code,
            "wall_time_s": round(self.wall_time_s, 3),
            "script_time_s": None if self.script_time_s is None else round(self.script_time_s, 3),
            "error": self.error,
        }


def run(
    target,
    device,
    *,
    extra_args=(),
    observe=False,
    record_losses=False,
    capture=False,
    echo=False,
    timeout=None,
    on_progress=None,
    rng=None,
    seed_offset=0,
):
    """Runs ``target`` on ``device`` ('neuron' or 'cpu') in a child process.

    Without ``capture`` the script's output goes to this process's stderr (stdout stays free
    for the report); with it, stdout lines are kept (and the stderr tail, for errors), and
    ``echo`` shows both on this process's stderr as well.
    ``on_progress(result)`` is called about five times a second while it runs. ``rng``, for a
    neuron run: "cpu" or "device" (TORCH_NEURONX_RNG), or None to leave the environment's;
    ``seed_offset`` seeds torch's default generators that far from the script's seeds.
    """
    env = dict(os.environ, PYTHONUNBUFFERED="1", **DEVICE_ENV[device])
    if rng is not None and device == "neuron":
        env["TORCH_NEURONX_RNG"] = rng
    with tempfile.TemporaryDirectory(prefix="torchneuron-run-") as tmp:
        events_path = os.path.join(tmp, "events.jsonl")
        open(events_path, "w").close()
        command = [sys.executable, LAUNCHER, "--events", events_path]
        command += ["--observe"] * observe + ["--record-losses"] * record_losses
        command += ["--cpu-only"] * (device == "cpu")
        command += ["--seed-offset", str(seed_offset)] * bool(seed_offset)
        command += ["-m"] * target.as_module + [target.name, *target.args, *extra_args]
        result = RunResult(device, target.command(extra_args), "running", 0, 0.0)
        stderr_path = os.path.join(tmp, "stderr.txt")
        with open(stderr_path, "w") as stderr:
            start = time.perf_counter()
            child = subprocess.Popen(
                command,
                env=env,
                stdout=subprocess.PIPE if capture else sys.stderr,
                stderr=stderr if capture and not echo else None,
                text=True,
                start_new_session=True,
            )
            reader = None
            if capture:
                reader = threading.Thread(
                    target=_read_lines, args=(child.stdout, result.stdout, echo), daemon=True
                )
                reader.start()
            events = _EventReader(events_path)
            timed_out = False
            try:
                while child.poll() is None:
                    if timeout is not None and time.perf_counter() - start > timeout:
                        timed_out = True
                        break
                    events.read_into(result)
                    if on_progress:
                        on_progress(result)
                    time.sleep(0.2)
            finally:
                # The script runs in its own session (so that its workers stop with it): an
                # interrupt of this command must stop it too.
                if child.poll() is None:
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait()
            if reader:
                reader.join()
            result.wall_time_s = time.perf_counter() - start
        events.read_into(result)
        if capture:
            with open(stderr_path) as f:
                result.stderr_tail = f.read().splitlines()[-30:]
    if result.status == "running":
        result.exit_code = child.returncode
        result.status = "timed out" if timed_out else "crashed"
        result.error = {"type": result.status, "message": _ending(child.returncode, timeout)}
    if on_progress:
        on_progress(result)
    return result


def _ending(code, timeout):
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        if timeout is not None and name == "SIGKILL":
            return f"stopped after the {timeout:g} s timeout"
        return f"the process was killed by {name} before it could report"
    return f"the process exited with status {code} without reporting (os._exit or a crash)"


def _read_lines(stream, lines, echo):
    for line in stream:
        lines.append(line.rstrip("\n"))
        if echo:
            sys.stderr.write(line)


class _EventReader:
    """Reads the child's JSON-lines events file as it grows."""

    def __init__(self, path):
        self.path = path
        self.offset = 0

    def read_into(self, result):
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next read
        self.offset += end
        for line in chunk[:end].decode().splitlines():
            record = json.loads(line)
            kind = record.pop("kind")
            if kind == "loss":
                result.losses.append((record["value"], record["device"]))
            elif kind == "findings":
                result.findings = record
            elif kind == "result":
                result.status = record["status"]
                result.exit_code = record["exit_code"]
                result.error = record["error"]
                result.script_time_s = record["wall_time_s"]
