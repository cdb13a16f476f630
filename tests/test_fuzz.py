"""Differential fuzzing: random op chains on neuron against CPU PyTorch (see fuzz_ops.py).

``make test`` runs a bounded, derandomized sample; ``make fuzz`` runs FUZZ_EXAMPLES (10000 by
default) fresh random chains. The exact fuzz runs in a child process with
TORCH_NEURONX_64BIT=native, since the policy is fixed when the device first starts; this
process keeps the default narrow policy for the rest.
"""

import os

import fuzz_ops
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyrun import run_python

LONG_RUN = int(os.environ.get("FUZZ_EXAMPLES", "0"))

settings.register_profile(
    "fuzz",
    deadline=None,
    database=None,
    derandomize=not LONG_RUN,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def fuzz(bounded, share):
    """A hypothesis test of ``bounded`` examples, or ``share`` of FUZZ_EXAMPLES in a long run."""
    examples = max(1, int(LONG_RUN * share)) if LONG_RUN else bounded
    return lambda f: settings(settings.get_profile("fuzz"), max_examples=examples)(
        given(st.data())(f)
    )


@fuzz(bounded=3000, share=1)
def eager_chains(data):
    fuzz_ops.run_eager(data.draw, max_steps=8)


# A function of its own, so that its derandomized examples are not eager_chains' first ones.
@fuzz(bounded=2000, share=0.25)
def eager_chains_default_policy(data):
    fuzz_ops.run_eager(data.draw, max_steps=8)


# Each example compiles a graph (about a second), hence few and short chains.
@fuzz(bounded=12, share=0.01)
def compiled_chains(data):
    fuzz_ops.run_compiled(data.draw, max_steps=4)


def test_eager_chains_match_cpu_exactly():
    out = run_python(
        f"import runpy\nrunpy.run_path({__file__!r})['eager_chains']()",
        env={"TORCH_NEURONX_64BIT": "native"},
        timeout=None if LONG_RUN else 600,
    )
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-20000:]


def test_eager_chains_under_the_default_64bit_policy():
    eager_chains_default_policy()


# tests/conftest.py gives the run its own compile cache and a fresh Dynamo per test.
def test_compiled_chains_match_eager_cpu():
    compiled_chains()
