"""Generates TorchTitan's offline assets: a small text corpus and a BPE tokenizer trained on it.

    python examples/torchtitan/make_assets.py OUT_DIR

writes, all generated here from a fixed seed (nothing is downloaded):

- OUT_DIR/train/data.json and OUT_DIR/validation/data.json: JSON lines with a "text" field,
  the layout of TorchTitan's `c4_test` dataset, which loads a local folder with
  `datasets.load_dataset(path, split="train")` (`--dataloader.dataset-path`);
- OUT_DIR/tokenizer/tokenizer.json and tokenizer_config.json: a byte-level BPE with at most
  2048 tokens (the llama3 debug model's vocabulary), BOS and EOS included, the files
  TorchTitan's HuggingFaceTokenizer reads from `--hf-assets-path`.
"""

import argparse
import json
import os
import random
import re

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

VOCAB_SIZE = 2048
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"
TRAIN_DOCUMENTS, VALIDATION_DOCUMENTS = 2000, 200

# A small grammar, so that the text has structure for the model to learn beyond word counts.
WORDS = {
    "adjective": "quiet bright small ancient heavy gentle narrow golden silver patient "
    "distant curious steady hollow crimson".split(),
    "noun": "river engine garden tower merchant sailor lantern library orchard bridge "
    "falcon mountain village harbor scholar".split(),
    "verb": "crosses watches repairs follows carries guards remembers paints measures "
    "visits".split(),
    "preposition": "near beyond under behind across beside".split(),
    "adverb": "slowly often quietly carefully again rarely".split(),
    "month": "January March May July September November".split(),
}
SENTENCES = [
    "The {adjective} {noun} {verb} the {adjective} {noun} {preposition} the {noun}.",
    "In {month} {year}, a {adjective} {noun} {adverb} {verb} the {noun}.",
    "Every {noun} {verb} {number} {noun}s {preposition} the {adjective} {noun}.",
    "Why does the {noun} {adverb} visit the {adjective} {noun}? Nobody knows.",
]


def sentence(rng):
    """One sentence of the grammar, each slot filled on its own."""
    numbers = {"year": (1700, 2030), "number": (2, 99)}

    def fill(slot):
        kind = slot.group(1)
        if kind in numbers:
            return str(rng.randint(*numbers[kind]))
        return rng.choice(WORDS[kind])

    return re.sub(r"\{(\w+)\}", fill, rng.choice(SENTENCES))


def document(rng):
    """A paragraph of three to nine sentences."""
    return " ".join(sentence(rng) for _ in range(rng.randint(3, 9)))


def write_corpus(path, documents, rng):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "data.json"), "w") as f:
        for _ in range(documents):
            f.write(json.dumps({"text": document(rng)}) + "\n")


def write_tokenizer(path, corpus):
    os.makedirs(path, exist_ok=True)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    with open(corpus) as f:
        texts = [json.loads(line)["text"] for line in f]
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer.save(os.path.join(path, "tokenizer.json"))
    config = {"bos_token": BOS, "eos_token": EOS, "tokenizer_class": "PreTrainedTokenizerFast"}
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)


def make_assets(out):
    """Writes the corpus and the tokenizer under `out` (the same files on every call)."""
    rng = random.Random(0)
    write_corpus(os.path.join(out, "train"), TRAIN_DOCUMENTS, rng)
    write_corpus(os.path.join(out, "validation"), VALIDATION_DOCUMENTS, rng)
    write_tokenizer(os.path.join(out, "tokenizer"), os.path.join(out, "train", "data.json"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="directory to write the assets to")
    make_assets(parser.parse_args().out)


if __name__ == "__main__":
    main()
