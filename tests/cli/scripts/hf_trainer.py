"""Fine-tunes a tiny random-init Llama with the Hugging Face Trainer on generated tokens, as a
user would: the Trainer picks the device itself (neuron when torchneuron is loaded)."""

import argparse
import tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments


class Tokens(torch.utils.data.Dataset):
    """Random token sequences; each is its own label (causal language modelling)."""

    def __init__(self, count, length, vocab):
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (count, length), generator=generator)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps")
    args = parser.parse_args()
    config = LlamaConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    with tempfile.TemporaryDirectory() as output_dir:
        training = TrainingArguments(
            output_dir=output_dir,
            max_steps=args.steps,
            per_device_train_batch_size=4,
            learning_rate=1e-3,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            disable_tqdm=True,
            seed=0,
        )
        trainer = Trainer(model=model, args=training, train_dataset=Tokens(64, 32, 128))
        trainer.train()
    print("trained on", model.device)


if __name__ == "__main__":
    main()
