"""Runs Python code in a fresh interpreter, for behaviour fixed at import time."""

import os
import subprocess
import sys

SUPPORT = os.path.dirname(os.path.abspath(__file__))


def _run(args, env, timeout):
    full_env = dict(os.environ)
    full_env.update(env or {})
    # The child can import the test helpers, as the tests themselves can (pyproject's pythonpath).
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (SUPPORT, full_env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=full_env, timeout=timeout
    )


def run_python(code, env=None, timeout=120):
    """Runs `code` in a fresh interpreter; returns the CompletedProcess."""
    return _run(["-c", code], env, timeout)


def run_script(path, *args, env=None, timeout=120):
    """Runs the script `path` with `args` in a fresh interpreter; returns the CompletedProcess."""
    return _run([path, *args], env, timeout)
