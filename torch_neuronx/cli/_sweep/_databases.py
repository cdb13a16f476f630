"""PyTorch's own test databases (OpInfo, ModuleInfo, OptimizerInfo) as entries whose samples
run on one device.

Each database lists its entries, says why an entry is not swept for a dtype, makes the entry's
samples (the same ones in every process, for a given seed) and runs one sample on a device.
"""

import copy
import importlib
import importlib.util
import os
import random
import sys

import numpy
import torch
from torch.utils._pytree import tree_flatten, tree_map

from torch_neuronx.cli._sweep._outcomes import Ran, layout

SEED = 1234
DTYPES = {
    name: getattr(torch, name)
    for name in ("float32", "bfloat16", "float16", "int64", "int32", "bool")
}


def seed(value=SEED):
    """Seeds every generator a sample generator or an op may draw from, on every device."""
    random.seed(value)
    numpy.random.seed(value)
    torch.manual_seed(value)


def _move(device):
    """Copies tensors to `device` with their whole storage, so views keep their offsets and
    strides (and a sample that writes to its inputs leaves the next device's copy as it was),
    and points device arguments (factories' `device="cpu"`, `Tensor.to("cpu")`) at `device`."""

    def move(t):
        if isinstance(t, (str, torch.device)) and str(t) == "cpu":
            return device
        if not isinstance(t, torch.Tensor):
            return t
        with torch.no_grad():
            if t.layout == torch.strided:
                storage = t.untyped_storage()
                storage = storage.clone() if device == "cpu" else storage.to(device=device)
                moved = torch.empty(0, dtype=t.dtype, device=device)
                moved.set_(storage, t.storage_offset(), t.shape, t.stride())
            else:
                moved = t.detach().clone().to(device)
        return moved.requires_grad_() if t.requires_grad else moved

    return move


def _tensors(tree):
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


def _gradients(outputs, inputs):
    """Gradients of `inputs` for seeded random cotangents of the differentiable `outputs`."""
    inputs = [t for t in inputs if t.requires_grad]
    differentiable = [t for t in outputs if t.requires_grad and t.grad_fn is not None]
    if not inputs or not differentiable:
        return []
    seed(SEED + 1)
    cotangents = [torch.randn(t.shape, dtype=t.dtype).to(t.device) for t in differentiable]
    grads = torch.autograd.grad(differentiable, inputs, cotangents, allow_unused=True)
    return [g for g in grads if g is not None]


def _ran(output_tree, outputs, extra=(), inputs=()):
    """A Ran of one device: the output tensors; `extra` further results as (name, tensor)
    (gradients, out= tensors, state); `inputs`, the tensors the sample passed, as they are after
    the call. Each result keeps the layout it had on the device; an output that is one of the
    inputs is typed as such, so a copy where the CPU returns its input is told apart."""
    named = [(f"output {i}", t) for i, t in enumerate(outputs)] + list(extra)
    named += [(f"input {i} after the call", t) for i, t in enumerate(inputs)]
    arguments = [(f"input {i}", t) for i, t in enumerate(inputs)]
    arguments += [(name, t) for name, t in extra if name.startswith("out=")]

    def kind(value):
        same = next((name for name, t in arguments if value is t), None)
        return type(value).__name__ if same is None else f"{same} itself"

    return Ran(
        results=[t.detach().cpu() for _, t in named],
        types=[kind(t) for t in tree_flatten(output_tree)[0]],
        devices={t.device.type for _, t in named[: len(outputs) + len(extra)]},
        names=[name for name, _ in named],
        layouts=[layout(t, inputs) for _, t in named],
    )


class Ops:
    """OpInfo: torch.testing._internal.common_methods_invocations.op_db."""

    name = "ops"
    title = "OpInfo"
    # Factories whose outputs are uninitialised memory: only their metadata can be compared.
    UNINITIALISED = frozenset(
        ("empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided")
    )
    # Arguments that the op requires on the CPU whatever the device (as on CUDA).
    HOST_ARGUMENTS = frozenset(("tensor_split",))
    # Factories with samples that name no device: they are given one, or they would run on the
    # CPU both times.
    DEVICE_DEFAULTED = frozenset(("arange", "linspace", "logspace"))
    # The ways a forward sample calls the op: as a function, in place (OpInfo's inplace_variant)
    # and with out= tensors (ops that support out=), each compared as a sample of its own.
    FUNCTION, INPLACE, OUT = "function", "in-place", "out="

    @staticmethod
    def load():
        from torch.testing._internal.common_methods_invocations import op_db

        return list(op_db)

    @staticmethod
    def entry_name(op):
        return f"{op.name}[{op.variant_test_name}]" if op.variant_test_name else op.name

    @staticmethod
    def not_swept(op, dtype, grad):
        if op.name.startswith("jiterator"):
            return "CUDA only (jiterator)"
        if dtype not in op.supported_dtypes("cpu"):
            return f"no {_dtype_name(dtype)} on the CPU"
        if grad and not (op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")):
            return f"no {_dtype_name(dtype)} gradient on the CPU"
        return None

    @classmethod
    def samples(cls, op, dtype, grad):
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=grad))
        # Gradients are taken of the function: in-place and out= calls refuse inputs that
        # require them.
        variants = [cls.FUNCTION]
        if not grad:
            variants += [cls.INPLACE] * (op.inplace_variant is not None)
            variants += [cls.OUT] * bool(op.supports_out)
        return [(variant, sample) for variant in variants for sample in samples]

    @classmethod
    def describe(cls, sample):
        variant, sample = sample

        def short(value):
            if isinstance(value, torch.Tensor):
                return f"Tensor{list(value.shape)}"
            if isinstance(value, (list, tuple)):
                return "(" + ", ".join(short(v) for v in value) + ")"
            return repr(value)[:40]

        kwargs = [f"{k}={short(v)}" for k, v in sample.kwargs.items()]
        described = ", ".join([short(sample.input), *map(short, sample.args), *kwargs])
        return described if variant == cls.FUNCTION else f"{variant}: {described}"

    @classmethod
    def run(cls, op, sample, device, dtype, grad):
        variant, sample = sample
        move = _move(device)
        if op.name in cls.HOST_ARGUMENTS:
            inp, args, kwargs = move(sample.input), sample.args, sample.kwargs
        else:
            inp, args, kwargs = tree_map(move, (sample.input, sample.args, sample.kwargs))
        if op.name in cls.DEVICE_DEFAULTED and "device" not in kwargs:
            kwargs = {**kwargs, "device": device}
        inputs = _tensors((inp, args, kwargs))
        extra = []
        seed()
        if variant == cls.INPLACE:
            out = op.inplace_variant(inp, *args, **kwargs)
        elif variant == cls.OUT:
            kwargs = {**kwargs, "out": cls._zeros_like(op(inp, *args, **kwargs))}
            extra = [(f"out= tensor {i}", t) for i, t in enumerate(_tensors(kwargs["out"]))]
            seed()
            out = op(inp, *args, **kwargs)
        else:
            out = op(inp, *args, **kwargs)
        if grad:
            out = sample.output_process_fn_grad(out)
        outputs = _tensors(out)
        grads = _gradients(outputs, inputs) if grad else []
        extra += [(f"gradient {i}", g) for i, g in enumerate(grads)]
        ran = _ran(out, outputs, extra, inputs)
        if op.name in cls.UNINITIALISED:
            # Only the metadata of uninitialised memory can be compared; the layouts stay.
            ran.results = [
                torch.zeros_like(t) if name.startswith("out") else t
                for name, t in zip(ran.names, ran.results)
            ]
        return ran

    @staticmethod
    def _zeros_like(result):
        """out= tensors shaped like the op's own result (a tensor or a tuple of them),
        zero-filled so that an op which leaves them untouched is seen."""
        if isinstance(result, torch.Tensor):
            return torch.zeros_like(result)
        return tuple(torch.zeros_like(t) for t in result)


class Modules:
    """ModuleInfo: torch.testing._internal.common_modules.module_db. A sample is one module
    input in one mode (train, and eval where they differ): the module is built from the same
    seed on each device, runs forward, and its outputs, gradients (--grad: of the inputs and
    the parameters) and state after the forward are compared."""

    name = "modules"
    title = "ModuleInfo"

    @staticmethod
    def load():
        from torch.testing._internal.common_modules import module_db

        return list(module_db)

    @staticmethod
    def entry_name(info):
        return info.name

    @staticmethod
    def not_swept(info, dtype, grad):
        if dtype not in info.supported_dtypes("cpu"):
            return f"no {_dtype_name(dtype)} on the CPU"
        return None

    @staticmethod
    def samples(info, dtype, grad):
        modes = (True, False) if info.train_and_eval_differ else (True,)
        return [
            (training, module_input)
            for training in modes
            for module_input in info.module_inputs_func(
                info, device="cpu", dtype=dtype, requires_grad=grad, training=training
            )
            if module_input.forward_input is not None
        ]

    @staticmethod
    def describe(sample):
        training, module_input = sample
        return f"{module_input.desc or 'default'}, {'train' if training else 'eval'}"

    @staticmethod
    def run(info, sample, device, dtype, grad):
        training, module_input = sample
        move = _move(device)
        constructor = module_input.constructor_input
        ctor_args, ctor_kwargs = tree_map(move, (constructor.args, constructor.kwargs))
        seed()
        module = info.module_cls(*ctor_args, **ctor_kwargs).to(device=device, dtype=dtype)
        module.train(training)
        forward = module_input.forward_input
        args, kwargs = tree_map(move, (forward.args, forward.kwargs))
        seed()
        out = module(*args, **kwargs)
        outputs = _tensors(out)
        grads = []
        if grad:
            grads = _gradients(outputs, _tensors((args, kwargs)) + list(module.parameters()))
        extra = [(f"gradient {i}", g) for i, g in enumerate(grads)]
        extra += [(f"state {name}", t) for name, t in module.state_dict().items()]
        return _ran(out, outputs, extra)


class Optimizers:
    """OptimizerInfo: torch.testing._internal.common_optimizers.optim_db. A sample is one of
    the optimizer's configurations for the neuron device (with each implementation it supports
    there: foreach, differentiable): a few steps on a small two-layer linear model from the same
    seed on each device, comparing the parameters and the optimizer's state."""

    name = "optimizers"
    title = "OptimizerInfo"
    STEPS = 3

    @staticmethod
    def load():
        from torch.testing._internal.common_optimizers import optim_db

        return list(optim_db)

    @staticmethod
    def entry_name(info):
        return f"optim.{info.optim_cls.__name__}"

    @staticmethod
    def not_swept(info, dtype, grad):
        if not dtype.is_floating_point:
            return "optimizers take floating-point parameters"
        return None

    @staticmethod
    def samples(info, dtype, grad):
        from torch.testing._internal.common_optimizers import (
            _get_optim_inputs_including_global_cliquey_kwargs as configurations,
        )

        return configurations("neuron", dtype, info)

    @staticmethod
    def describe(sample):
        return sample.desc or "default"

    @classmethod
    def run(cls, info, sample, device, dtype, grad):
        seed()
        # Two matrices: every optimizer takes them (Muon only takes 2-D parameters).
        first, second, x = (
            torch.randn(*s, dtype=dtype).to(device) for s in ((10, 5), (3, 10), (5,))
        )
        params = [first.requires_grad_(), second.requires_grad_()]
        kwargs = copy.deepcopy(sample.kwargs)
        if kwargs.get("differentiable"):
            # A differentiable step records itself on autograd, which an in-place update of a
            # leaf cannot: the parameters are the leaves' clones, as in PyTorch's tests.
            params = [p.clone() for p in params]
        first, second = params
        optimizer = info.optim_cls(params, **kwargs)

        def closure():
            optimizer.zero_grad()
            loss = second.mv(first.mv(x)).pow(2).sum()
            loss.backward(inputs=params)
            if info.only_supports_sparse_grads:
                for p in params:
                    p.grad = p.grad.to_sparse()
            return loss

        for _ in range(cls.STEPS):
            if info.step_requires_closure:
                optimizer.step(closure)
            else:
                closure()
                optimizer.step()
        # Only the parameters must be on the device: a step count may live on the host.
        state = [
            value
            for p in params
            for _, value in sorted(optimizer.state[p].items())
            if isinstance(value, torch.Tensor)
        ]
        names = [f"parameter {i}" for i in range(len(params))]
        names += [f"state {i}" for i in range(len(state))]
        return Ran(
            results=[t.detach().cpu() for t in params + state],
            types=[type(t).__name__ for t in params + state],
            devices={p.device.type for p in params},
            names=names,
            layouts=[layout(t) for t in params + state],
        )


DATABASES = {db.name: db for db in (Ops, Modules, Optimizers)}


def _dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


def load(database, plugins=()):
    """The entries of `database`, followed by those of the plugins (their `op_db`, `module_db`
    or `optim_db` lists), in a fixed order: indices name the same entry in every process."""
    entries = DATABASES[database].load()
    attribute = {"ops": "op_db", "modules": "module_db", "optimizers": "optim_db"}[database]
    for plugin in plugins:
        entries += list(getattr(import_plugin(plugin), attribute, ()))
    return entries


def import_plugin(plugin):
    """Imports a plugin: a module name, or the path of a .py file."""
    if not plugin.endswith(".py"):
        return importlib.import_module(plugin)
    path = os.path.abspath(plugin)
    name = "_coverage_plugin_" + os.path.splitext(os.path.basename(path))[0]
    if name in sys.modules:
        return sys.modules[name]
    if not os.path.isfile(path):
        raise FileNotFoundError(f"the plugin {plugin} does not exist")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
