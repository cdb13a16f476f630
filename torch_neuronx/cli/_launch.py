"""Runs a user's script in this process as ``python SCRIPT ARGS`` (or ``python -m MODULE ARGS``)
would, and writes what the parent command asked for to an events file, one JSON object a line.

The parent starts this file by its path, never as ``torch_neuronx.cli._launch``: the CPU run of
``torchneuron parity`` must not load torchneuron, and importing the package would. So this file
needs only the standard library (and torch, which the user's script imports anyway).

Records: ``{"kind": "loss", "value": float, "device": str}`` for each ``backward()`` on a 0-dim
tensor (``--record-losses``); ``{"kind": "findings", ...}`` (``--observe``, see _observe.py); and
last ``{"kind": "result", "status": "ok" | "failed", "exit_code": int, "wall_time_s": float,
"error": null | {...}}``. A run that ends without a result record crashed or called os._exit.
"""

import argparse
import functools
import importlib.util
import json
import os
import runpy
import sys
import sysconfig
import time
import traceback


def _package_dir(name):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(list(spec.submodule_search_locations)[0])


class SourceFiles:
    """Tells the user's source files from PyTorch's, torchneuron's, Python's and libraries'."""

    def __init__(self):
        paths = sysconfig.get_paths()

        def directories(names):
            return tuple(sorted({os.path.join(p, "") for p in names if p}))

        # Checked in this order: a venv's stdlib directory holds its site-packages.
        self.packages = directories(_package_dir(n) for n in ("torch", "torch_neuronx", "nki"))
        self.libraries = directories(os.path.realpath(paths[k]) for k in ("purelib", "platlib"))
        self.stdlib = directories(os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib"))
        self._kinds = {}

    def kind(self, filename):
        """'core' (Python, torch, torchneuron), 'library' (other installed packages) or 'user'."""
        kind = self._kinds.get(filename)
        if kind is None:
            path = "" if filename.startswith("<") else os.path.realpath(filename)
            if not path or path.startswith(self.packages):
                kind = "core"
            elif path.startswith(self.libraries):
                kind = "library"
            elif path.startswith(self.stdlib):
                kind = "core"
            else:
                kind = "user"
            self._kinds[filename] = kind
        return kind

    def place(self, frames):
        """(site, via) for frames given innermost first as (file, line, function): the user's
        frame, and the innermost library frame below it (None when it is the user's own)."""
        via = None
        for filename, line, function in frames:
            kind = self.kind(filename)
            if kind == "user":
                return (filename, line, function), via
            if kind == "library" and via is None:
                via = (filename, line, function)
        return None, via


def describe_exception(exc, sources):
    """A JSON-able description of an exception: type, message, its chain, the frames of its
    traceback outermost first (this launcher's left out), the user's frame nearest to the error
    (``where``) and the innermost library frame below it (``via``)."""
    own = {os.path.realpath(__file__), os.path.realpath(runpy.__file__)}
    frames = [
        {"file": f.filename, "line": f.lineno, "function": f.name, "code": f.line}
        for f in traceback.extract_tb(exc.__traceback__)
        if os.path.realpath(f.filename) not in own
    ]
    chain, seen, cause = [], set(), exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        chain.append(f"{type(cause).__module__}.{type(cause).__qualname__}")
        cause = cause.__cause__ or cause.__context__
    where = via = None
    for frame in reversed(frames):
        kind = sources.kind(frame["file"])
        if kind == "user":
            where = frame
            break
        if kind == "library" and via is None:
            via = frame
    return {
        "type": type(exc).__qualname__,
        "message": str(exc),
        "chain": chain,
        "frames": frames,
        "where": where,
        "via": via,
    }


def record_losses(emit):
    """Records the scalar of each ``backward()`` on a 0-dim tensor: the loss curve."""
    import torch

    original = torch.autograd.backward

    @functools.wraps(original)
    def backward(tensors, grad_tensors=None, *args, **kwargs):
        loss = tensors[0] if isinstance(tensors, (list, tuple)) and len(tensors) == 1 else tensors
        if (
            grad_tensors is None
            and isinstance(loss, torch.Tensor)
            and loss.dim() == 0
            and loss.is_floating_point()
        ):
            emit({"kind": "loss", "value": loss.detach().item(), "device": loss.device.type})
        return original(tensors, grad_tensors, *args, **kwargs)

    torch.autograd.backward = backward


def hide_accelerators():
    """Makes this process a CPU-only machine, as the CPU run stands for one: no accelerator is
    current, and CUDA (which a CUDA build of torch reports as the accelerator even with no GPU)
    is unavailable. The parent also empties CUDA_VISIBLE_DEVICES."""
    import torch

    def current_accelerator(check_available=False):
        return None

    torch.accelerator.current_accelerator = current_accelerator
    torch.accelerator.is_available = lambda: False
    torch.accelerator.device_count = lambda: 0


def offset_seeds(offset):
    """Seeds torch's default generators `offset` away from what the script asks for: the same
    program with other random numbers, as another seed gives (generators the script makes and
    seeds itself keep their seeds; an unseeded script draws other numbers each run anyway)."""
    import torch

    manual_seed = torch.manual_seed

    def offset_manual_seed(seed):
        return manual_seed(int(seed) + offset)

    torch.manual_seed = torch.random.manual_seed = offset_manual_seed


def add_child_target_arguments(parser):
    """The script a child process runs, as its parent passes it: ``[-m] TARGET ARGS...``."""
    parser.add_argument("-m", dest="as_module", action="store_true", help="TARGET is a module")
    parser.add_argument("target")
    parser.add_argument("args", nargs=argparse.REMAINDER)


def set_argv_and_path(target, args, as_module):
    """Sets sys.argv and sys.path[0] as the interpreter would for the target."""
    sys.argv = [target, *args]
    sys.path[0] = os.getcwd() if as_module else os.path.dirname(os.path.abspath(target))


def run_target(target, as_module):
    """Runs the user's code under ``__main__``; returns (exit code, exception or None)."""
    try:
        if as_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0, None
        print(e.code, file=sys.stderr)
        return 1, None
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - the user's script failed: report it, as python does
        traceback.print_exception(e)
        return 1, e
    return 0, None


def main():
    parser = argparse.ArgumentParser(prog="_launch.py", description=__doc__)
    parser.add_argument("--events", required=True, help="the JSON-lines file to append to")
    parser.add_argument("--observe", action="store_true", help="collect torchneuron findings")
    parser.add_argument("--record-losses", action="store_true", help="record backward() losses")
    parser.add_argument("--cpu-only", action="store_true", help="hide every accelerator")
    parser.add_argument(
        "--seed-offset", type=int, default=0, help="seed torch's default generators apart"
    )
    add_child_target_arguments(parser)
    opts = parser.parse_args()
    events = open(opts.events, "a", buffering=1)

    def emit(record):
        events.write(json.dumps(record) + "\n")

    # This file's directory holds the other subcommands' modules; they must not shadow the
    # user's imports (e.g. `coverage`).
    set_argv_and_path(opts.target, opts.args, opts.as_module)
    sources = SourceFiles()
    observer = None
    if opts.observe:
        from torch_neuronx.cli import _observe as observe

        observer = observe.Observer(sources)
        observer.start()
    if opts.cpu_only:
        hide_accelerators()
    if opts.seed_offset:
        offset_seeds(opts.seed_offset)
    if opts.record_losses:
        record_losses(emit)
    start = time.perf_counter()
    code, error = run_target(opts.target, opts.as_module)
    wall_time = time.perf_counter() - start
    if observer is not None:
        emit({"kind": "findings", **observer.finish(wall_time)})
    emit(
        {
            "kind": "result",
            "status": "ok" if code == 0 else "failed",
            "exit_code": code,
            "wall_time_s": wall_time,
            "error": describe_exception(error, sources) if error is not None else None,
        }
    )
    events.close()
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":
    main()
