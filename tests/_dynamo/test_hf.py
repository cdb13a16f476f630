"""Hugging Face generate() with a static cache and CompileConfig(backend="neuron")."""

import hf_tiny
import pytest
import torch

import torch_neuronx._dynamo as neuron_dynamo

transformers = pytest.importorskip("transformers")


def test_generate_with_static_cache_compiles_decode_steps():
    model = hf_tiny.causal_lm("llama").to("neuron").eval()
    prompt = torch.randint(0, hf_tiny.VOCAB_SIZE, (1, 5), device="neuron")
    kwargs = dict(max_new_tokens=6, do_sample=False, cache_implementation="static")
    expected = model.generate(prompt, **kwargs)
    config = transformers.CompileConfig(backend="neuron", fullgraph=True)
    with pytest.warns(UserWarning, match="does not support mode='reduce-overhead'"):
        tokens = model.generate(prompt, compile_config=config, **kwargs)
    assert tokens.device.type == "neuron"
    assert torch.equal(tokens.cpu(), expected.cpu())
    metrics = neuron_dynamo.get_dynamo_metrics()
    assert metrics["num_graphs"] >= 1 and metrics["num_fallbacks"] == 0
