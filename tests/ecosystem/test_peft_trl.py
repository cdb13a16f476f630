"""PEFT LoRA training and TRL's SFTTrainer unchanged on neuron, against the same runs on the CPU."""

import datasets
import pytest
import torch
from hf_tiny import assert_same_weights, causal_lm, on_cpu, sentences, tokenizer

peft = pytest.importorskip("peft")
trl = pytest.importorskip("trl")


def train_lora(device):
    """Three AdamW steps of LoRA adapters on a tiny Llama; returns the losses and adapters."""
    config = peft.LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights="gaussian"
    )
    model = peft.get_peft_model(causal_lm("llama"), config).to(device)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    ids = tokenizer()(sentences(4), return_tensors="pt").input_ids.to(device)
    losses = []
    for _ in range(3):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    adapters = {k: v for k, v in model.state_dict().items() if "lora_" in k}
    return losses, model, on_cpu(adapters)


def test_lora_training_matches_cpu():
    losses, model, adapters = train_lora("neuron")
    cpu_losses, _, cpu_adapters = train_lora("cpu")
    assert {p.device.type for p in model.parameters()} == {"neuron"}
    assert adapters and losses == cpu_losses
    assert_same_weights(adapters, cpu_adapters)
    # The frozen base weights stay as they were.
    base = causal_lm("llama").state_dict()
    merged = model.get_base_model().state_dict()
    name = "model.layers.0.mlp.up_proj.weight"
    assert torch.equal(merged[name].cpu(), base[name])


def test_lora_adapter_saves_from_and_loads_onto_neuron(tmp_path):
    _, trained, _ = train_lora("neuron")
    trained.save_pretrained(tmp_path)
    # peft's infer_device() knows no neuron, so PeftModel.from_pretrained reads the adapter to
    # the CPU; it is then copied into the LoRA weights, which sit on the base model's device.
    assert peft.utils.other.infer_device() == "cpu"
    loaded = peft.PeftModel.from_pretrained(causal_lm("llama").to("neuron"), tmp_path)
    assert {p.device.type for p in loaded.parameters()} == {"neuron"}
    ids = tokenizer()(sentences(2, seed=5), return_tensors="pt").input_ids
    with torch.no_grad():
        expected = trained(input_ids=ids.to("neuron")).logits
        logits = loaded(input_ids=ids.to("neuron")).logits
    assert torch.equal(logits.cpu(), expected.cpu())


def train_sft(tmp_path, use_cpu, **options):
    """Three SFTTrainer steps on generated sentences; returns the trainer, losses and weights."""
    model = causal_lm("llama")
    config = trl.SFTConfig(
        output_dir=str(tmp_path / ("cpu" if use_cpu else "neuron")),
        use_cpu=use_cpu,
        max_steps=3,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        max_length=16,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=0,
        **options,
    )
    dataset = datasets.Dataset.from_dict({"text": sentences(16)})
    trainer = trl.SFTTrainer(
        model=model, args=config, train_dataset=dataset, processing_class=tokenizer()
    )
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return trainer, losses, on_cpu(model.state_dict())


def test_sft_trainer_matches_cpu(tmp_path):
    trainer, losses, weights = train_sft(tmp_path, use_cpu=False)
    assert {p.device.type for p in trainer.model.parameters()} == {"neuron"}
    # TRL pads batches to a multiple of 128 tokens on neuron (its choice for the Neuron
    # compiler's static shapes); the CPU run pads the same way, so both compute the same sums.
    assert trainer.args.pad_to_multiple_of == 128
    _, cpu_losses, cpu_weights = train_sft(tmp_path, use_cpu=True, pad_to_multiple_of=128)
    assert len(losses) == 3 and losses == cpu_losses
    assert_same_weights(weights, cpu_weights)
