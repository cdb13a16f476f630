"""Legalizes FlexAttention in compiled graphs: its operators become their dense ATen form.

A compiled ``flex_attention`` reaches the code generator as two higher-order operators,
``flex_attention`` and (for training) ``flex_attention_backward``. Inductor's CPU code generator
lowers the first for inference only (it refuses the log-sum-exp that training saves) and has no
CPU lowering of the second. TorchNeuron's compiler legalizes flex attention itself; here each of
the two operators is replaced, before code generation, by the ATen graph of its dense
implementation: the kernel PyTorch registers for ``CompositeExplicitAutograd``, which is also
what runs in eager mode on neuron tensors. Inductor then fuses that math like any other graph.
"""

import copy
import operator

import torch
from torch._C import DispatchKey
from torch._guards import detect_fake_mode
from torch._higher_order_ops.flex_attention import flex_attention, flex_attention_backward
from torch._inductor.decomposition import select_decomp_table
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree

_OPERATORS = (flex_attention, flex_attention_backward)
_TO_COPY = torch.ops.aten._to_copy.default
_SCORE_MOD_BUFFERS = 12  # flex_attention_backward's score_mod_other_buffers argument


def legalize(gm, example_inputs):
    """Replaces each FlexAttention operator of an AOTAutograd graph by its dense ATen graph."""
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in _OPERATORS]
    if not nodes:
        return
    fake_mode = detect_fake_mode(example_inputs)
    for node in nodes:
        with fake_mode:
            dense = _trace_dense(gm, node, fake_mode)
        _inline(gm, node, *dense)
    gm.graph.lint()
    gm.delete_all_unused_submodules()
    gm.recompile()


def _trace_dense(gm, node, fake_mode):
    """The operator's dense kernel traced to ATen, and the graph nodes that feed its inputs."""
    flat, spec = pytree.tree_flatten((node.args, node.kwargs))
    values, fed_by = list(flat), []
    captured = _score_mod_buffer_positions(node)
    for i, arg in enumerate(flat):
        if not isinstance(arg, torch.fx.Node):
            continue
        value = operator.attrgetter(arg.target)(gm) if arg.op == "get_attr" else arg.meta["val"]
        if isinstance(value, torch.fx.GraphModule):
            values[i] = _batchable(value)  # score_mod, mask_mod and their joint graphs
            continue
        if arg.op == "get_attr":
            value = fake_mode.from_tensor(value)
        if i in captured and value.dtype.is_floating_point:
            # PyTorch 2.13's dense backward computes a captured buffer's gradient only if the
            # buffer requires grad, as in eager mode; in the graph, buffers are plain values.
            value = value.detach().requires_grad_()
        values[i] = value
        fed_by.append(i)
    kernel = node.target.py_kernels[DispatchKey.CompositeExplicitAutograd]

    def dense(*tensors):
        inputs = list(values)
        for i, tensor in zip(fed_by, tensors):
            inputs[i] = tensor
        args, kwargs = pytree.tree_unflatten(inputs, spec)
        return kernel(*args, **kwargs)

    # The kernel vectorises score_mod and mask_mod with vmap and fills preallocated gradients
    # in place. The first trace runs vmap; the second makes the graph functional and decomposed
    # as code generation takes it. Decomposing inside vmap would meet prims with no batching
    # rule, which vmap runs once per score.
    inputs = [values[i] for i in fed_by]
    with torch.no_grad():  # as the operator's kernels run, below autograd
        with_mutations = make_fx(dense)(*inputs)
        traced = make_fx(
            torch.func.functionalize(with_mutations, remove="mutations"),
            decomposition_table=select_decomp_table(),
        )(*inputs)
    return traced, [flat[i] for i in fed_by]


def _score_mod_buffer_positions(node):
    """Where ``flex_attention_backward``'s score_mod buffers are among its flattened arguments."""
    if node.target is not flex_attention_backward:
        return range(0)
    start = len(pytree.tree_leaves(node.args[:_SCORE_MOD_BUFFERS]))
    return range(start, start + len(pytree.tree_leaves(node.args[_SCORE_MOD_BUFFERS])))


def _batchable(graph_module):
    """A copy of a score_mod or mask_mod graph whose dtype conversions vmap can batch.

    AOTAutograd decomposed these graphs for Inductor, turning dtype conversions into
    ``prims.convert_element_type``, which has no batching rule: vmap would run it once per
    score. ``aten._to_copy`` is the same conversion, with a batching rule.
    """
    graph_module = copy.deepcopy(graph_module)
    for node in graph_module.graph.nodes:
        if node.target is torch.ops.prims.convert_element_type.default:
            source, dtype = node.args
            node.target, node.args, node.kwargs = _TO_COPY, (source,), {"dtype": dtype}
    graph_module.recompile()
    return graph_module


def _inline(gm, node, traced, feeds):
    """Puts the traced graph in place of ``node`` and points the node's results at its outputs."""
    placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
    env = dict(zip(placeholders, feeds))
    with gm.graph.inserting_before(node):
        for sub in traced.graph.nodes:
            if sub.op == "placeholder":
                continue
            if sub.op == "output":
                results = torch.fx.map_arg(sub.args[0], env.__getitem__)
            elif sub.op == "get_attr":
                name = _fresh_attr_name(gm, sub.target)
                gm.register_buffer(name, getattr(traced, sub.target), persistent=False)
                env[sub] = gm.graph.get_attr(name)
                env[sub].meta.update(sub.meta)
            else:
                env[sub] = gm.graph.node_copy(sub, env.__getitem__)
    _replace_results(gm, node, results)
    gm.graph.erase_node(node)


def _replace_results(gm, node, results):
    # The operators return (nested) tuples, which the graph reads with getitem.
    for user in list(node.users):
        if user.target is not operator.getitem:
            raise AssertionError(f"{node.target} result used by {user.format_node()}")
        part = results[user.args[1]]
        if isinstance(part, torch.fx.Node):
            user.replace_all_uses_with(part)
        elif isinstance(part, (tuple, list)):
            _replace_results(gm, user, part)
        elif user.users:
            raise NotImplementedError(
                f"The compiled graph reads result {user.args[1]} of {node.target}, which "
                "PyTorch's dense implementation of FlexAttention does not compute."
            )
        gm.graph.erase_node(user)


def _fresh_attr_name(gm, base):
    base = f"flex_{base.replace('.', '_')}"
    name, n = base, 0
    while hasattr(gm, name):
        n += 1
        name = f"{base}_{n}"
    return name
