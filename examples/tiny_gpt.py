"""A small GPT-style transformer and a synthetic next-token task, shared by the demo,
the tests and the benchmarks."""

import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = heads
        self.dropout = dropout

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            is_causal=True,
            dropout_p=self.dropout if self.training else 0.0,
        )
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + F.dropout(self.mlp(self.ln2(x)), self.dropout, self.training)


class TinyGPT(nn.Module):
    def __init__(self, vocab=64, d=128, heads=4, layers=2, seq=64, dropout=0.0):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.Sequential(*[Block(d, heads, dropout) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets=None):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        logits = self.head(self.ln(self.blocks(x)))
        if targets is None:
            return logits
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def batches(steps, batch=8, seq=64, vocab=64, seed=0):
    """Deterministic token sequences with learnable structure (each token is a function of
    the previous two)."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.empty(batch, seq + 1, dtype=torch.long)
        x[:, :2] = torch.randint(0, vocab, (batch, 2), generator=g)
        for i in range(2, seq + 1):
            x[:, i] = (x[:, i - 1] * 3 + x[:, i - 2] + 1) % vocab
        yield x[:, :-1], x[:, 1:]


def train(device, steps, make_optimizer, seed=0, dropout=0.0, **model_kw):
    """Trains TinyGPT on `device` from a fixed seed; returns (losses, model)."""
    torch.manual_seed(seed)
    model = TinyGPT(dropout=dropout, **model_kw).to(device)
    opt = make_optimizer(model.parameters())
    losses = []
    for x, y in batches(steps, seq=model_kw.get("seq", 64)):
        loss = model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model
