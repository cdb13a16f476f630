"""The estimator as a library (torch_neuronx._roofline): what Recorder records of a step, and how
op_time costs a record, checked against the arithmetic of the documented rates."""

import dataclasses

import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torch_neuronx import _roofline as roofline


def _calls(recorder):
    return {op: n for op, n in recorder.run.items()}


def test_a_matmul_on_meta_tensors_records_its_flops_and_bytes():
    a = torch.empty(64, 128, device="meta")
    b = torch.empty(128, 32, device="meta")
    with roofline.Recorder() as recorder:
        a @ b
    (op,) = [op for op in _calls(recorder) if op.name.startswith("aten.mm")]
    assert op.engine == roofline.TENSOR and op.flops == 2 * 64 * 128 * 32
    assert op.bytes == 4 * (64 * 128 + 128 * 32 + 64 * 32)


def test_a_view_costs_nothing_and_an_elementwise_op_its_elements_and_bytes():
    x = torch.empty(256, 256, device="meta")
    with roofline.Recorder() as recorder:
        torch.relu(x.t())
    # The transpose moves nothing, so only relu costs: it reads and writes 256x256 floats.
    (op,) = _calls(recorder)
    assert op.name == "aten.relu.default" and op.engine == roofline.VECTOR
    assert op.elements == 256 * 256 and op.bytes == 2 * 4 * 256 * 256


@pytest.mark.parametrize("platform", sorted(roofline.HARDWARE))
def test_op_time_is_the_larger_of_compute_and_memory(platform):
    hw = roofline.HARDWARE[platform]
    square = roofline.Op("aten.mm.default", roofline.TENSOR, "bf16", flops=2 * 4096**3, bytes=0)
    dtype = next(iter(hw.tensor_tflops))
    square = dataclasses.replace(square, dtype=dtype)
    seconds, bound = roofline.op_time(square, hw, lnc=1)
    assert bound == "compute" and seconds == pytest.approx(
        square.flops / (hw.tensor_tflops[dtype] * 1e12)
    )
    streamed = dataclasses.replace(square, flops=1, bytes=10**9)
    seconds, bound = roofline.op_time(streamed, hw, lnc=1)
    assert bound == "HBM" and seconds == pytest.approx(10**9 / hw.hbm_bytes_per_s(1))
    # Two physical cores per logical core: twice the rates.
    assert roofline.op_time(square, hw, lnc=2)[0] == pytest.approx(
        roofline.op_time(square, hw, lnc=1)[0] / 2
    )


@nki.jit
def _double(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    doubled = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=doubled, data=tile, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=doubled)
    return out


def test_an_nki_launch_is_one_kernel_with_the_cost_model_latency_and_only_while_recording():
    x = torch.ones(128, 64)
    with roofline.Recorder() as recorder:
        out = _double(x)
    assert torch.equal(out, 2 * x)
    kernels = [op for op in _calls(recorder) if op.engine == roofline.NKI]
    assert [op.name for op in kernels] == ["nki:_double"]
    # The simulator's own torch ops inside the kernel are not the model's.
    assert all(op.engine == roofline.NKI for op in _calls(recorder))
    latencies = dict(kernels[0].nki_us)
    assert set(latencies) == set(roofline.HARDWARE) and all(t > 0 for t in latencies.values())
    assert latencies["trn2"] == pytest.approx(nki.estimate(_double, x, target="trn2").latency_us)
    # The subscription ends with the recording: a later launch is recorded nowhere.
    _double(x)
    assert sum(recorder.run.values()) == 1


def test_a_serving_engine_ends_steps_and_its_decode_steps_carry_their_tokens():
    x = torch.empty(8, 64, device="meta")
    roofline.end_serving_step(3)  # no recorder: nothing to end
    with roofline.Recorder() as recorder:
        torch.relu(x)
        roofline.end_serving_step()  # a prefill step
        torch.relu(x)
        torch.relu(x)
        roofline.end_serving_step(8)  # a decode step of 8 sequences
        roofline.end_serving_step(8)  # nothing ran since: no empty step
    assert roofline.Recorder.active is None
    assert recorder.step_tokens == [None, 8]
    assert [sum(step.values()) for step in recorder.steps] == [1, 2]


def test_a_flop_formula_registered_while_recording_is_counted():
    library = torch.library.Library("roofline_test", "FRAGMENT")
    library.define("gemm(Tensor a, Tensor b) -> Tensor")
    library.impl("gemm", lambda a, b: a.new_empty(a.shape[0], b.shape[1]), "Meta")
    a, b = torch.empty(4, 16, device="meta"), torch.empty(16, 8, device="meta")
    with roofline.Recorder() as recorder:
        torch.ops.roofline_test.gemm(a, b)
        torch.utils.flop_counter.register_flop_formula(torch.ops.roofline_test.gemm)(
            lambda a, b, out_shape=None: 2 * a[0] * a[1] * b[1]
        )
        torch.ops.roofline_test.gemm(a, b)
    first, second = (op for op in recorder.run if op.name.startswith("roofline_test.gemm"))
    assert (first.flops, second.flops) == (0, 2 * 4 * 16 * 8)
    assert second.engine == roofline.TENSOR
