"""Compiled serving: the model's forward as one neuron graph per bucket of batched tokens
(torch_neuronx/vllm/_graphs.py), against eager serving on the device and stock vLLM-CPU."""

import pytest
from vllm_generate import BUCKETS
from vllm_runs import run_vllm

from torch_neuronx.vllm import _graphs as graphs


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("neuron-compile-cache"))


_starts = {}


@pytest.fixture(scope="module")
def start(tiny_model, compile_cache):
    """start(dtype, n): the n-th start (1 or 2) of compiled serving, on one compile cache."""

    def get(dtype, n):
        for i in range(1, n + 1):
            if (dtype, i) not in _starts:
                _starts[dtype, i] = run_vllm(
                    "compiled", tiny_model, dtype, TORCH_NEURONX_NEFF_CACHE_DIR=compile_cache
                )
        return _starts[dtype, n]

    return get


# Compiled code rounds differently from eager kernels (fused elementwise code, GEMMs of the
# padded size), as Inductor's does on the CPU: the logprobs are this close.
LOGPROB_TOLERANCE = {"float32": 1e-5, "bfloat16": 3e-2}


def agreed_steps(compiled, reference, tolerance):
    """The (compiled, reference) logprobs of the steps where both runs chose the same tokens.
    A sequence may part only at a step where the reference's best token led the runner-up by
    no more than two tolerances, a near tie that other rounding breaks the other way (whether
    it does depends on the host's kernels: bf16 GEMMs differ with AVX512-BF16); from there on
    the two continue from different tokens and are not compared."""
    pairs = []
    for ours, theirs, ours_lp, theirs_lp, leads in zip(
        compiled["tokens"],
        reference["tokens"],
        compiled["logprobs"],
        reference["logprobs"],
        reference["leads"],
    ):
        for step, (a, b) in enumerate(zip(ours, theirs)):
            if a != b:
                assert leads[step] <= 2 * tolerance, (step, a, b, leads[step])
                break
            pairs.append((ours_lp[step], theirs_lp[step]))
    return pairs


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_bucketed_graphs_give_the_eager_tokens(runs, start, dtype):
    compiled, tolerance = start(dtype, 1), LOGPROB_TOLERANCE[dtype]
    for reference in (runs("neuron", "generate", dtype), runs("stock", "generate", dtype)):
        pairs = agreed_steps(compiled, reference, tolerance)
        # Ties part a sequence at most once each, and rarely: most steps agree.
        assert len(pairs) >= 3 * 20
        worst = max(abs(a - b) for a, b in pairs)
        print(f"{dtype}: {len(pairs)} of 80 steps agree; largest logprob difference {worst:.3g}")
        assert worst <= tolerance


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_each_bucket_compiles_once_while_warming_up_and_never_while_serving(start, dtype):
    run = start(dtype, 1)
    assert run["compiled_buckets"] == BUCKETS
    assert run["warm_up_graphs"] == len(BUCKETS)
    assert run["serving_graphs"] == 0
    assert run["graph_fallbacks"] == 0 and run["fallback_ops"] == []
    assert run["param_devices"] == ["neuron"] and run["kv_devices"] == ["neuron"]
    assert run["device_kernel_calls"]["_C::cpu_attention_with_kv_cache"] > 0


def test_a_second_start_loads_every_bucket_from_the_compile_cache(start):
    first, second = start("float32", 1), start("float32", 2)
    assert first["cache_misses"] == len(BUCKETS) and first["cache_hits"] == 0
    assert second["cache_hits"] == len(BUCKETS) and second["cache_misses"] == 0
    assert second["tokens"] == first["tokens"] and second["logprobs"] == first["logprobs"]


def test_buckets_default_to_powers_of_two_up_to_the_batch_limit():
    assert graphs.buckets({}, 100) == [16, 32, 64, 100]
    assert graphs.buckets({}, 16) == [16]
    assert graphs.buckets({"num_batched_tokens_buckets": [64, 8, 8]}, 64) == [8, 64]


@pytest.mark.parametrize(
    ("asked", "match"),
    [
        ([8, 32], "largest bucket .* is 32, but a step batches up to .*=64"),
        ([], "non-empty"),
        ([0, 64], "positive"),
        (["64"], "positive"),
    ],  # fmt: skip
)
def test_buckets_that_cannot_hold_a_step_are_refused(asked, match):
    with pytest.raises(ValueError, match=match):
        graphs.buckets({"num_batched_tokens_buckets": asked}, 64)


def test_a_batch_is_padded_to_the_smallest_bucket_that_holds_it():
    assert [graphs.bucket_for(n, [8, 32, 128]) for n in (1, 8, 9, 32, 33, 128)] == [
        8, 8, 32, 32, 128, 128]  # fmt: skip
    with pytest.raises(ValueError, match="exceed the largest bucket"):
        graphs.bucket_for(129, [8, 32, 128])
