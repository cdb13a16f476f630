"""FlexAttention accepts neuron tensors, as on TorchNeuron.

``torch.nn.attention.flex_attention`` checks the device of its inputs against a fixed list
(``_validate_device``: CUDA, CPU, XPU, HPU, MPS) before it does anything else. Everything past
that check already works on neuron: in eager mode the operator runs its dense implementation
(registered for CompositeExplicitAutograd, so for every backend) with autograd, and compiled
graphs legalize it (``_dynamo/flex_attention.py``). So the check is the one thing replaced: for
neuron tensors it passes, forward and backward; for every other device PyTorch's own check runs.

Importing that module costs most of a second (it imports sympy), so it is not imported here:
the check is replaced when the program first imports it.

The operator itself (``torch.ops.higher_order.flex_attention``, imported with torch) has
autocast kernels for CPU and CUDA only; neuron gets the same: q, k and v are cast to the
autocast dtype, and the backward runs in the dtypes the forward chose.
"""

import importlib.abc
import sys

import torch
from torch._C import DispatchKey
from torch._higher_order_ops.flex_attention import flex_attention, flex_attention_backward

_MODULE = "torch.nn.attention.flex_attention"
_AUTOCAST = DispatchKey.AutocastPrivateUse1


def install():
    """Registers neuron's autocast kernel, and replaces FlexAttention's device check now or
    when its module is first imported."""
    if _AUTOCAST not in flex_attention.py_kernels:
        flex_attention.py_impl(_AUTOCAST)(_flex_attention_in_autocast_dtype)
        flex_attention_backward.fallthrough(_AUTOCAST)
    module = sys.modules.get(_MODULE)
    if module is not None:
        _accept_neuron(module)
    elif not any(isinstance(finder, _FinderOfFlexAttention) for finder in sys.meta_path):
        sys.meta_path.insert(0, _FinderOfFlexAttention())


def _accept_neuron(module):
    check_device = module._validate_device

    def _validate_device(query, key, value):
        if query.device.type != "neuron":
            check_device(query, key, value)

    module._validate_device = _validate_device


def _flex_attention_in_autocast_dtype(query, key, value, *args):
    dtype = torch.get_autocast_dtype("neuron")
    query, key, value = (t.to(dtype) if t.is_floating_point() else t for t in (query, key, value))
    with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(_AUTOCAST)):
        return flex_attention(query, key, value, *args)


class _FinderOfFlexAttention(importlib.abc.MetaPathFinder):
    """Finds the module with the other finders and replaces its check once it has run."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _MODULE:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                spec.loader = _LoaderOfFlexAttention(spec.loader)
                return spec
        return None


class _LoaderOfFlexAttention(importlib.abc.Loader):
    """The module's own loader, followed by the replacement of its device check."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _accept_neuron(module)

    def __getattr__(self, name):
        # get_source, get_code, ...: what inspect, linecache and Dynamo ask of a module's loader.
        return getattr(self._loader, name)
