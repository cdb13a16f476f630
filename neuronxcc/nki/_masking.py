"""Running an instruction on pre-0.2 operands: ``mask=`` predicates and unresolved accesses.

A mask whose true elements form a box (``i_p < n`` and the like, the common case) restricts
every operand to that box along the axes where the operand has the mask's extent, so masked
elements are neither read nor written and may lie outside the tensor.  Any other mask (a
triangle, say) runs the instruction on the whole tiles and then restores the destination
elements the mask excludes; that needs every operand inside its tensor.
"""

import numpy as np
import torch

from nki._src.legacy_api import assign_op, fail, issue, require
from nki.language import NkiTensor

from ._blocks import BlockTensor
from ._index import Access, Predicate


def _is_operand(v):
    return isinstance(v, (NkiTensor, Access))


def _restrict(v, box, extent, hits):
    """``v`` cut to ``box`` on the axes where it has the mask's extent."""
    if v.ndim != len(box):
        return v
    cut = []
    for axis, (s, full) in enumerate(zip(box, extent)):
        if (s.start, s.stop) != (0, full) and v.shape[axis] == full:
            cut.append(s)
            hits.add(axis)
        else:
            cut.append(slice(None))
    if all(c == slice(None) for c in cut):
        return v
    return v.restrict(tuple(cut)) if isinstance(v, Access) else v[tuple(cut)]


def _gathered(a, where):
    """A tensor holding the values of non-view access ``a`` (in the same memory)."""
    if not a.inbounds.all():
        a.out_of_bounds(where)
    copy = NkiTensor.allocate(a.shape, a.dtype, a.buffer, op=where)
    copy.host.copy_(a.read())
    issue(f"{where} (gather)", "gpsimd", [copy], [a.tensor])
    return copy


def _scatter(a, values, where):
    """Write ``values`` (a tensor shaped like ``a``) to the elements of non-view access ``a``."""
    if not a.inbounds.all():
        a.out_of_bounds(where)
    a.write(values.host)
    issue(f"{where} (scatter)", "gpsimd", [a.tensor], [values])


def execute(impl, where, *, mask=None, writes=(), lazy=(), **operands):
    """``impl(**operands)`` with the pre-0.2 operand rules.

    ``writes`` name the operands the instruction writes; ``lazy`` those that ``impl`` takes
    as unresolved ``Access`` objects (indirect DMA).  Nothing runs if the mask excludes every
    element.
    """
    restore = None
    if mask is not None:
        require(
            isinstance(mask, Predicate),
            where,
            f"mask must be a predicate on nl.arange/nl.mgrid indices, got {type(mask).__name__}",
        )
        box = mask.box()
        if box is None:
            restore = mask.values
        else:
            if any(s.start == s.stop for s in box):
                return
            hits = set()
            operands = {
                k: _restrict(v, box, mask.shape, hits) if _is_operand(v) else v
                for k, v in operands.items()
            }
            cut = {
                a for a, (s, n) in enumerate(zip(box, mask.shape)) if (s.start, s.stop) != (0, n)
            }
            if not cut <= hits:
                fail(
                    where,
                    f"mask of shape {mask.shape} restricts axes {sorted(cut - hits)} that no "
                    "operand has with that extent",
                )
    resolved, scatters = {}, []
    for name, v in operands.items():
        if isinstance(v, Access) and name not in lazy:
            view = v.view()
            if view is None:
                # Written accesses start from the current values: a partial write keeps the rest.
                view = _gathered(v, where)
                if name in writes:
                    scatters.append((v, view))
            v = view
        if isinstance(v, BlockTensor):
            fail(where, f"{name} {v.shape} has block dimensions; index them to get a tile")
        resolved[name] = v
    saved = {}
    if restore is not None:
        for name in writes:
            t = resolved.get(name)
            if isinstance(t, NkiTensor):
                try:
                    keep = np.broadcast_to(~restore, t.shape)
                except ValueError:
                    fail(where, f"mask of shape {restore.shape} does not fit {name} {t.shape}")
                saved[name] = (torch.from_numpy(keep.copy()), t.host.clone())
    impl(**resolved)
    for name, (keep, before) in saved.items():
        t = resolved[name]
        t.host.copy_(torch.where(keep, before, t.host))
    for a, values in scatters:
        _scatter(a, values, where)


def assign(dst, value, mask=None):
    """``dst[...] = value`` where either side may be an old-API access."""
    execute(assign_op, "assign", mask=mask, writes=("dst",), dst=dst, value=value)
