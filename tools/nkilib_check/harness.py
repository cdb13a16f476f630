"""pytest plugin (``-p harness``) that lets nki-library's own test harness run in simulation mode
against our ``nki``, and records each test's outcome and time for the per-module table
(``NKILIB_CHECK_RESULTS``: the JSON file; ``NKILIB_CHECK_TEST_TIMEOUT``: seconds a test may
take before it is stopped and counted as not finished; ``NKILIB_CHECK_SAMPLE``: run only the
first n tests of each module).

The snapshot's harness does not run as shipped: it imports two modules the repository does not
contain (``test/utils/scripts/remote_lock_scripts.py``, used only to lock remote hosts, and
``test/utils/perf_analysis_private.py``, used only for hardware profiles), and in simulation
mode ``Orchestrator._rename_neff_outputs_to_python_names`` reads ``self._compiled_kernel``,
which only the compile path sets.  This plugin provides the two modules (refusing any use) and
a ``None`` default for the attribute; it changes nothing else.
"""

import enum
import json
import os
import signal
import sys
import time
import types

import pytest

REMOTE_ONLY = "is part of nki-library's remote-host tooling, not of a local simulation run"


class LockStatus(enum.Enum):
    """The lock states the harness names; any use beyond naming them refuses."""

    ALLOCATED = "allocated"
    DRAINED = "drained"
    DRAINING = "draining"
    ERROR = "error"
    FLOCK_TIMEOUT = "flock_timeout"
    NO_CORES = "no_cores"
    RELEASED = "released"
    UNDRAINED = "undrained"

    @property
    def exit_code(self):
        raise RuntimeError(f"LockStatus.exit_code {REMOTE_ONLY}")

    @classmethod
    def from_exit_code(cls, code):
        raise RuntimeError(f"LockStatus.from_exit_code {REMOTE_ONLY}")


class LockResult:
    def __init__(self, *args, **kwargs):
        raise RuntimeError(f"LockResult {REMOTE_ONLY}")


def analyze_trace(*args, **kwargs):
    raise RuntimeError("perf analysis needs AWS's private perf_analysis_private module")


def _module(name, **attrs):
    module = types.ModuleType(name, "stand-in for a module missing from nki-library")
    module.__dict__.update(attrs)
    sys.modules[name] = module


_module("test.utils.scripts.remote_lock_scripts", LockStatus=LockStatus, LockResult=LockResult)
_module("test.utils.perf_analysis_private", analyze_trace=analyze_trace)

_results = {"tests": {}, "collection_errors": {}, "collected": []}
_started = time.monotonic()


def _message(report):
    """The exception line of a failure (for an import error, the last ``E`` line)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        text = crash.message
    else:
        lines = [ln[1:].strip() for ln in str(report.longrepr).splitlines() if ln.startswith("E ")]
        text = lines[-1] if lines else str(report.longrepr)
    return text.strip().splitlines()[0][:300] if text.strip() else ""


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    # NKILIB_CHECK_SAMPLE=n: only the first n selected tests of each module run.
    sample = int(os.environ.get("NKILIB_CHECK_SAMPLE", "0"))
    if not sample:
        return
    kept, left, seen = [], [], {}
    # Tests the harness marks to skip (large shapes, other platforms) do not count.
    for item in sorted(items, key=lambda i: i.get_closest_marker("skip") is not None):
        module = item.nodeid.split("::")[0]
        seen[module] = seen.get(module, 0) + 1
        (kept if seen[module] <= sample else left).append(item)
    kept.sort(key=items.index)
    for item in left:
        _results["tests"][item.nodeid] = {"outcome": "not sampled", "message": "", "seconds": 0.0}
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


def pytest_collection_finish(session):
    _results["collected"] = [item.nodeid for item in session.items]
    _save()
    orchestrator = sys.modules.get("test.utils.test_orchestrator")
    if orchestrator is not None and not hasattr(orchestrator.Orchestrator, "_compiled_kernel"):
        orchestrator.Orchestrator._compiled_kernel = None


class TestTimeout(BaseException):
    """A BaseException, so that the harness's ``except Exception`` does not turn it into a
    failure of the kernel."""


def _stop(signum, frame):
    raise TestTimeout(f"not finished in {os.environ['NKILIB_CHECK_TEST_TIMEOUT']} s")


def pytest_runtest_setup(item):
    # A module whose cases do not finish would hold the run for hours: after two, it stops.
    module = item.nodeid.split("::")[0]
    stopped = [
        n for n, e in _results["tests"].items()
        if n.startswith(module + "::") and e["outcome"] == "timeout"
    ]  # fmt: skip
    if len(stopped) >= 2:
        _results["tests"][item.nodeid] = {"outcome": "not run", "message": "", "seconds": 0.0}
        pytest.skip("not run: two cases of this module did not finish in time")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    limit = int(os.environ.get("NKILIB_CHECK_TEST_TIMEOUT", "0"))
    if limit:
        signal.signal(signal.SIGALRM, _stop)
        signal.alarm(limit)
    try:
        return (yield)
    finally:
        signal.alarm(0)


def pytest_collectreport(report):
    if report.failed:
        _results["collection_errors"][report.nodeid] = _message(report)
        _save()


def pytest_runtest_logreport(report):
    entry = _results["tests"].setdefault(
        report.nodeid, {"outcome": "passed", "message": "", "seconds": 0.0}
    )
    entry["seconds"] += report.duration
    if entry["outcome"] == "not run":
        return
    if report.skipped and entry["outcome"] == "passed":
        entry.update(outcome="skipped", message=_message(report))
    elif report.failed:
        outcome = "failed" if report.when == "call" else "error"
        if report.when == "call" and "TestTimeout" in str(report.longrepr):
            outcome = "timeout"
        entry.update(outcome=outcome, message=_message(report))


def pytest_runtest_logfinish(nodeid, location):
    _save()


def pytest_sessionfinish(session):
    _save()


def _save():
    path = os.environ.get("NKILIB_CHECK_RESULTS")
    if path:
        _results["seconds"] = time.monotonic() - _started
        with open(path + ".partial", "w") as f:
            json.dump(_results, f, indent=1)
        os.replace(path + ".partial", path)
