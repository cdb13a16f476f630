"""Search, shuffle and reduction instructions against numpy/torch references:
nc_find_index8, nc_match_replace8, nonzero_with_count, nc_stream_shuffle and the unary /
chained forms of tensor_scalar_reduce."""

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl


def tile(values, dtype=nl.float32, buffer=nl.sbuf):
    values = torch.as_tensor(values)
    t = nl.ndarray(tuple(values.shape), dtype=dtype, buffer=buffer)
    t.host.copy_(values)
    t._alloc.written = True
    return t


def find_index8_reference(data, vals, sentinel):
    """Per row: for each val, the next unused occurrence (first match, duplicates advance)."""
    out = np.full(vals.shape, sentinel, dtype=np.int64)
    for p in range(data.shape[0]):
        used = set()
        for j, v in enumerate(vals[p]):
            for i, d in enumerate(data[p]):
                if d == v and (v, i) not in used:
                    used.add((v, i))
                    out[p, j] = i
                    break
    return out


@pytest.mark.parametrize("dtype,sentinel", [(nl.uint32, 0xFFFFFFFF), (nl.uint16, 0xFFFF)])
def test_nc_find_index8(dtype, sentinel):
    gen = np.random.default_rng(0)
    data = gen.integers(0, 12, size=(16, 40)).astype(np.float32)
    vals = gen.integers(0, 14, size=(16, 8)).astype(np.float32)
    vals[0] = [3, 3, 3, 5, 5, 13, 13, 0]  # duplicates take successive occurrences; 13 is absent
    dst = nl.ndarray((16, 8), dtype)
    nisa.nc_find_index8(dst=dst, data=tile(data), vals=tile(vals))
    expected = find_index8_reference(data, vals, sentinel)
    assert np.array_equal(dst.host.to(torch.int64).numpy() & sentinel, expected)


def test_nc_match_replace8_follows_the_documented_tie_break():
    data = torch.tensor([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], dtype=torch.float32)
    vals = torch.tensor([[3, 8, 8, 8, 8, 8, 8, 8]], dtype=torch.float32)
    dst = nl.ndarray((1, 11), nl.float32)
    idx = nl.ndarray((1, 8), nl.uint32)
    nisa.nc_match_replace8(dst=dst, data=tile(data), vals=tile(vals), imm=-1.0, dst_idx=idx)
    assert idx.host.to(torch.int64).tolist() == [[2, 10, 9, 8, 7, 6, 5, 4]]
    assert dst.host.tolist() == [[1, 2, -1, 4, -1, -1, -1, -1, -1, -1, -1]]


def test_nonzero_with_count_uses_each_gpsimd_cores_first_partition():
    gen = np.random.default_rng(1)
    src = (gen.random((32, 10)) > 0.6).astype(np.float32) * gen.random((32, 10)).astype(np.float32)
    dst = tile(torch.full((32, 11), 77, dtype=torch.int32), nl.int32)
    nisa.nonzero_with_count(dst=dst, src=tile(src), index_offset=16, padding_val=-1)
    out = dst.host.numpy()
    for p in range(32):
        if p % 16:
            assert (out[p] == 77).all()
            continue
        idx = np.nonzero(src[p])[0]
        expected = np.full(11, -1)
        expected[: len(idx)] = idx + 16
        expected[10] = len(idx)
        assert np.array_equal(out[p], expected)


def test_nc_stream_shuffle_per_quadrant_with_keep():
    src = torch.arange(64 * 3, dtype=torch.float32).reshape(64, 3)
    dst = tile(torch.full((64, 3), -5.0))
    mask = [31 - i for i in range(32)]
    mask[4] = 255
    nisa.nc_stream_shuffle(dst=dst, src=tile(src), shuffle_mask=mask)
    for q in range(2):
        for i in range(32):
            p = q * 32 + i
            expected = torch.full((3,), -5.0) if i == 4 else src[q * 32 + 31 - i]
            assert torch.equal(dst.host[p], expected)


def test_nc_stream_shuffle_start_partition_rules():
    big = nl.ndarray((128, 4), nl.float32)
    with pytest.raises(nki.NkiValidationError, match="must start at one of \\(0, 64\\)"):
        nisa.nc_stream_shuffle(dst=big[32:96], src=big[0:64], shuffle_mask=list(range(32)))


def test_tensor_scalar_reduce_accepts_unary_ops():
    x = torch.randn(8, 32)
    dst = nl.ndarray((8, 32), nl.float32)
    res = nl.ndarray((8, 1), nl.float32)
    nisa.tensor_scalar_reduce(
        dst=dst, data=tile(x), op0=nl.abs, operand0=None, reduce_op=nl.max, reduce_res=res
    )
    torch.testing.assert_close(dst.host, x.abs())
    torch.testing.assert_close(res.host, x.abs().amax(1, keepdim=True))
    with pytest.raises(nki.NkiValidationError, match="operand0 must be None or 0"):
        nisa.tensor_scalar_reduce(
            dst=dst, data=tile(x), op0=nl.abs, operand0=2.0, reduce_op=nl.max, reduce_res=res
        )


def test_tensor_scalar_reduce_chains_in_the_accumulator():
    a, b = torch.randn(8, 16), torch.randn(8, 16)
    dst = nl.ndarray((8, 16), nl.float32)
    res = nl.ndarray((8, 1), nl.float32)
    nisa.tensor_scalar_reduce(
        dst=dst, data=tile(a), op0=nl.multiply, operand0=2.0, reduce_op=nl.add
    )
    nisa.tensor_scalar_reduce(
        dst=dst,
        data=tile(b),
        op0=nl.add,
        operand0=1.0,
        reduce_op=nl.add,
        reduce_res=res,
        reduce_cmd=nisa.reduce_cmd.reduce,
        reduce_res_negate=True,
    )
    expected = -((2 * a).sum(1) + (b + 1).sum(1))
    torch.testing.assert_close(res.host.flatten(), expected, rtol=1e-5, atol=1e-5)


def test_float_to_int_stores_round_to_nearest_even_and_saturate():
    x = torch.tensor([[0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0, 3.7]])
    dst = nl.ndarray((1, 8), nl.int8)
    nisa.tensor_copy(dst=dst, src=tile(x))
    assert dst.host.tolist() == [[0, 2, 2, 0, -2, 127, -128, 4]]


def test_range_select_masks_by_index_and_reduces_max():
    x = torch.randn(16, 40)
    lo, hi = torch.randint(0, 20, (16, 1)).float(), torch.randint(20, 45, (16, 1)).float()
    dst = nl.ndarray((16, 40), nl.float32)
    res = nl.ndarray((16, 1), nl.float32)
    nisa.range_select(
        dst=dst,
        on_true_tile=tile(x),
        comp_op0=nl.greater_equal,
        comp_op1=nl.less,
        bound0=tile(lo),
        bound1=tile(hi),
        reduce_res=res,
        range_start=3,
    )
    index = torch.arange(40) + 3
    keep = (index >= lo) & (index < hi)
    expected = torch.where(keep, x, torch.tensor(torch.finfo(torch.float32).min))
    assert torch.equal(dst.host, expected)
    torch.testing.assert_close(res.host, expected.amax(1, keepdim=True))


@pytest.mark.parametrize(
    "on_false_value",
    # AWS's API reference tells kernel authors to write -3.4028235e+38 (attention_cte does); it is
    # FP32_MIN once rounded to float32, as the engine holds it, though not as a Python float.
    [-3.4028235e38, float(np.finfo(np.float32).min), np.float32(np.finfo(np.float32).min)],
)
def test_range_select_accepts_fp32_min_as_written_by_kernel_authors(on_false_value):
    x = torch.randn(4, 8)
    bound = tile(torch.full((4, 1), 5.0))
    dst = nl.ndarray((4, 8), nl.float32)
    nisa.range_select(
        dst=dst,
        on_true_tile=tile(x),
        comp_op0=nl.less,
        comp_op1=nl.less,
        bound0=bound,
        bound1=bound,
        on_false_value=on_false_value,
    )
    expected = torch.where(torch.arange(8) < 5, x, torch.tensor(torch.finfo(torch.float32).min))
    assert torch.equal(dst.host, expected)


def test_scalars_beyond_float32_as_python_floats_are_held_as_float32():
    """attention_cte memsets and masks with the documented literal -3.4028235e+38, which as a
    Python float lies beyond float32's range (torch calls it an overflow); engines hold it in
    float32, where it is the minimum."""
    fp32_min = torch.finfo(torch.float32).min
    dst = nl.ndarray((4, 8), nl.float32)
    nisa.memset(dst=dst, value=-3.4028235e38)
    assert (dst.host == fp32_min).all()
    full = nl.full((4, 8), -3.4028235e38, nl.float32, buffer=nl.shared_hbm)
    assert (full.host == fp32_min).all()
    x = torch.randn(4, 8)
    out = nl.ndarray((4, 8), nl.float32)
    nisa.tensor_scalar(dst=out, data=tile(x), op0=nl.maximum, operand0=-3.4028235e38)
    assert torch.equal(out.host, x)
    masked = nl.ndarray((4, 8), nl.float32)
    nisa.affine_select(
        dst=masked,
        pattern=[[1, 8]],
        offset=-4,
        channel_multiplier=0,
        on_true_tile=tile(x),
        on_false_value=-3.4028235e38,
        cmp_op=nl.less,
    )
    assert torch.equal(masked.host, torch.where(torch.arange(8) < 4, x, fp32_min))


@pytest.mark.parametrize("on_false_value", [-3.4e38, 0.0, float("-inf"), -3.5e38])
def test_range_select_refuses_other_on_false_values(on_false_value):
    bound = tile(torch.zeros(4, 1))
    with pytest.raises(nki.NkiValidationError, match="on_false_value must be FP32_MIN"):
        nisa.range_select(
            dst=nl.ndarray((4, 8), nl.float32),
            on_true_tile=tile(torch.randn(4, 8)),
            comp_op0=nl.less,
            comp_op1=nl.less,
            bound0=bound,
            bound1=bound,
            on_false_value=on_false_value,
        )


def test_select_reduce_with_reverse_predicate_and_vector_on_false():
    x = torch.randn(8, 12)
    pred = (torch.rand(8, 12) > 0.5).to(torch.uint8)
    fallback = torch.randn(8, 1)
    dst = nl.ndarray((8, 12), nl.float32)
    res = nl.ndarray((8, 1), nl.float32)
    nisa.select_reduce(
        dst=dst,
        predicate=tile(pred, nl.uint8),
        on_true=tile(x),
        on_false=tile(fallback),
        reduce_res=res,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
        reverse_pred=True,
    )
    expected = torch.where(pred == 0, x, fallback)
    assert torch.equal(dst.host, expected)
    torch.testing.assert_close(res.host, expected.amax(1, keepdim=True))


def test_nc_n_gather_gathers_within_each_partition():
    data = torch.randn(4, 3, 5)
    idx = torch.randint(0, 15, (4, 7))
    dst = nl.ndarray((4, 7), nl.float32)
    nisa.nc_n_gather(dst=dst, data=tile(data), indices=tile(idx, nl.uint32))
    assert torch.equal(dst.host, torch.gather(data.reshape(4, 15), 1, idx))


def hbm(values, dtype=nl.float32):
    t = nl.ndarray(tuple(values.shape), dtype, buffer=nl.shared_hbm)
    t.host.copy_(values)
    t._alloc.written = True
    return t


def test_dma_vector_offset_gather_and_scatter_with_oob_skip():
    table = hbm(torch.arange(40.0).reshape(10, 4))
    idx = tile(torch.tensor([[7], [2], [12]]), nl.int32)
    got = tile(torch.full((3, 4), -1.0))
    view = table.ap([[4, 3], [1, 4]], vector_offset=idx, indirect_dim=0)
    assert view.is_indirect()
    with pytest.raises(nki.NkiValidationError, match="out of bounds for 4 elements"):
        nisa.dma_copy(dst=got, src=view)
    nisa.dma_copy(dst=got, src=view, oob_mode=nisa.oob_mode.skip)
    assert got.host.tolist() == [[28, 29, 30, 31], [8, 9, 10, 11], [-1, -1, -1, -1]]
    nisa.dma_copy(
        dst=table.ap([[4, 3], [1, 4]], vector_offset=idx),
        src=tile(torch.zeros(3, 4)),
        oob_mode=nisa.oob_mode.skip,
    )
    assert (table.host[[2, 7]] == 0).all() and table.host[3, 0] == 12


def test_dma_transpose_of_a_vector_offset_gather():
    """attention_tkg gathers KV-cache blocks with an indirect dma_transpose."""
    table = hbm(torch.arange(40.0).reshape(10, 4))
    idx = tile(torch.tensor([[7], [2], [12]]), nl.int32)
    view = table.ap([[4, 3], [1, 4]], vector_offset=idx, indirect_dim=0)
    got = tile(torch.full((4, 3), -1.0))
    with pytest.raises(nki.NkiValidationError, match="out of bounds for 4 elements"):
        nisa.dma_transpose(dst=got, src=view)
    nisa.dma_transpose(dst=got, src=view, oob_mode=nisa.oob_mode.skip)
    expected = torch.cat([table.host[[7, 2]].T, torch.full((4, 1), -1.0)], 1)
    assert torch.equal(got.host, expected)


def test_dma_compute_adds_and_scatter_accumulates():
    a, b = torch.randn(4, 6), torch.randn(4, 6)
    dst = nl.ndarray((4, 6), nl.bfloat16)
    nisa.dma_compute(dst=dst, srcs=[tile(a), tile(b)], reduce_op=nl.add)
    assert torch.equal(dst.host, (a + b).bfloat16())
    table = hbm(torch.ones(8, 6))
    idx = tile(torch.tensor([[5], [0], [3], [6]]), nl.int32)
    rows = table.ap([[6, 4], [1, 6]], vector_offset=idx)
    nisa.dma_compute(dst=rows, srcs=[rows, tile(a)], reduce_op=nl.add)
    expected = torch.ones(8, 6)
    expected[[5, 0, 3, 6]] += a
    torch.testing.assert_close(table.host, expected)
    with pytest.raises(nki.NkiValidationError, match="scales must all be 1.0"):
        nisa.dma_compute(dst=dst, srcs=[tile(a), tile(b)], reduce_op=nl.add, scales=[1.0, 2.0])


def test_dynamic_select_reads_the_index_at_run_time():
    t = hbm(torch.arange(24.0).reshape(4, 6))
    idx = tile(torch.tensor([[2]]), nl.int32)
    assert torch.equal(t.select(0, idx).host, t.host[2])


@pytest.mark.parametrize(
    "op,ref",
    [
        (nl.silu_dx, lambda x: torch.func.grad(lambda v: torch.nn.functional.silu(v).sum())(x)),
        (nl.gelu_dx, lambda x: torch.func.grad(lambda v: torch.nn.functional.gelu(v).sum())(x)),
        (
            nl.gelu_apprx_sigmoid_dx,
            lambda x: torch.func.grad(lambda v: (v * torch.sigmoid(1.702 * v)).sum())(x),
        ),
        (nl.erf_dx, lambda x: torch.func.grad(lambda v: torch.erf(v).sum())(x)),
    ],
)
def test_derivative_activations_match_autograd(op, ref):
    x = torch.randn(8, 16)
    dst = nl.ndarray((8, 16), nl.float32)
    nisa.activation(dst=dst, op=op, data=tile(x))
    torch.testing.assert_close(dst.host, ref(x), rtol=1e-5, atol=1e-5)


def test_magnitude_and_remainder_operators():
    a = tile(torch.tensor([[-5.0, 1.0, 7.5, -7.5]]))
    b = tile(torch.tensor([[3.0, -1.0, 2.0, 2.0]]))
    assert nl.abs_max(a, b).host.tolist() == [[-5.0, -1.0, 7.5, -7.5]]
    assert nl.mod(a, b).host.tolist() == [[1.0, -0.0, 1.5, 0.5]]
    assert nl.fmod(a, b).host.tolist() == [[-2.0, 0.0, 1.5, -1.5]]


def test_tensor_scalar_cumulative_is_a_running_reduction_that_can_continue():
    # AWS's nki.isa.tensor_scalar_cumulative: reg = op1(op0(src[i], imm0), reg); dst[i] = reg.
    src = torch.randn(8, 16)
    dst = nl.ndarray((8, 16), nl.float32)
    nisa.tensor_scalar_cumulative(dst=dst, src=tile(src), op0=nl.multiply, op1=nl.add, imm0=2.0)
    torch.testing.assert_close(dst.host, torch.cumsum(2 * src, 1))
    more = nl.ndarray((8, 16), nl.float32)
    nisa.tensor_scalar_cumulative(
        dst=more,
        src=tile(src),
        op0=nl.add,
        op1=nl.maximum,
        imm0=0.0,
        reduce_cmd=nisa.reduce_cmd.reduce,
    )
    running = torch.cummax(torch.cat([torch.cumsum(2 * src, 1)[:, -1:], src], 1), 1).values[:, 1:]
    torch.testing.assert_close(more.host, running)


def test_sequence_bounds_gives_each_segments_extent_and_pads_id_zero():
    ids = torch.tensor([[1, 1, 2, 2, 2, 0, 3]], dtype=torch.float32)
    dst = nl.ndarray((1, 2, 7), nl.float32)
    nisa.sequence_bounds(dst=dst, segment_ids=tile(ids))
    assert dst.host.reshape(2, 7).tolist() == [[0, 0, 2, 2, 2, 7, 6], [2, 2, 5, 5, 5, -1, 7]]


def test_dropout_zeroes_with_the_given_probability_and_keeps_the_rest():
    data = torch.rand(128, 512) + 1
    dst = nl.ndarray((128, 512), nl.float32)
    nisa.dropout(dst=dst, data=tile(data), prob=0.25)
    kept = dst.host != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.01
    assert torch.equal(dst.host[kept], data[kept])
