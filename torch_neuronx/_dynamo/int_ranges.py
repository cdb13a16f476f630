"""Which int64 values of a graph lie in the int32 range by construction, so that the 64-bit
policy need not check them (compiler._apply_64bit_policy).

Eager mode checks every int64 result; a compiled graph would too, but each check is a node that
Inductor cannot fuse across, and fusing otherwise changes the order of a graph's reductions and
so its float results' last bits against Inductor on the CPU. The values proven here are the
index arithmetic graphs are full of: aranges, literal fills, selections among values already
on the device (which satisfy the policy), and sums and products of those with known bounds.
Anything not proven is checked, as in eager mode."""

import operator

import torch

INT32 = (-(2**31), 2**31 - 1)
aten, prims = torch.ops.aten, torch.ops.prims

# Results within the bounds of their integer tensor operands (and of their literal operands).
_SELECTING = {
    aten.where.self,
    aten.where.ScalarOther,
    aten.where.ScalarSelf,
    aten.clone.default,
    aten.expand.default,
    aten.cat.default,
    aten.stack.default,
    aten.index.Tensor,
    aten.index_select.default,
    aten.gather.default,
    aten.select.int,
    aten.slice.Tensor,
    aten.permute.default,
    aten.view.default,
    aten.reshape.default,
    aten._unsafe_view.default,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.minimum.default,
    aten.maximum.default,
    aten.clamp.default,
    aten.amax.default,
    aten.amin.default,
    aten.repeat.default,
    aten.constant_pad_nd.default,
    prims.convert_element_type.default,
    aten._to_copy.default,
}
_FILLS = {aten.full.default, aten.scalar_tensor.default, aten.full_like.default}
_ARITHMETIC = {
    aten.add.Tensor: operator.add,
    aten.add.Scalar: operator.add,
    aten.sub.Tensor: operator.sub,
    aten.sub.Scalar: operator.sub,
    aten.mul.Tensor: operator.mul,
    aten.mul.Scalar: operator.mul,
}


def int32_by_construction(gm):
    """The call_function nodes of ``gm`` whose int64 values are proven to fit in int32."""
    bounds = {}
    for node in gm.graph.nodes:
        found = _bounds(node, bounds)
        if found is not None:
            bounds[node] = found
    return {n for n, (low, high) in bounds.items() if INT32[0] <= low and high <= INT32[1]}


def _bounds(node, bounds):
    """[low, high] of the node's values, or None when unknown."""
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor):
        return None
    if not (value.dtype == torch.int64 or value.dtype == torch.bool or value.dtype == torch.int32):
        return None
    if value.dtype == torch.bool:
        return (0, 1)
    if value.dtype == torch.int32:
        return INT32
    if node.op == "placeholder":
        # Device tensors satisfy the policy already; host inputs may hold any int64.
        return INT32 if value.device.type == "neuron" else None
    if node.op != "call_function":
        return None
    target = node.target
    if target == prims.iota.default:
        length, start, step = node.args[0], node.kwargs.get("start"), node.kwargs.get("step")
        if not all(isinstance(x, int) for x in (length, start, step)):
            return None
        last = start + step * max(length - 1, 0)
        return (min(start, last), max(start, last))
    if target in _FILLS:
        fill = node.args[1] if target != aten.scalar_tensor.default else node.args[0]
        return (fill, fill) if isinstance(fill, (int, bool)) else None
    operands = [_operand(a, bounds) for a in _flat(node.args)]
    if any(o is None for o in operands):
        return None
    if target in _SELECTING:
        known = [o for o in operands if o is not _NOT_A_VALUE]
        if not known:
            return None
        return (min(lo for lo, _ in known), max(hi for _, hi in known))
    combine = _ARITHMETIC.get(target)
    if combine is not None:
        known = [o for o in operands if o is not _NOT_A_VALUE]
        if len(known) != 2:
            return None
        (a, b), (c, d) = known
        corners = [combine(x, y) for x in (a, b) for y in (c, d)]
        return (min(corners), max(corners))
    return None


_NOT_A_VALUE = object()  # an operand that is no integer value (a shape, a dtype, a device)


def _flat(args):
    for a in args:
        if isinstance(a, (list, tuple)) and any(isinstance(x, torch.fx.Node) for x in a):
            yield from a
        else:
            yield a


def _operand(arg, bounds):
    """The bounds an operand contributes, None when unknown, _NOT_A_VALUE when it holds none."""
    if isinstance(arg, torch.fx.Node):
        value = arg.meta.get("val")
        if not isinstance(value, torch.Tensor):
            return _NOT_A_VALUE
        if value.is_floating_point() or value.is_complex():
            return None  # a float converted to int64 may hold anything
        return bounds.get(arg)
    if isinstance(arg, bool):
        return _NOT_A_VALUE
    if isinstance(arg, int):
        return (arg, arg)
    if isinstance(arg, float):
        return None
    return _NOT_A_VALUE
