"""transformers unchanged on neuron: models' forward, backward and generate, and the Trainer with
bf16, gradient checkpointing and torch_compile, each against the same run on the CPU."""

import pytest
import torch
from hf_tiny import TokenDataset, assert_same_weights, causal_lm, on_cpu

import torch_neuronx._dynamo as neuron_dynamo

transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_forward_backward_and_generate_match_cpu(family):
    cpu_model = causal_lm(family, layers=2)
    model = causal_lm(family, layers=2).to("neuron")
    ids = torch.randint(
        0, cpu_model.config.vocab_size, (2, 10), generator=torch.Generator().manual_seed(3)
    )

    # In training mode: GPT-2's dropout draws from the device's generator, which gives the CPU's
    # numbers for a seed.
    torch.manual_seed(5)
    out = model(input_ids=ids.to("neuron"), labels=ids.to("neuron"))
    torch.manual_seed(5)
    expected = cpu_model(input_ids=ids, labels=ids)
    assert out.logits.device.type == "neuron"
    torch.testing.assert_close(out.logits.cpu(), expected.logits, rtol=0, atol=0)
    out.loss.backward()
    expected.loss.backward()
    for (name, param), cpu_param in zip(model.named_parameters(), cpu_model.parameters()):
        assert torch.equal(param.grad.cpu(), cpu_param.grad), name

    model.eval()
    cpu_model.eval()
    greedy = dict(max_new_tokens=6, do_sample=False)
    tokens = model.generate(ids[:1].to("neuron"), **greedy)
    assert tokens.device.type == "neuron"
    assert torch.equal(tokens.cpu(), cpu_model.generate(ids[:1], **greedy))
    sampled = dict(max_new_tokens=6, do_sample=True, top_k=0)
    torch.manual_seed(7)
    tokens = model.generate(ids[:1].to("neuron"), **sampled)
    torch.manual_seed(7)
    assert torch.equal(tokens.cpu(), cpu_model.generate(ids[:1], **sampled))


def train_with_trainer(tmp_path, use_cpu, **options):
    """Four steps of Trainer on a tiny Llama; returns the Trainer, its losses and the weights."""
    model = causal_lm("llama")
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / ("cpu" if use_cpu else "neuron")),
        use_cpu=use_cpu,
        max_steps=4,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=0,
        **options,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=TokenDataset(count=16))
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return trainer, losses, on_cpu(model.state_dict())


# bf16 runs autocast with CUDA's op policy on neuron and the CPU's own policy on the CPU, and a
# compiled graph rounds differently from eager code (AdamW then scales those ulps up in
# near-zero gradients): those compare within their precision.
TRAINER_OPTIONS = [
    pytest.param({}, 0.0, id="fp32"),
    pytest.param({"bf16": True}, 1e-2, id="bf16"),
    pytest.param({"activation_checkpointing": True}, 0.0, id="activation_checkpointing"),
    pytest.param(
        {"torch_compile": True},
        1e-4,
        id="torch_compile",
        marks=[pytest.mark.slow, pytest.mark.graph_calls("compiled")],
    ),
]


@pytest.mark.parametrize("options, tolerance", TRAINER_OPTIONS)
def test_trainer_matches_cpu(tmp_path, options, tolerance):
    trainer, losses, weights = train_with_trainer(tmp_path, use_cpu=False, **options)
    assert trainer.args.device.type == "neuron"
    assert {p.device.type for p in trainer.model.parameters()} == {"neuron"}
    if options.get("torch_compile"):
        # Trainer picks the neuron backend itself when torch_neuronx is present, and passes
        # dynamic=False; the graph_calls marker checks that the compiled code ran.
        assert trainer.args.torch_compile_backend == "neuron"
        assert trainer.accelerator.state.dynamo_plugin.dynamic is False
        assert isinstance(trainer.model_wrapped, torch._dynamo.eval_frame.OptimizedModule)
        metrics = neuron_dynamo.get_dynamo_metrics()
        assert metrics["num_graphs"] >= 1 and metrics["num_fallbacks"] == 0
    if options.get("activation_checkpointing"):
        # Backward recomputes each layer's forward: the activation runs twice per step.
        runs = []
        trainer.model.model.layers[0].mlp.act_fn.register_forward_hook(lambda *_: runs.append(1))
        ids = TokenDataset(count=1)[0]["input_ids"][None].to("neuron")
        trainer.model(input_ids=ids, labels=ids).loss.backward()
        assert trainer.model.is_activation_checkpointing and len(runs) == 2
    # The CPU reference runs eagerly: on the CPU Trainer would compile with Inductor.
    cpu_options = {k: v for k, v in options.items() if k != "torch_compile"}
    _, cpu_losses, cpu_weights = train_with_trainer(tmp_path, use_cpu=True, **cpu_options)
    assert len(losses) == 4
    torch.testing.assert_close(losses, cpu_losses, rtol=tolerance, atol=tolerance)
    assert_same_weights(weights, cpu_weights, rtol=tolerance, atol=tolerance)


def test_continuous_batching_generate_batch_matches_cpu_under_the_default_policy():
    """generate_batch (the engine of `transformers serve --continuous_batching`) draws its seed
    with torch.randint(0, 2**32 - 1, int64) on the model's device: under the default 64-bit
    policy the draw is folded into int32 instead of refused (docs/limitations.md)."""
    from hf_tiny import sentences, tokenizer

    tok = tokenizer()
    prompts = [tok(s)["input_ids"] for s in sentences(3)]
    greedy = transformers.GenerationConfig(
        max_new_tokens=6, do_sample=False, eos_token_id=-1, pad_token_id=tok.pad_token_id
    )
    # An explicit cache size: by default transformers sizes it from host RAM, which on the
    # emulated device would be filled (device memory is host memory).
    cache = transformers.ContinuousBatchingConfig(num_blocks=16, max_batch_tokens=64)

    def generate(model):
        out = model.eval().generate_batch(
            prompts, generation_config=greedy, continuous_batching_config=cache
        )
        return {k: v.generated_tokens for k, v in out.items()}

    cpu = generate(causal_lm("llama"))
    assert generate(causal_lm("llama").to("neuron")) == cpu
    assert len(cpu) == 3 and all(len(tokens) == 6 for tokens in cpu.values())
