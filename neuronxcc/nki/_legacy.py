"""The pre-0.2 semantics of the simulator's tensors, installed through nki._src.legacy_api:
indexing with index expressions and tile values, assignment through them, tiles broadcast
across partitions by copying, and ``psum_tile += matmul_result`` accumulating as a matmul.
The new-API behaviour is kept outside pre-0.2 kernels (tile indices, broadcasts, ``+=``)."""

import nki.language as new_language
from nki._src.legacy_api import (
    accumulate_into,
    install_tensor_semantics,
    issue,
    read_pf,
    same_tile,
)

from ._index import Access, access, claims, old_kernel_running
from ._masking import assign


def _accumulate(dst, value):
    """``psum_tile += matmul_result``: accumulate as a matmul into PSUM does, so the first
    write to an element overwrites whatever the (uninitialized) bank held."""
    where = "psum +="
    same_tile(where, "dst", dst, "value", value)
    accumulate_into(where, dst, read_pf(value), None)
    issue(where, "vector", [dst], [value])


class _Legacy:
    """The hook object: each method returns NotImplemented where the simulator's own
    semantics apply."""

    def getitem(self, t, key):
        if not claims(t, key):
            return NotImplemented
        return access(t, key)

    def setitem(self, t, key, value):
        claimed = claims(t, key)
        if not claimed and not isinstance(value, Access):
            return NotImplemented
        assign(access(t, key) if claimed else t[key], value)
        return None

    def iadd(self, t, other):
        psum = new_language.psum
        if not (
            old_kernel_running() and t.buffer is psum and getattr(other, "buffer", None) is psum
        ):
            return NotImplemented
        _accumulate(t, other)
        return None

    def broadcast_to(self, t, shape):
        shape = tuple(shape)
        if not (old_kernel_running() and t.buffer.on_chip and shape[0] != t.shape[0]):
            return NotImplemented
        return new_language.broadcast_to(t, shape)


def install():
    """Give the simulator's tensors the pre-0.2 semantics where they differ (see _Legacy)."""
    install_tensor_semantics(_Legacy())
