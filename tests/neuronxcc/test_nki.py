"""neuronxcc.nki, the pre-0.2 NKI API: old-style kernels against NumPy references."""

import math

import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import nki as new_nki
from neuronxcc.nki.typing import mutable_tensor, tensor

rng = np.random.default_rng(0)


def rand(*shape):
    return rng.random(shape, dtype=np.float32)


# ---- index expressions --------------------------------------------------------------------
@nki.jit(mode="simulation")
def tiled_exp(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(a.shape[1])[None, :]
    for t in nl.affine_range(a.shape[0] // 128):
        tile = nl.load(a[t * 128 + i_p, i_f])
        nl.store(out[t * 128 + i_p, i_f], nl.exp(tile))
    return out


def test_arange_expressions_index_tiles():
    a = rand(256, 64)
    np.testing.assert_allclose(tiled_exp(a), np.exp(a), rtol=1e-6)


@nki.jit
def mgrid_copy(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    grid = nl.mgrid[0 : a.shape[0], 0 : a.shape[1]]
    i_p, i_f = grid
    tile = nl.load(a[grid.p, grid.x])
    nl.store(out[nl.mgrid[0 : a.shape[0], 0 : a.shape[1]]], tile[i_p, i_f])
    return out


def test_mgrid_grids_index_by_position_and_name():
    a = rand(32, 48)
    np.testing.assert_array_equal(mgrid_copy(a), a)
    grid = nl.mgrid[0:4, 0:6]
    assert grid.p.shape == grid.x.shape == (4, 6)
    np.testing.assert_array_equal(np.asarray(grid.x)[1], np.arange(6))


@nki.jit
def split_even_odd(a):
    n, m = a.shape
    even = nl.ndarray((n, m // 2), dtype=a.dtype, buffer=nl.shared_hbm)
    odd = nl.ndarray((n, m // 2), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(n)[:, None]
    i_f = nl.arange(m // 2)[None, :]
    tile = nl.load(a)
    nl.store(even, nl.copy(tile[i_p, 2 * i_f]))
    nl.store(odd, nl.copy(tile[i_p, 2 * i_f + 1]))
    return even, odd


def test_affine_free_axis_expressions_stride_through_a_tile():
    a = rand(16, 10)
    even, odd = split_even_odd(a)
    np.testing.assert_array_equal(even, a[:, 0::2])
    np.testing.assert_array_equal(odd, a[:, 1::2])


@nki.jit
def maxpool(a, pool):
    c, h, w = a.shape
    out = nl.ndarray((c, h // pool, w // pool), dtype=a.dtype, buffer=nl.shared_hbm)
    i0, i1, i2, i3, i4 = nl.mgrid[:c, : h // pool, :pool, : w // pool, :pool]
    tile = nl.load(a)
    nl.store(out, nl.max(tile[i0, pool * i1 + i2, pool * i3 + i4], axis=[2, 4]))
    return out


def test_five_dimensional_access_pattern_and_reduction():
    a = rand(3, 8, 6)
    expected = a.reshape(3, 4, 2, 3, 2).max(axis=(2, 4))
    np.testing.assert_array_equal(maxpool(a, 2), expected)


@nki.jit
def out_of_bounds_load(a):
    out = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(8)[None, :]
    nl.store(out, nl.load(a[i_p + 64, i_f]))
    return out


def test_unmasked_access_outside_the_tensor_is_refused():
    with pytest.raises(nki.NkiValidationError, match="add a mask"):
        out_of_bounds_load(rand(128, 8))


# ---- masks ---------------------------------------------------------------------------------
@nki.jit
def ragged_exp(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape
    i_f = nl.arange(cols)[None, :]
    for p in nl.affine_range(math.ceil(rows / 128)):
        i_p = p * 128 + nl.arange(128)[:, None]
        tile = nl.load(a[i_p, i_f], mask=(i_p < rows))
        nl.store(out[i_p, i_f], value=nl.exp(tile), mask=(i_p < rows))
    return out


def test_masks_cover_ragged_last_tiles():
    a = rand(250, 32)
    np.testing.assert_allclose(ragged_exp(a), np.exp(a), rtol=1e-6)


@nki.jit
def masked_square(a):
    out = nl.ndarray((64, 256), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    tile = nl.load(a[i_p, i_f])
    squared = nl.square(tile, mask=((i_p < 64) & (i_f < 256)))
    nl.store(out[i_p, i_f], squared[i_p, i_f], mask=((i_p < 64) & (i_f < 256)))
    return out


def test_masked_store_may_address_beyond_its_destination():
    a = rand(128, 512)
    np.testing.assert_allclose(masked_square(a), np.square(a[:64, :256]), rtol=1e-6)


@nki.trace
def lower_triangle(a, out):
    i_p, i_f = nl.mgrid[0 : a.shape[0], 0 : a.shape[1]]
    nl.store(out[i_p, i_f], nl.load(a), mask=(i_f <= i_p))


def test_non_box_mask_leaves_excluded_elements_untouched():
    a, before = rand(16, 16), rand(16, 16)
    out = before.copy()
    nki.simulate_kernel(lower_triangle, a, out)
    np.testing.assert_array_equal(out, np.where(np.tri(16, dtype=bool), a, before))


def test_predicates_combine_and_compare():
    i_p = nl.arange(4)[:, None]
    i_f = nl.arange(3)[None, :]
    mask = (i_p < 2) & ~(i_f == 1) | (i_p == 3)
    expected = (np.arange(4)[:, None] < 2) & (np.arange(3)[None, :] != 1)
    expected = expected | (np.arange(4)[:, None] == 3)
    np.testing.assert_array_equal(np.asarray(mask), expected)
    assert mask.box() is None
    assert ((i_p < 2) & (i_f >= 1)).box() == (slice(0, 2), slice(1, 3))


# ---- tile-returning ISA calls --------------------------------------------------------------
@nki.jit
def isa_mix(a, b, bias):
    outs = [nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm) for _ in range(4)]
    reduced = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    x, y, c = nl.load(a), nl.load(b), nl.load(bias)
    nl.store(outs[0], nisa.tensor_tensor(x, y, op=np.multiply))
    nl.store(
        outs[1], nisa.tensor_scalar(x, np.subtract, 1.0, reverse0=True, op1=nl.add, operand1=c)
    )
    nl.store(outs[2], nisa.activation(op=nl.exp, data=x, bias=c, scale=2.0))
    nl.store(
        outs[3],
        nisa.scalar_tensor_tensor(data=x, op0=nl.multiply, operand0=c, op1=np.add, operand1=y),
    )
    nl.store(reduced, nisa.tensor_reduce(np.max, x, axis=[1]))
    return (*outs, reduced)


def test_isa_calls_return_new_tiles():
    a, b, bias = rand(32, 40), rand(32, 40), rand(32, 1)
    prod, scalar, act, stt, reduced = isa_mix(a, b, bias)
    np.testing.assert_allclose(prod, a * b, rtol=1e-6)
    np.testing.assert_allclose(scalar, 1 - a + bias, rtol=1e-6)
    np.testing.assert_allclose(act, np.exp(2 * a + bias), rtol=1e-5)
    np.testing.assert_allclose(stt, a * bias + b, rtol=1e-6)
    np.testing.assert_array_equal(reduced, a.max(axis=1, keepdims=True))


@nki.jit
def matmul_accumulate(a_t, b):
    out = nl.ndarray((a_t.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((a_t.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(a_t.shape[0] // 128):
        lhs = nl.load(a_t[k * 128 + nl.arange(128)[:, None], nl.arange(a_t.shape[1])[None, :]])
        acc += nisa.nc_matmul(lhs, nl.load(b[k * 128 : (k + 1) * 128, :]))
    nl.store(out, acc)
    return out


def test_nc_matmul_returns_psum_tiles_that_accumulate():
    a_t, b = rand(256, 64), rand(256, 96)
    np.testing.assert_allclose(matmul_accumulate(a_t, b), a_t.T @ b, rtol=1e-5)


@nki.jit
def transposes_and_constants(a):
    n, m = a.shape
    out_pe = nl.ndarray((m, n), dtype=a.dtype, buffer=nl.shared_hbm)
    out_ve = nl.ndarray((m, n), dtype=a.dtype, buffer=nl.shared_hbm)
    out_iota = nl.ndarray((n, m), dtype=nl.int32, buffer=nl.shared_hbm)
    out_mem = nl.ndarray((n, m), dtype=nl.float32, buffer=nl.shared_hbm)
    out_causal = nl.ndarray((n, m), dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    nl.store(out_pe, nisa.nc_transpose(x, engine=nisa.tensor_engine))
    nl.store(out_ve, nisa.nc_transpose(x, engine=nisa.vector_engine))
    i_p, i_f = nl.mgrid[0:n, 0:m]
    nl.store(out_iota, nisa.iota(3 + 2 * i_p - i_f, dtype=nl.int32))
    nl.store(out_mem, nisa.memset(shape=(n, m), value=0.5, dtype=nl.float32))
    nl.store(out_causal, nisa.affine_select(pred=(i_f <= i_p), on_true_tile=x, on_false_value=-9.0))
    return out_pe, out_ve, out_iota, out_mem, out_causal


def test_transposes_iota_memset_and_affine_select():
    a = rand(8, 8)
    pe, ve, iota, mem, causal = transposes_and_constants(a)
    np.testing.assert_array_equal(pe, a.T)
    np.testing.assert_array_equal(ve, a.T)
    np.testing.assert_array_equal(iota, 3 + 2 * np.arange(8)[:, None] - np.arange(8)[None, :])
    np.testing.assert_array_equal(mem, np.full((8, 8), 0.5, np.float32))
    np.testing.assert_array_equal(causal, np.where(np.tri(8, dtype=bool), a, -9.0))


@nki.jit
def selections(a, pred, bound):
    n, m = a.shape
    outs = [nl.ndarray((n, m), dtype=nl.float32, buffer=nl.shared_hbm) for _ in range(3)]
    maxima = [nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.shared_hbm) for _ in range(2)]
    x, p, b = nl.load(a), nl.load(pred), nl.load(bound)
    red = nl.ndarray((n, 1), dtype=nl.float32)
    dst = nl.ndarray((n, m), dtype=nl.float32)
    nisa.select_reduce(
        dst=dst,
        predicate=p,
        on_true=x,
        on_false=-1.0,
        reduce_res=red,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
        reduce_op=nl.max,
    )
    nl.store(outs[0], dst)
    nl.store(maxima[0], red)
    red2 = nl.ndarray((n, 1), dtype=nl.float32)
    zero = nl.zeros((n, 1), dtype=nl.float32)
    selected = nisa.range_select(
        on_true_tile=x,
        comp_op0=np.greater_equal,
        comp_op1=np.less,
        bound0=zero,
        bound1=b,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
        reduce_res=red2,
        range_start=2,
    )
    nl.store(outs[1], selected)
    nl.store(maxima[1], red2)
    cum = nl.ndarray((n, m), dtype=nl.float32)
    nisa.tensor_scalar_cumulative(src=x, dst=cum, op0=nl.multiply, op1=nl.add, imm0=2.0)
    nl.store(outs[2], cum)
    return (*outs, *maxima)


@pytest.mark.parametrize("pred_dtype", [np.uint8, np.bool_])
def test_selection_and_cumulative_instructions(pred_dtype):
    a = rand(8, 12)
    pred = (rand(8, 12) > 0.5).astype(pred_dtype)
    bound = np.arange(8, dtype=np.float32)[:, None] + 4
    sel, rng_sel, cum, sel_max, rng_max = selections(a, pred, bound)
    np.testing.assert_array_equal(sel, np.where(pred != 0, a, -1.0))
    np.testing.assert_array_equal(sel_max, np.where(pred != 0, a, -1.0).max(1, keepdims=True))
    index = 2 + np.arange(12)[None, :]
    fill = np.finfo(np.float32).min
    expected = np.where((index >= 0) & (index < bound), a, fill)
    np.testing.assert_array_equal(rng_sel, expected)
    np.testing.assert_array_equal(rng_max, expected.max(1, keepdims=True))
    np.testing.assert_allclose(cum, np.cumsum(2 * a, axis=1), rtol=1e-6)


@nki.jit
def match_and_shuffle(a):
    n, m = a.shape
    replaced = nl.ndarray((n, m), dtype=a.dtype, buffer=nl.shared_hbm)
    where = nl.ndarray((n, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    found = nl.ndarray((n, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    shuffled = nl.ndarray((n, m), dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    top = nisa.max8(src=x)
    idx = nl.ndarray((n, 8), dtype=nl.uint32)
    nl.store(replaced, nisa.nc_match_replace8(data=x, vals=top, imm=-1.0, dst_idx=idx))
    nl.store(where, idx)
    nl.store(found, nisa.nc_find_index8(data=x, vals=top))
    out = nl.ndarray((n, m), dtype=a.dtype)
    nisa.nc_stream_shuffle(src=x, dst=out, shuffle_mask=[(i + 1) % 32 for i in range(32)])
    nl.store(shuffled, out)
    return replaced, where, found, shuffled


def test_max8_match_replace_find_index_and_stream_shuffle():
    a = rand(64, 20)
    replaced, where, found, shuffled = match_and_shuffle(a)
    order = np.argsort(-a, axis=1)[:, :8]
    np.testing.assert_array_equal(where, order)
    np.testing.assert_array_equal(found, order)
    expected = a.copy()
    np.put_along_axis(expected, order, -1.0, axis=1)
    np.testing.assert_array_equal(replaced, expected)
    source = np.arange(64).reshape(2, 32)
    np.testing.assert_array_equal(shuffled, a[np.roll(source, -1, axis=1).reshape(-1)])


@nki.jit
def gathers(data, index, seg):
    n = data.shape[0]
    local = nl.ndarray((n, 8 * 2), dtype=data.dtype, buffer=nl.shared_hbm)
    flat = nl.ndarray((n, 4), dtype=data.dtype, buffer=nl.shared_hbm)
    bounds = nl.ndarray((1, 2, seg.shape[1]), dtype=seg.dtype, buffer=nl.shared_hbm)
    x = nl.load(data)
    idx = nl.load(index)
    nl.store(local, nisa.local_gather(x, idx, num_elem_per_idx=2, num_valid_indices=8))
    picks = nisa.iota(nl.arange(4)[None, :] * 3 + 0 * nl.arange(n)[:, None], dtype=nl.uint32)
    nl.store(flat, nl.gather_flattened(data=x, indices=picks))
    nl.store(bounds, nisa.sequence_bounds(segment_ids=nl.load(seg)))
    return local, flat, bounds


def test_gather_instructions_and_sequence_bounds():
    data = rand(16, 10)
    index = (np.arange(16 * 2).reshape(2, 16).T % 5 * 2).astype(np.uint16)
    seg = np.array([[0, 1, 1, 2, 2, 2, 0, 3]], dtype=np.float32)
    local, flat, bounds = gathers(data, index, seg)
    starts = index.T.reshape(-1)[:8]
    expected = np.stack([data[:, s : s + 2] for s in starts], axis=1).reshape(16, 16)
    np.testing.assert_array_equal(local, expected)
    np.testing.assert_array_equal(flat, data[:, [0, 3, 6, 9]])
    np.testing.assert_array_equal(bounds[0, 0], [8, 1, 1, 3, 3, 3, 8, 7])
    np.testing.assert_array_equal(bounds[0, 1], [-1, 3, 3, 6, 6, 6, -1, 8])


@nki.jit
def dropouts(a):
    kept = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    dropped = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    nl.store(kept, nisa.dropout(x, prob=0.0))
    nl.store(dropped, nl.dropout(x, rate=1.0))
    return kept, dropped


def test_dropout_probability_extremes():
    a = rand(8, 8) + 1
    kept, dropped = dropouts(a)
    np.testing.assert_array_equal(kept, a)
    np.testing.assert_array_equal(dropped, np.zeros_like(a))


# ---- DMA: indirect, read-modify-write, transposes ------------------------------------------
@nki.jit
def gather_rows(a, mode):
    n, m = a.shape
    out = nl.ndarray((n // 2, m), dtype=a.dtype, buffer=nl.shared_hbm)
    idx = nisa.iota(3 * nl.arange(n // 2)[:, None], dtype=np.int32)
    tile = nisa.memset(shape=(n // 2, m), value=-1, dtype=a.dtype)
    i_f = nl.arange(m)[None, :]
    nisa.dma_copy(dst=tile, src=a[idx, i_f], oob_mode=mode)
    nl.store(out, tile)
    return out


def test_indirect_dma_gathers_rows_and_handles_out_of_bounds():
    a = rand(16, 4)
    out = gather_rows(a, nisa.oob_mode.skip)
    rows = 3 * np.arange(8)
    np.testing.assert_array_equal(out[rows < 16], a[rows[rows < 16]])
    assert (out[rows >= 16] == -1).all()
    with pytest.raises(IndexError, match="index 72 is out of bounds for axis 0 with size 64"):
        gather_rows(a, nisa.oob_mode.error)


@nki.jit
def scatter_add(a, idx):
    out = nl.ndarray((2 * a.shape[0], a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, 1.0)
    rows = nl.load(idx)
    i_f = nl.arange(a.shape[1])[None, :]
    nisa.dma_copy(dst=out[rows, i_f], src=nl.load(a), dst_rmw_op=np.add)
    nl.atomic_rmw(out[rows, i_f], value=nl.load(a), op=np.multiply)
    return out


def test_indirect_store_with_read_modify_write():
    a = rand(8, 6)
    idx = (2 * np.arange(8, dtype=np.int32))[:, None]
    expected = np.ones((16, 6), np.float32)
    expected[idx[:, 0]] = (expected[idx[:, 0]] + a) * a
    np.testing.assert_allclose(scatter_add(a, idx), expected, rtol=1e-6)


@nki.jit
def gather_planes(src, idx):
    rows = nl.load(idx)
    iy = nl.arange(src.shape[1])[None, :, None]
    iz = nl.arange(src.shape[2])[None, None, :]
    out = nl.ndarray((idx.shape[0],) + src.shape[1:], dtype=src.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(src[rows, iy, iz]))
    return out


def test_tile_of_indices_selects_one_row_per_partition():
    src = rand(20, 3, 5)
    idx = np.array([[7], [0], [19], [7]], dtype=np.int32)
    np.testing.assert_array_equal(gather_planes(src, idx), src[idx[:, 0]])


def test_tile_valued_indices_stay_refused_in_new_api_kernels():
    new_nl = new_nki.language
    data = new_nl.zeros((4, 8), dtype=new_nl.float32)
    rows = new_nl.zeros((4, 1), dtype=new_nl.int32)
    with pytest.raises(new_nki.NkiValidationError, match="tensor-valued"):
        data[rows, 0]


@nki.jit
def dma_transposes(a):
    out = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.hbm)
    again = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.hbm)
    nl.store(out, nisa.dma_transpose(a))
    nl.store(again, nl.load_transpose2d(a))
    return out, again


def test_dma_transposes_and_private_hbm_outputs():
    a = rand(12, 32).astype(np.float16)
    out, again = dma_transposes(a)
    np.testing.assert_array_equal(out, a.T)
    np.testing.assert_array_equal(again, a.T)


# ---- block dimensions, buffers, outputs ------------------------------------------------------
@nki.jit
def block_exp(a):
    b, n, m = a.shape
    loaded = nl.ndarray((b, nl.par_dim(n), m), dtype=a.dtype, buffer=nl.sbuf)
    out = nl.ndarray((b, nl.par_dim(n), m), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(b):
        loaded[i] = nl.load(a[i])
    for i in nl.affine_range(b):
        nl.store(out[i], nl.exp(loaded[i]))
    return out


def test_block_dimensions_hold_one_tile_per_index():
    a = rand(3, 16, 8)
    np.testing.assert_allclose(block_exp(a), np.exp(a), rtol=1e-6)


@nki.jit
def many_psum_blocks(a):
    out = nl.ndarray((16, a.shape[1], a.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((16, nl.par_dim(a.shape[1]), 512), dtype=nl.float32, buffer=nl.psum)
    x = nl.load(a)
    for i in nl.affine_range(16):
        acc[i, :, 0 : a.shape[1]] = nisa.nc_matmul(x, x)
    for i in nl.affine_range(16):
        nl.store(out[i], acc[i, :, 0 : a.shape[1]])
    return out


def test_psum_block_tensor_is_charged_as_one_tile():
    # 16 blocks of a full 2 KiB bank would be 16 banks; PSUM has 8.
    a = rand(32, 32)
    out = many_psum_blocks(a)
    np.testing.assert_allclose(out, np.broadcast_to(a.T @ a, (16, 32, 32)), rtol=1e-5)


@nki.jit
def accumulate_into_fresh_psum(a):
    n = a.shape[0]
    out = nl.ndarray((2, n, n), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((2, nl.par_dim(n), n), dtype=nl.float32, buffer=nl.psum)
    x = nl.load(a)
    for blk in nl.affine_range(2):
        for _ in nl.affine_range(blk + 2):
            acc[blk] += nisa.nc_matmul(x, x)
        nl.store(out[blk], acc[blk])
    return out


def test_psum_plus_equals_matmul_starts_a_fresh_accumulation():
    a = rand(16, 16)
    out = accumulate_into_fresh_psum(a)
    np.testing.assert_allclose(out[0], 2 * a.T @ a, rtol=1e-5)
    np.testing.assert_allclose(out[1], 3 * a.T @ a, rtol=1e-5)


@nki.jit
def whole_block_tensor(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    blocks = nl.zeros((2, nl.par_dim(a.shape[0]), a.shape[1]), dtype=a.dtype)
    nl.store(out, nl.exp(blocks))
    return out


def test_block_tensors_must_be_indexed_to_get_a_tile():
    with pytest.raises(nki.NkiValidationError, match="block dimensions"):
        whole_block_tensor(rand(4, 4))


@nki.jit
def direct_allocation(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t[...] = nl.load(a)
    p = nl.ndarray(a.shape, dtype=nl.float32, buffer=ncc.psum.alloc(lambda *idx: (0, 0, 0)))
    p[...] = nisa.tensor_copy(t)
    nl.store(out, p)
    return out


def test_direct_allocations_select_the_memory():
    a = rand(8, 16)
    np.testing.assert_array_equal(direct_allocation(a), a)


@nki.jit
def returns_a_tile(a):
    return nl.add(nl.load(a), 1.0)


def test_returned_on_chip_tiles_are_copied_out():
    a = rand(4, 6)
    np.testing.assert_allclose(returns_a_tile(a), a + 1, rtol=1e-6)
    np.testing.assert_allclose(nki.simulate_kernel(returns_a_tile, a), a + 1, rtol=1e-6)


@nki.jit
def broadcast_rows(a):
    out = nl.ndarray((8, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a).broadcast_to((8, a.shape[1])))
    return out


def test_tile_broadcast_across_partitions_copies_in_old_kernels():
    a = rand(1, 5)
    np.testing.assert_array_equal(broadcast_rows(a), np.repeat(a, 8, axis=0))
    t = new_nki.language.zeros((1, 5), dtype=new_nki.language.float32)
    with pytest.raises(new_nki.NkiValidationError, match="partition dimension"):
        t.broadcast_to((8, 5))


# ---- kernels: SPMD grids, modes, benchmark, typing -----------------------------------------
@nki.jit
def spmd_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ix = nl.program_id(0) * 32 + nl.arange(32)[:, None]
    iy = nl.program_id(1) * 16 + nl.arange(16)[None, :]
    nl.store(out[ix, iy], value=nl.load(a[ix, iy]) + nl.load(b[ix, iy]))
    return out


@pytest.mark.parametrize(
    "grid",
    [(4, 2), (nl.spmd_dim(nl.nc(2), 2), 2), (nl.nc(2) * 2, 2), (2 * nl.nc(2), 2)],
    ids=["plain", "spmd_dim", "nc_times", "times_nc"],
)
def test_spmd_grids_with_neuron_core_annotations(grid):
    a, b = rand(128, 32), rand(128, 32)
    np.testing.assert_allclose(spmd_add[grid](a, b), a + b, rtol=1e-6)


def test_jit_modes_and_rewrapping():
    a = rand(128, 16)
    for mode in ("simulation", "baremetal", "auto", "torchxla", "jax"):
        kernel = nki.jit(tiled_exp, mode=mode, platform_target="trn2")
        np.testing.assert_allclose(kernel(a), np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(nki.baremetal(tiled_exp)(a), np.exp(a), rtol=1e-6)
    with pytest.raises(ValueError, match="mode must be one of"):
        nki.jit(tiled_exp, mode="hardware")


def test_benchmark_reports_the_cost_model_estimate():
    a = rand(250, 64)
    bench = nki.benchmark(warmup=5, iters=10, save_neff_name="file.neff")(ragged_exp)
    np.testing.assert_allclose(bench(a), np.exp(a), rtol=1e-6)
    latency = bench.benchmark_result.nc_latency.get_latency_percentile(50)
    assert latency == pytest.approx(new_nki.estimate(ragged_exp, a).latency_us)
    profiled = nki.profile(working_directory="/nonexistent", profile_nth=2)(ragged_exp)
    profiled(tensor[[250, 64], nl.float32])
    assert profiled.benchmark_result.nc_latency.get_latency_percentile(99) == latency
    by_mode = nki.jit(ragged_exp, mode="benchmark")
    np.testing.assert_allclose(by_mode(a), np.exp(a), rtol=1e-6)
    assert by_mode.benchmark_result.nc_latency.latency_us == latency


def test_data_types_are_numpy_types():
    assert np.arange(3, dtype=nl.uint16).dtype == np.uint16
    assert nl.fp32.min == np.finfo(np.float32).min
    assert nl.finfo(nl.float16).max == 65504
    assert nl.bfp16.max == float(np.float32(3.3895314e38))


def test_typing_annotations():
    assert tensor[128, 512].shape == (128, 512)
    spec = tensor[[250, 512], nl.float32]
    assert spec.shape == (250, 512) and spec.dtype is np.float32
    assert mutable_tensor[[4, 8], nl.float32] == tensor[[4, 8], nl.float32]


@nki.jit
def double_into(a, out: mutable_tensor):
    """Writes through an argument annotated as mutable (as nki-library's router_topk does)."""
    nl.store(out, nl.multiply(nl.load(a), 2.0))
    return out


def test_mutable_tensor_argument_is_written_in_place():
    a, out = rand(16, 8), np.zeros((16, 8), np.float32)
    double_into(a, out)
    np.testing.assert_allclose(out, 2 * a, rtol=1e-6)


def test_simulate_kernel_writes_output_arguments():
    @nki.trace
    def partition_sum(a, out):
        nl.store(out, nisa.tensor_partition_reduce(np.add, nl.load(a)))

    a, out = rand(64, 4, 3), np.zeros((1, 4, 3), np.float32)
    nki.simulate_kernel(partition_sum, a, out)
    np.testing.assert_allclose(out, a.sum(axis=0, keepdims=True), rtol=1e-5)
