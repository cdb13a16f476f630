"""Suite-wide isolation of compile state, and the check that compiled graphs run compiled code."""

import contextlib
import os
import pathlib
import shutil
import sys
import tempfile

import compile_checks
import pytest
import torch

# Where compiled code and compile artifacts go: each gets a directory of this run.
_STATE_DIRS = {
    "TORCH_NEURONX_NEFF_CACHE_DIR": "neff-cache",
    "TORCH_NEURONX_DEBUG_DIR": "neuron-debug",
    "TORCHINDUCTOR_CACHE_DIR": "inductor-cache",
}
_STATE_ROOT = pytest.StashKey[str]()
_GRAPH_CALLS = pytest.StashKey[list]()
_UNDO = pytest.StashKey[contextlib.ExitStack]()


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "graph_calls(expected, kernel_ops=()): what graphs compiled by the neuron backend run "
        "in this test: 'compiled', 'eager' or 'none' (tests/_dynamo/compile_checks.py)",
    )
    undo = contextlib.ExitStack()
    config.stash[_UNDO] = undo
    # Set here, before anything compiles, and inherited by subprocesses: a cache that another
    # run filled would let a test pass without compiling, and the user's ~/.cache/torchneuron
    # is not the suite's to fill.
    root = tempfile.mkdtemp(prefix="torchneuron-tests-")
    undo.callback(shutil.rmtree, root, ignore_errors=True)
    env = undo.enter_context(pytest.MonkeyPatch.context())
    for var, name in _STATE_DIRS.items():
        env.setenv(var, os.path.join(root, name))
    config.stash[_STATE_ROOT] = root
    # Under pytest-xdist (`make test` runs a worker per core) each worker gets its share of the
    # cores: OpenMP pools of every worker's size on all cores spin against each other.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        threads = max(1, (os.cpu_count() or 1) // workers)
        torch.set_num_threads(threads)
        env.setenv("OMP_NUM_THREADS", str(threads))
    if "torch_neuronx" in sys.modules:  # not loaded with TORCH_DEVICE_BACKEND_AUTOLOAD=0
        config.stash[_GRAPH_CALLS] = undo.enter_context(compile_checks.logging_graph_calls())


def pytest_unconfigure(config):
    config.stash[_UNDO].close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    # A hook rather than a fixture, so that a graph that ran eagerly fails the test itself.
    calls = item.config.stash.get(_GRAPH_CALLS, None)
    if calls is None:
        return (yield)
    calls.clear()
    result = yield
    marker = item.get_closest_marker("graph_calls")
    expected, kernel_ops = (
        (marker.args[0], marker.kwargs.get("kernel_ops", ())) if marker else (None, ())
    )
    compile_checks.check_graph_calls(calls, expected, kernel_ops)
    return result


@pytest.fixture(scope="session")
def session_cache(pytestconfig):
    """The compile cache that this run's tests share."""
    return pathlib.Path(
        pytestconfig.stash[_STATE_ROOT], _STATE_DIRS["TORCH_NEURONX_NEFF_CACHE_DIR"]
    )


def _forget_compiled_code():
    # Only what is loaded: with TORCH_DEVICE_BACKEND_AUTOLOAD=0 neither may be, and importing
    # Dynamo costs seconds.
    if "torch._dynamo" in sys.modules:
        sys.modules["torch._dynamo"].reset()
    if "torch_neuronx" in sys.modules:
        sys.modules["torch_neuronx"].reset_dynamo_metrics()


@pytest.fixture(autouse=True)
def _fresh_compile_state():
    """Each test compiles from scratch and sees only its own compile metrics."""
    _forget_compiled_code()
    yield
    _forget_compiled_code()


@pytest.fixture(autouse=True)
def _reset_current_device():
    torch.neuron.set_device(0)
    yield
    torch.neuron.set_device(0)
