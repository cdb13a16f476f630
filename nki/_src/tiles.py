"""Host data access for instructions: read views as fp32, write results with a cast."""

import torch


def read(t, dtype=torch.float32):
    """Values of view ``t`` as a new torch tensor (engines compute in fp32)."""
    return t.host.to(dtype)


def read_pf(t, dtype=torch.float32):
    """Values of ``t`` as ``[partitions, elements per partition]``."""
    return read(t, dtype).reshape(t.shape[0], -1)


def write(dst, value):
    """Store ``value`` (any shape with dst's element count, or broadcastable) into view ``dst``."""
    view = dst.host
    if value.numel() == view.numel():
        value = value.reshape(view.shape)
    view.copy_(value)
