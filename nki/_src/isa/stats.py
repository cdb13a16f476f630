"""Batch-norm statistics: per-partition mean/variance via bn_stats chunks and bn_aggr."""

import torch

from .. import checks
from ..errors import require
from ..tensor import NkiTensor
from ..tiles import read_pf, write
from ..trace import issue

BN_STATS_FMAX = 512


def _moments(x):
    """(count, mean, variance * count) of each row of ``x``."""
    count = torch.full((x.shape[0],), float(x.shape[1]))
    if x.shape[1] == 0:
        zero = torch.zeros(x.shape[0])
        return count, zero, zero
    mean = x.mean(1)
    return count, mean, ((x - mean[:, None]) ** 2).sum(1)


def bn_stats(dst: NkiTensor, data: NkiTensor, name: str | None = None) -> None:
    """Six statistics per partition: (count, mean, var*count) of the even and the odd elements."""
    where = "bn_stats"
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "data", data)
    checks.same_partitions(where, "dst", dst, "data", data)
    require(
        data.free_size <= BN_STATS_FMAX,
        where,
        f"free size {data.free_size} exceeds bn_stats_fmax {BN_STATS_FMAX}",
    )
    require(
        dst.free_size == 6, where, f"dst must have 6 elements per partition, has {dst.free_size}"
    )
    x = read_pf(data)
    write(dst, torch.stack(_moments(x[:, 0::2]) + _moments(x[:, 1::2]), dim=1))
    issue(where, "vector", [dst], [data])


def bn_aggr(dst: NkiTensor, data: NkiTensor, name: str | None = None) -> None:
    """Combine bn_stats (count, mean, var*count) triples into (mean, variance) per partition."""
    where = "bn_aggr"
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "data", data)
    checks.same_partitions(where, "dst", dst, "data", data)
    require(
        data.free_size % 3 == 0,
        where,
        f"data must hold (count, mean, var*count) triples, has {data.free_size} elements",
    )
    require(
        dst.free_size == 2, where, f"dst must have 2 elements per partition, has {dst.free_size}"
    )
    triples = read_pf(data).reshape(data.shape[0], -1, 3)
    count, mean, m2 = triples.unbind(2)
    total = count.sum(1, keepdim=True)
    grand = (count * mean).sum(1, keepdim=True) / total
    var = (m2 + count * (mean - grand) ** 2).sum(1, keepdim=True) / total
    write(dst, torch.cat([grand, var], dim=1))
    issue(where, "vector", [dst], [data])
