"""Runs the `torchneuron` command in a fresh interpreter, on the scripts of tests/cli/scripts."""

import json
import os
import subprocess
import sys

SUPPORT = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(os.path.dirname(SUPPORT), "cli", "scripts")


def script(name):
    """The path of a test script in tests/cli/scripts."""
    return os.path.join(SCRIPTS, name)


def run(*args, env=None, cwd=None, timeout=180):
    """Runs ``python -m torch_neuronx ARGS``; returns the CompletedProcess."""
    full_env = dict(os.environ, **(env or {}))
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (SUPPORT, full_env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "torch_neuronx", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
    )


def run_json(*args, **kwargs):
    """Runs the command with ``--json`` (before the script); returns (CompletedProcess, report)."""
    command, rest = args[0], args[1:]
    out = run(command, "--json", *rest, **kwargs)
    assert out.stdout.startswith("{"), out.stdout + out.stderr
    return out, json.loads(out.stdout)
