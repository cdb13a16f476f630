"""TORCH_NEURONX_64BIT: narrow (default), native and error."""

import pytest
import torch
from pyrun import run_python


def test_narrow_float64_keeps_dtype_but_has_float32_precision():
    x = torch.tensor([1.0, 2.0, 1e-10], dtype=torch.float64)
    n = x.to("neuron")
    assert n.dtype == torch.float64
    assert torch.equal(n.cpu(), x.float().double())
    third = (n / 3).cpu()
    assert torch.equal(third, (x.float().double() / 3).float().double())
    assert third[0].item() != 1 / 3


def test_narrow_complex128():
    z = torch.tensor([1 / 3 + 2j / 3], dtype=torch.complex128)
    assert torch.equal(z.to("neuron").cpu(), z.to(torch.complex64).to(torch.complex128))


def test_narrow_int64_in_range_and_out_of_range():
    i = torch.arange(10, device="neuron")
    assert i.dtype == torch.int64 and torch.equal(i.cpu(), torch.arange(10))
    with pytest.raises(
        RuntimeError,
        match=r"int64 value 1099511627776 from the copy to neuron "
        r"does not fit in int32 \[-2147483648, 2147483647\]",
    ):
        torch.tensor([2**40]).to("neuron")
    big = torch.full((2,), 2**30, device="neuron")
    with pytest.raises(RuntimeError, match="from aten::mul.Tensor does not fit in int32"):
        big * 4


def test_int64_index_tensors_keep_working_without_noise():
    code = """
import torch, warnings
from torch import nn
warnings.simplefilter("error")
emb = nn.Embedding(10, 4).to("neuron")
idx = torch.tensor([[1, 2], [3, 9]], device="neuron")
logits = emb(idx).sum(-1)
loss = nn.functional.cross_entropy(logits, torch.tensor([0, 1], device="neuron"))
loss.backward()
am = logits.argmax(-1)
x = torch.arange(5, device="neuron")[am]
print("ok", am.dtype, x.dtype)
"""
    out = run_python(code)
    assert "ok torch.int64 torch.int64" in out.stdout, out.stderr
    assert out.stderr.count("64-bit data reached a neuron device") == 1


def test_native_mode_keeps_64_bits():
    out = run_python(
        "import torch\na = torch.tensor([1.0], dtype=torch.float64).to('neuron')\n"
        "print((a / 3).item() == 1 / 3, torch.tensor([2**40]).to('neuron').item())",
        env={"TORCH_NEURONX_64BIT": "native"},
    )
    assert out.stdout.split() == ["True", str(2**40)], out.stderr
    assert "64-bit data reached" not in out.stderr


def test_error_mode_refuses_64bit_floats():
    code = (
        "import torch\nprint(torch.arange(3, device='neuron').sum().item())\n"
        "torch.ones(2, dtype=torch.float64).to('neuron')"
    )
    out = run_python(code, env={"TORCH_NEURONX_64BIT": "error"})
    assert out.stdout.strip() == "3"
    assert "64-bit floating point (Double) is not supported on neuron" in out.stderr
    assert "TORCH_NEURONX_64BIT=error" in out.stderr


def test_bad_mode_is_a_clear_error():
    out = run_python(
        "import torch\ntorch.ones(2, dtype=torch.float64).to('neuron')",
        env={"TORCH_NEURONX_64BIT": "wide"},
    )
    assert "TORCH_NEURONX_64BIT='wide' is not a 64-bit policy" in out.stderr


def test_narrowing_is_counted():
    import torch_neuronx

    torch_neuronx.metrics.clear_counters()
    torch.ones(5, dtype=torch.float64).to("neuron")
    assert torch_neuronx.metrics.get_counter_value("Narrowed64BitValues") == 5


def test_views_of_unwritten_int64_memory_are_not_checked():
    # repeat() writes through unfold() views of memory nothing has written yet; only values an
    # op produced are subject to the int32 range.
    i = torch.arange(5, device="neuron")
    for shape in ((10,), (30,)):
        # Freed blocks keep their bytes: as int64, these read as values far outside int32.
        freed = torch.full(shape, -1e30, dtype=torch.float64, device="neuron")
        del freed
        assert torch.equal(i.repeat(shape[0] // 5).cpu(), torch.arange(5).repeat(shape[0] // 5))
    assert torch.equal(i.repeat(2, 3).cpu(), torch.arange(5).repeat(2, 3))
    assert torch.equal(
        torch.empty(4, dtype=torch.int64, device="neuron").fill_(7).cpu(), torch.full((4,), 7)
    )


def test_casts_on_the_device_follow_the_64bit_policy():
    # A cast between neuron tensors produces values, as any op does.
    with pytest.raises(RuntimeError, match="int64 value 10000000000 from aten::copy_ does not fit"):
        torch.tensor([1e10]).to("neuron").long()
    with pytest.raises(RuntimeError, match="does not fit in int32"):
        torch.tensor([float("nan")]).to("neuron").to(torch.int64)
    as_double = torch.tensor([16777217], dtype=torch.int32).to("neuron").double()
    assert as_double.item() == 16777216.0  # held at float32 precision
    assert torch.tensor([7.9]).to("neuron").long().item() == 7
