"""A `torchneuron coverage --plugin` for tests/cli/test_coverage.py: custom ops whose neuron
kernels misbehave in the ways the sweep must tell apart, each with an OpInfo.

On the CPU each op returns a copy of its input. On neuron, ``coverage_test.aborts`` kills the
process (os.abort) on its second sample only, ``coverage_test.off_by_one`` returns a wrong
result and ``coverage_test.raises`` raises."""

import os

import torch
from torch.testing import make_tensor
from torch.testing._internal.opinfo.core import OpInfo, SampleInput

SHAPES = ((2,), (3, 4), (5,))
ABORTING_SHAPE = SHAPES[1]


def _aborts(x):
    if tuple(x.shape) == ABORTING_SHAPE:
        os.abort()
    return x.clone()


def _raises(x):
    raise RuntimeError("coverage_test.raises has no neuron kernel that works")


NEURON_KERNELS = {"aborts": _aborts, "off_by_one": lambda x: x + 1, "raises": _raises}

_library = torch.library.Library("coverage_test", "DEF")
for _name, _kernel in NEURON_KERNELS.items():
    _library.define(f"{_name}(Tensor x) -> Tensor")
    _library.impl(_name, lambda x: x.clone(), "CPU")
    _library.impl(_name, _kernel, "PrivateUse1")


def _samples(op_info, device, dtype, requires_grad, **kwargs):
    for shape in SHAPES:
        yield SampleInput(make_tensor(shape, device=device, dtype=dtype))


op_db = [
    OpInfo(
        f"coverage_test.{name}",
        op=getattr(torch.ops.coverage_test, name),
        dtypes=(torch.float32,),
        sample_inputs_func=_samples,
        supports_autograd=False,
        supports_out=False,
    )
    for name in NEURON_KERNELS
]
