"""nki.jit: argument kinds, in-place outputs, specialization cache, SPMD/LNC launch, simulate."""

import numpy as np
import pytest
import torch
from nkitest_utils import requires_neuron
from pyrun import run_python
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def double(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(x), 2.0))
    return out


@nki.jit
def scale_into(x, out, factor):
    nl.store(out, nl.multiply(nl.load(x), factor))


@nki.jit
def split_stats(x):
    """Two outputs plus the input returned unchanged."""
    total = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    peak = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(total, nl.sum(t, axis=1))
    nl.store(peak, nl.max(t, axis=1))
    return total, {"peak": peak, "input": x}


def test_numpy_in_numpy_out():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = double(x)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_array_equal(out, 2 * x)


def test_torch_in_torch_out():
    x = torch.randn(8, 16, dtype=torch.bfloat16)
    out = double(x)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    assert torch.equal(out, (x.float() * 2).bfloat16())


def test_inputs_are_updated_in_place():
    x = np.ones((4, 4), np.float32)
    out = np.zeros((4, 4), np.float32)
    assert scale_into(x, out, 3.0) is None
    assert (out == 3).all()
    t_out = torch.zeros(4, 4)
    scale_into(torch.ones(4, 4), t_out, 5.0)
    assert (t_out == 5).all()


def test_strided_torch_arguments_are_views():
    base = torch.zeros(8, 8)
    scale_into(torch.ones(8, 4), base[:, ::2], 2.0)
    assert (base[:, ::2] == 2).all() and (base[:, 1::2] == 0).all()


def test_structured_outputs_and_returned_arguments():
    x = torch.randn(4, 6)
    total, extra = split_stats(x)
    torch.testing.assert_close(total, x.sum(1, keepdim=True))
    torch.testing.assert_close(extra["peak"], x.amax(1, keepdim=True))
    assert extra["input"] is x


def test_specialization_is_cached_per_signature():
    @nki.jit
    def kernel(x, factor):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.multiply(nl.load(x), factor))
        return out

    kernel(np.ones((2, 2), np.float32), 2.0)
    kernel(np.ones((2, 2), np.float32), 2.0)
    assert len(kernel.specializations) == 1
    kernel(np.ones((2, 2), np.float32), 3.0)
    kernel(np.ones((4, 2), np.float32), 3.0)
    kernel(np.ones((4, 2), np.float16), 3.0)
    assert len(kernel.specializations) == 4
    special = next(iter(kernel.specializations.values()))
    assert [i.name for i in special.traces[0]] == ["dma_copy", "nl.multiply", "dma_copy"]


def test_spmd_grid_shares_outputs():
    @nki.jit
    def add_rows(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        rows = a.shape[0] // nl.num_programs(0)
        lo = nl.program_id(0) * rows
        s = nl.add(nl.load(a[lo : lo + rows]), nl.load(b[lo : lo + rows]))
        nl.store(out[lo : lo + rows], s)
        return out

    a, b = torch.randn(512, 64), torch.randn(512, 64)
    assert torch.equal(add_rows[4](a, b), a + b)
    np.testing.assert_array_equal(nki.simulate(add_rows[4])(a.numpy(), b.numpy()), (a + b).numpy())


def test_lnc2_form_splits_work_by_program_id():
    @nki.jit
    def halves(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        half = x.shape[1] // 2
        cols = slice(nl.program_id(0) * half, (nl.program_id(0) + 1) * half)
        nl.store(out[:, cols], nl.exp(nl.load(x[:, cols])))
        return out

    x = torch.randn(128, 256)
    torch.testing.assert_close(halves[2](x), torch.exp(x))


def test_simulate_accepts_plain_functions_and_platform_target():
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x)
        return out

    x = np.random.rand(3, 3).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x)
    pinned = nki.jit(kernel, platform_target="trn3")
    pinned(x)
    assert next(iter(pinned.specializations.values())).target.name == "trn3"


@pytest.mark.parametrize(
    ("nc_version", "expected"), [("gen3", "gen3"), ("gen4", "gen4"), ("", "gen3")]
)
def test_cpu_simulate_targets_nki_nc_version(monkeypatch, nc_version, expected):
    """AWS's simulator-package entry point, as nki-library's harness calls it:
    ``nki.cpu_simulate(kernel)[lnc](**inputs)`` with ``NKI_NC_VERSION`` naming the target."""

    @nki.jit
    def version(x):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        if nl.program_id(0) == 0:
            nisa.dma_copy(dst=out, src=x)
        return out, nisa.get_nc_version()

    monkeypatch.setenv("NKI_NC_VERSION", nc_version)
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE", raising=False)
    x = np.full((1, 1), 7, np.int32)
    for launch in (nki.cpu_simulate(version)[2], nki.cpu_simulate(version[2])):
        out, seen = launch(x=x)
        assert seen == getattr(nisa.nc_version, expected) and out.tolist() == [[7]]
    monkeypatch.setenv("NKI_NC_VERSION", "gen9")
    with pytest.raises(ValueError, match="NKI_NC_VERSION"):
        nki.cpu_simulate(version)


def test_jit_mode_argument_is_accepted():
    @nki.jit(mode="simulation")
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x)
        return out

    assert (kernel(np.ones(3, np.float32)) == 1).all()


def test_fake_tensors_get_outputs_without_running():
    x = torch.randn(4, 6)
    with FakeTensorMode():
        fake = torch.empty(4, 6)
        total, extra = split_stats(fake)
    assert isinstance(total, FakeTensor) and total.shape == (4, 1)
    assert extra["peak"].shape == (4, 1) and extra["input"] is fake
    meta = double(torch.empty(3, 5, device="meta", dtype=torch.float16))
    assert meta.device.type == "meta" and meta.shape == (3, 5) and meta.dtype == torch.float16
    torch.testing.assert_close(split_stats(x)[0], x.sum(1, keepdim=True))


def test_kernel_prints_run_at_call_time(capsys):
    @nki.jit
    def kernel(x):
        print(f"adding tensors of type {x.dtype} and shape {x.shape}")

    kernel(torch.zeros(2, 3))
    assert "shape (2, 3)" in capsys.readouterr().out


@requires_neuron
def test_neuron_tensors_run_on_device_memory():
    x = torch.randn(8, 8).to("neuron")
    out = double(x)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), 2 * x.cpu())
    dst = torch.zeros(8, 8, device="neuron")
    scale_into(x, dst, 3.0)
    torch.testing.assert_close(dst.cpu(), 3 * x.cpu())


def test_tensors_without_host_memory_are_rejected_for_execution():
    from nki._src import interop

    with pytest.raises(TypeError, match="NKI kernels take numpy arrays, CPU or neuron tensors"):
        interop.to_host(torch.empty(1, device="meta"))


DOUBLE_AND_AN_INVALID_LOAD = """
import numpy as np
import nki
import nki.language as nl

@nki.jit
def double(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(x), 2.0))
    return out

print(double(np.arange(4, dtype=np.float32).reshape(1, 4)).tolist())
try:
    double(np.zeros((256, 4), np.float32))
except nki.NkiValidationError as e:
    print(e)
"""


@pytest.mark.parametrize("simulator", [None, "0", "1"])
def test_kernels_run_on_the_validating_simulator_whatever_nki_simulator_says(
    simulator, monkeypatch
):
    monkeypatch.delenv("NKI_SIMULATOR", raising=False)
    out = run_python(
        DOUBLE_AND_AN_INVALID_LOAD, env={"NKI_SIMULATOR": simulator} if simulator else None
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "[[0.0, 2.0, 4.0, 6.0]]",
        "nl.load: partition dimension 256 exceeds maximum 128",
    ]
