"""A nanoGPT-style character model trained as karpathy/nanoGPT's train.py trains it: batches
drawn with torch.randint on the CPU, dropout in the model, `--device` and `--compile` options.
The text is generated, so nothing is downloaded."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width, heads, dropout):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )
        self.dropout = dropout

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        attention = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        mask = torch.tril(torch.ones(t, t, device=x.device, dtype=torch.bool))
        attention = attention.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        attention = F.dropout(attention, self.dropout, self.training)
        y = (attention @ v).transpose(1, 2).reshape(b, t, c)
        x = x + F.dropout(self.proj(y), self.dropout, self.training)
        return x + F.dropout(self.mlp(self.norm2(x)), self.dropout, self.training)


class CharGPT(nn.Module):
    def __init__(self, vocab, block, width=32, heads=4, layers=2, dropout=0.2):
        super().__init__()
        self.token, self.position = nn.Embedding(vocab, width), nn.Embedding(block, width)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(width, heads, dropout) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)

    def forward(self, idx, targets):
        positions = torch.arange(idx.size(1), device=idx.device)
        x = self.drop(self.token(idx) + self.position(positions))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cpu", help="a device, or auto: the accelerator if any")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--iters", type=int, default=12)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()
    if args.device == "auto":
        args.device = torch.accelerator.current_accelerator() or torch.device("cpu")
    print("Using device:", args.device)
    torch.manual_seed(1337)
    text = " ".join(f"{w}{i % 7}" for i, w in enumerate(["to", "be", "or", "not"] * 200))
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text], dtype=torch.long)
    block, batch = 16, 8

    def get_batch():
        ix = torch.randint(len(data) - block, (batch,))
        x = torch.stack([data[i : i + block] for i in ix])
        y = torch.stack([data[i + 1 : i + 1 + block] for i in ix])
        return x.to(args.device), y.to(args.device)

    model = CharGPT(len(chars), block, dropout=args.dropout).to(args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    step = torch.compile(model) if args.compile else model
    for it in range(args.iters):
        x, y = get_batch()
        loss = step(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        print(f"iter {it}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
