"""A `torchneuron coverage --plugin` whose neuron kernels are wrong in ways that values alone do
not show, for tests/cli/test_coverage.py: the sweep must fail each one and name the defect.

Every op's CPU kernel is right. On neuron:

* ``column_major`` returns the right values with column-major strides;
* ``other_error`` raises a RuntimeError where the CPU raises its own argument check;
* ``writes_input`` returns the right values and writes 123 into its input;
* ``not_in_place_`` (the in-place variant of ``not_in_place``) leaves its input as it was;
* ``ignores_out`` with out= returns a new tensor and leaves the out= tensor as it was;
* ``no_samples`` is never run: its sample generator raises.
"""

import torch
from torch.testing import make_tensor
from torch.testing._internal.opinfo.core import OpInfo, SampleInput

SHAPES = ((3, 4), (2, 5))
WRITTEN = 123.0
CPU_ERROR = "other_error: expected a 3-D input"


def _column_major(x):
    out = torch.empty_strided(x.shape, (1, x.shape[0]), dtype=x.dtype, device=x.device)
    return out.copy_(x)


def _cpu_check(x):
    raise RuntimeError(f"{CPU_ERROR}, got {x.dim()}-D")


def _neuron_error(x):
    raise RuntimeError("other_error: the neuron kernel lost its way")


def _writes_input(x):
    result = x.clone()
    x.fill_(WRITTEN)
    return result


def _doubled_in_place(x):
    return x.mul_(2)


def _copy_out(x, *, out):
    return out.copy_(x)


_library = torch.library.Library("coverage_defects", "DEF")
# name: (schema, CPU kernel, neuron kernel)
KERNELS = {
    "column_major": ("(Tensor x) -> Tensor", torch.clone, _column_major),
    "other_error": ("(Tensor x) -> Tensor", _cpu_check, _neuron_error),
    "writes_input": ("(Tensor x) -> Tensor", torch.clone, _writes_input),
    "not_in_place": ("(Tensor x) -> Tensor", lambda x: x * 2, lambda x: x * 2),
    "not_in_place_": ("(Tensor(a!) x) -> Tensor(a!)", _doubled_in_place, lambda x: x * 2),
    "ignores_out": ("(Tensor x) -> Tensor", torch.clone, torch.clone),
    "ignores_out.out": (
        "(Tensor x, *, Tensor(a!) out) -> Tensor(a!)",
        _copy_out,
        lambda x, *, out: x.clone(),
    ),
    "no_samples": ("(Tensor x) -> Tensor", torch.clone, torch.clone),
}
for _name, (_schema, _cpu, _neuron) in KERNELS.items():
    _library.define(_name + _schema)
    _library.impl(_name, _cpu, "CPU")
    _library.impl(_name, _neuron, "PrivateUse1")


def _samples(op_info, device, dtype, requires_grad, **kwargs):
    for shape in SHAPES:
        yield SampleInput(make_tensor(shape, device=device, dtype=dtype))


def _no_samples(op_info, device, dtype, requires_grad, **kwargs):
    raise ValueError("no_samples: this generator is broken")


ops = torch.ops.coverage_defects


def _info(name, **kwargs):
    return OpInfo(
        f"coverage_defects.{name}",
        op=getattr(ops, name),
        dtypes=(torch.float32,),
        sample_inputs_func=kwargs.pop("sample_inputs_func", _samples),
        supports_autograd=False,
        supports_out=kwargs.pop("supports_out", False),
        **kwargs,
    )


op_db = [
    _info("column_major"),
    _info("other_error"),
    _info("writes_input"),
    _info("not_in_place", inplace_variant=ops.not_in_place_),
    _info("ignores_out", supports_out=True),
    _info("no_samples", sample_inputs_func=_no_samples),
]
