"""Tiny Hugging Face models, a tokenizer and text built offline, for the ecosystem tests."""

import torch

WORDS = "the a cat dog bird sat ran slept on under near mat log rug big small red blue".split()
SPECIAL = ["<pad>", "<unk>", "<eos>"]


def tokenizer():
    """A word-level fast tokenizer over WORDS, with pad and eos tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {word: i for i, word in enumerate([*SPECIAL, *WORDS])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


VOCAB_SIZE = len(SPECIAL) + len(WORDS)


def sentences(count, words=6, seed=2):
    """`count` random sentences of `words` words each, the same for the same seed."""
    generator = torch.Generator().manual_seed(seed)
    picks = torch.randint(0, len(WORDS), (count, words), generator=generator)
    return [" ".join(WORDS[i] for i in row) for row in picks.tolist()]


def causal_lm(family="llama", layers=1):
    """A randomly initialised causal LM of `family` ("llama" or "gpt2"), on the CPU, the same
    weights every call."""
    import transformers

    if family == "llama":
        config = transformers.LlamaConfig(
            vocab_size=VOCAB_SIZE,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=layers,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=64,
        )
        model_class = transformers.LlamaForCausalLM
    elif family == "gpt2":
        config = transformers.GPT2Config(
            vocab_size=VOCAB_SIZE, n_embd=32, n_layer=layers, n_head=2, n_positions=64
        )
        model_class = transformers.GPT2LMHeadModel
    else:
        raise ValueError(f"unknown model family {family!r}: use 'llama' or 'gpt2'")
    torch.manual_seed(0)
    return model_class(config)


class TokenDataset(torch.utils.data.Dataset):
    """Random token sequences as a Trainer dataset: input_ids, with labels equal to them."""

    def __init__(self, count=8, length=12, seed=1):
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, VOCAB_SIZE, (count, length), generator=generator)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def on_cpu(state_dict):
    """A copy of `state_dict` with every tensor on the CPU."""
    return {name: value.detach().cpu() for name, value in state_dict.items()}


def assert_same_weights(actual, expected, rtol=0.0, atol=0.0):
    """Two state dicts (any devices) hold the same names and values within the tolerance."""
    assert actual.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(
            actual[name].cpu(),
            expected[name].cpu(),
            rtol=rtol,
            atol=atol,
            msg=lambda m: f"{name}: {m}",
        )
