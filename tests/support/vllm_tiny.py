"""A tiny random-init Llama and a tokenizer trained here, saved as a Hugging Face model folder
vLLM can serve; and the prompts the serving tests and benchmark use. Nothing is downloaded."""

import pathlib

TEXT = [
    "the quick brown fox jumps over the lazy dog near the river bank",
    "a small red bird sang on the old wooden fence every morning",
    "neuron cores run kernels on tiles of memory in parallel",
    "serving a model means answering many requests at the same time",
    "the cache keeps keys and values of earlier tokens for later steps",
    "continuous batching lets a new request join while others decode",
]

PROMPTS = [
    "the quick brown fox",
    "a small red bird sang",
    "serving a model means",
    "the cache keeps keys and values of earlier tokens",
]

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
)


def write_model(folder) -> str:
    """Writes the model and tokenizer into `folder`; returns its path."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    folder = pathlib.Path(folder)
    backend = Tokenizer(models.BPE(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<pad>", "<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    backend.train_from_iterator(TEXT, trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=512,
        initializer_range=0.1,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    return str(folder)
