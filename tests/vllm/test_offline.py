"""vllm.LLM with the neuron plugin against stock vLLM on the CPU (plugins off, torchneuron not
loaded), in separate processes: 4 prompts x 20 greedy tokens."""

import pytest

DTYPES = ["float32", "bfloat16"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_greedy_tokens_and_logprobs_are_bit_identical_to_vllm_cpu(runs, dtype):
    neuron, stock = runs("neuron", "generate", dtype), runs("stock", "generate", dtype)
    assert neuron["platform"] == "NeuronPlatform"
    assert not stock["torchneuron_loaded"]
    assert len(neuron["tokens"]) == 4 and all(len(t) == 20 for t in neuron["tokens"])
    assert neuron["tokens"] == stock["tokens"]
    assert neuron["logprobs"] == stock["logprobs"], "logprobs differ in at least one bit"


@pytest.mark.parametrize("dtype", DTYPES)
def test_parameters_and_kv_cache_live_in_neuron_memory(runs, dtype):
    neuron = runs("neuron", "generate", dtype)
    assert neuron["param_devices"] == ["neuron"]
    assert neuron["kv_devices"] == ["neuron"]
    assert neuron["kv_bytes"] == 2**30, "VLLM_CPU_KVCACHE_SPACE=1 asks for 1 GiB"
    assert neuron["memory_allocated"] >= neuron["kv_bytes"] + neuron["param_bytes"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_no_op_takes_the_cpu_fallback_and_attention_runs_as_device_kernels(runs, dtype):
    neuron = runs("neuron", "generate", dtype)
    assert neuron["fallback_ops"] == []
    calls = neuron["device_kernel_calls"]
    for kernel in (
        "_C::cpu_attention_with_kv_cache",
        "_C::cpu_attn_reshape_and_cache",
        "_C::get_scheduler_metadata",
        "_C::compute_slot_mapping_kernel_impl",
    ):
        assert calls[kernel] > 0, f"{kernel} did not run as a device kernel"


def test_chat_output_equals_vllm_cpu(runs):
    assert (
        runs("neuron", "generate", "float32")["chat_texts"]
        == (runs("stock", "generate", "float32")["chat_texts"])
    )


def test_cpu_mode_runs_the_plugin_on_the_cpu_with_the_same_tokens(runs):
    cpu = runs("cpu_mode", "generate", "float32")
    stock = runs("stock", "generate", "float32")
    assert cpu["platform"] == "NeuronPlatform"
    assert cpu["param_devices"] == ["cpu"] and cpu["kv_devices"] == ["cpu"]
    assert cpu["tokens"] == stock["tokens"] and cpu["logprobs"] == stock["logprobs"]
