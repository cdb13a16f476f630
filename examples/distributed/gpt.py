"""A small GPT whose layout suits FSDP2, tensor/sequence parallelism and pipeline stages."""

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn


@dataclasses.dataclass
class GPTConfig:
    vocab: int = 64
    dim: int = 32
    heads: int = 4
    layers: int = 2
    seq: int = 16


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.head_dim = cfg.dim // cfg.heads
        self.q = nn.Linear(cfg.dim, cfg.dim)
        self.k = nn.Linear(cfg.dim, cfg.dim)
        self.v = nn.Linear(cfg.dim, cfg.dim)
        self.o = nn.Linear(cfg.dim, cfg.dim)

    def forward(self, x):
        b, t, _ = x.shape
        # -1 heads: under tensor parallelism each rank holds only its share of the heads.
        q, k, v = (
            p(x).view(b, t, -1, self.head_dim).transpose(1, 2) for p in (self.q, self.k, self.v)
        )
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.up = nn.Linear(cfg.dim, 4 * cfg.dim)
        self.down = nn.Linear(4 * cfg.dim, cfg.dim)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.dim)
        self.attn = Attention(cfg)
        self.norm2 = nn.LayerNorm(cfg.dim)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, cfg=GPTConfig()):
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab, cfg.dim)
        self.pos = nn.Embedding(cfg.seq, cfg.dim)
        # A ModuleDict keeps parameter names stable when pipeline stages delete blocks.
        self.blocks = nn.ModuleDict({str(i): Block(cfg) for i in range(cfg.layers)})
        self.norm = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.vocab, bias=False)

    def forward(self, tokens):
        x = tokens
        if self.tok is not None:
            x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks.values():
            x = block(x)
        return self.head(self.norm(x)) if self.head is not None else x


def loss_fn(logits, targets):
    """Next-token cross entropy."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def batch(step, size, cfg=GPTConfig()):
    """Deterministic (tokens, targets) for `step`, identical on every rank and device."""
    g = torch.Generator().manual_seed(1000 + step)
    data = torch.randint(cfg.vocab, (size, cfg.seq + 1), generator=g)
    return data[:, :-1], data[:, 1:]
