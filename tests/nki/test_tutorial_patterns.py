"""The kernel patterns of AWS's public NKI tutorials, written in the NKI 0.7 style (own code)."""

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl


# ---- tensor addition -------------------------------------------------------------------------
@nki.jit
def add_one_tile(a_ptr, b_ptr):
    a = nl.load(a_ptr)
    b = nl.load(b_ptr)
    result = nl.add(a, b)
    out = nl.ndarray(a_ptr.shape, dtype=a_ptr.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=result)
    return out


@nki.jit
def add_tiled(a_input, b_input):
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    M, N = a_input.shape
    TILE_M, TILE_N = 128, 512
    assert M % TILE_M == 0 and N % TILE_N == 0
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            rows = nl.ds(m * TILE_M, TILE_M)
            cols = nl.ds(n * TILE_N, TILE_N)
            a_tile = nl.ndarray((TILE_M, TILE_N), dtype=a_input.dtype, buffer=nl.sbuf)
            b_tile = nl.ndarray((TILE_M, TILE_N), dtype=b_input.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_tile, src=a_input[rows, cols])
            nisa.dma_copy(dst=b_tile, src=b_input[rows, cols])
            c_tile = nl.ndarray((TILE_M, TILE_N), dtype=a_input.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.add)
            nisa.dma_copy(dst=c_output[rows, cols], src=c_tile)
    return c_output


@nki.jit
def add_spmd(a_input, b_input):
    """One [128, 512] tile per program of a 2-D launch grid."""
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    rows = nl.ds(nl.program_id(0) * 128, 128)
    cols = nl.ds(nl.program_id(1) * 512, 512)
    a_tile = nl.load(a_input[rows, cols])
    b_tile = nl.load(b_input[rows, cols])
    nl.store(c_output[rows, cols], value=nl.add(a_tile, b_tile))
    return c_output


def test_tensor_add_quickstart_with_nki_simulate():
    a = np.random.rand(128, 512).astype(np.float32)
    b = np.random.rand(128, 512).astype(np.float32)
    result = nki.simulate(add_one_tile)(a, b)
    np.testing.assert_allclose(result, a + b, rtol=1e-5)


def test_tensor_add_tiled_dma_copy_and_tensor_tensor():
    a, b = torch.randn(256, 1024, dtype=torch.float16), torch.randn(256, 1024, dtype=torch.float16)
    assert torch.equal(add_tiled(a, b), a + b)


def test_tensor_add_spmd_grid():
    a = np.random.rand(256, 1024).astype(np.float32)
    b = np.random.rand(256, 1024).astype(np.float32)
    np.testing.assert_array_equal(add_spmd[2, 2](a, b), a + b)


# ---- matrix multiplication -------------------------------------------------------------------
@nki.jit
def matmul_basic(lhsT, rhs):
    K, M = lhsT.shape
    K_, N = rhs.shape
    assert K == K_ == 128 and M == 64 and N == 512
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    lhs_tile = nl.ndarray(lhsT.shape, dtype=lhsT.dtype, buffer=nl.sbuf)
    rhs_tile = nl.ndarray(rhs.shape, dtype=rhs.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=lhs_tile, src=lhsT)
    nisa.dma_copy(dst=rhs_tile, src=rhs)
    result_psum = nl.ndarray(result.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(result_psum, lhs_tile, rhs_tile)
    result_sbuf = nl.ndarray(result_psum.shape, dtype=result.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=result_sbuf, src=result_psum)
    nisa.dma_copy(dst=result, src=result_sbuf)
    return result


def _tiles():
    return nl.tile_size.gemm_stationary_fmax, nl.tile_size.pmax, nl.tile_size.gemm_moving_fmax


@nki.jit
def matmul_tiled(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    TILE_M, TILE_K, TILE_N = _tiles()
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            res_psum = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                k_rows = nl.ds(k * TILE_K, TILE_K)
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[k_rows, nl.ds(m * TILE_M, TILE_M)])
                nisa.dma_copy(dst=rhs_tile, src=rhs[k_rows, nl.ds(n * TILE_N, TILE_N)])
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tile, moving=rhs_tile)
            res_sb = nl.ndarray(res_psum.shape, dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            out_view = result[nl.ds(m * TILE_M, TILE_M), nl.ds(n * TILE_N, TILE_N)]
            nisa.dma_copy(dst=out_view, src=res_sb)
    return result


@nki.jit
def matmul_hoisted(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    TILE_M, TILE_K, TILE_N = _tiles()
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        lhsT_tiles = []
        for k in nl.affine_range(K // TILE_K):
            t = nl.ndarray(shape=(TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(
                dst=t, src=lhsT[k * TILE_K : (k + 1) * TILE_K, m * TILE_M : (m + 1) * TILE_M]
            )
            lhsT_tiles.append(t)
        for n in nl.affine_range(N // TILE_N):
            rhs_tiles = []
            for k in nl.affine_range(K // TILE_K):
                t = nl.ndarray(shape=(TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(
                    dst=t, src=rhs[k * TILE_K : (k + 1) * TILE_K, n * TILE_N : (n + 1) * TILE_N]
                )
                rhs_tiles.append(t)
            res_psum = nl.ndarray(shape=(TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tiles[k], moving=rhs_tiles[k])
            res_sb = nl.ndarray(shape=(TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(
                dst=result[m * TILE_M : (m + 1) * TILE_M, n * TILE_N : (n + 1) * TILE_N], src=res_sb
            )
    return result


@nki.jit
def matmul_blocked(lhsT, rhs, BLOCK_TILES_M=2, BLOCK_TILES_N=2):
    K, M = lhsT.shape
    _, N = rhs.shape
    TILE_M, TILE_K, TILE_N = _tiles()
    BLOCK_M, BLOCK_N = TILE_M * BLOCK_TILES_M, TILE_N * BLOCK_TILES_N
    assert M % BLOCK_M == 0 and N % BLOCK_N == 0
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // BLOCK_M):
        lhsT_block = []
        for bm in nl.affine_range(BLOCK_TILES_M):
            col = (m * BLOCK_TILES_M + bm) * TILE_M
            column = []
            for k in nl.affine_range(K // TILE_K):
                t = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=lhsT[k * TILE_K : (k + 1) * TILE_K, col : col + TILE_M])
                column.append(t)
            lhsT_block.append(column)
        for n in nl.affine_range(N // BLOCK_N):
            rhs_block = []
            for bn in nl.affine_range(BLOCK_TILES_N):
                col = (n * BLOCK_TILES_N + bn) * TILE_N
                column = []
                for k in nl.affine_range(K // TILE_K):
                    t = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=t, src=rhs[k * TILE_K : (k + 1) * TILE_K, col : col + TILE_N])
                    column.append(t)
                rhs_block.append(column)
            for bm in nl.affine_range(BLOCK_TILES_M):
                for bn in nl.affine_range(BLOCK_TILES_N):
                    acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(K // TILE_K):
                        nisa.nc_matmul(
                            dst=acc, stationary=lhsT_block[bm][k], moving=rhs_block[bn][k]
                        )
                    out_tile = nl.ndarray(acc.shape, dtype=result.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=out_tile, src=acc)
                    row0 = (m * BLOCK_TILES_M + bm) * TILE_M
                    col0 = (n * BLOCK_TILES_N + bn) * TILE_N
                    nisa.dma_copy(
                        dst=result[row0 : row0 + TILE_M, col0 : col0 + TILE_N], src=out_tile
                    )
    return result


def _mm_inputs(k, m, n, dtype=torch.float32):
    return (torch.randn(k, m) / k**0.5).to(dtype), torch.randn(k, n).to(dtype)


def test_matmul_basic():
    lhsT, rhs = _mm_inputs(128, 64, 512)
    torch.testing.assert_close(matmul_basic(lhsT, rhs), lhsT.T @ rhs, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "kernel",
    [matmul_tiled, matmul_hoisted, matmul_blocked],
    ids=["tiled", "hoisted_loads", "blocked_free_dim"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matmul_variants(kernel, dtype):
    lhsT, rhs = _mm_inputs(256, 256, 1024, dtype)
    expected = (lhsT.float().T @ rhs.float()).to(dtype)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(
        kernel(lhsT, rhs).to(dtype).float(), expected.float(), atol=tol, rtol=tol
    )


def test_hoisting_reduces_the_estimated_dma_traffic():
    lhsT, rhs = _mm_inputs(512, 512, 1024, torch.bfloat16)
    tiled = nki.estimate(matmul_tiled, lhsT, rhs)
    hoisted = nki.estimate(matmul_hoisted, lhsT, rhs)
    assert hoisted.dma_bytes < tiled.dma_bytes and hoisted.latency_us < tiled.latency_us


# ---- transpose2d (free-axis transpose with nl.ds) ----------------------------------------------
@nki.jit
def transpose2d(in_tensor, shape2D):
    """Each row holds a flattened [F1, F2] matrix; write it back as [F2, F1]."""
    sz_p, _ = in_tensor.shape
    sz_f1, sz_f2 = shape2D
    out_tensor = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    in_tile = nl.load(in_tensor)
    out_tile = nl.ndarray((sz_p, sz_f2 * sz_f1), dtype=out_tensor.dtype, buffer=nl.sbuf)
    src = in_tile.reshape((sz_p, sz_f1, sz_f2))
    dst = out_tile.reshape((sz_p, sz_f2, sz_f1))
    for i_f1 in nl.affine_range(sz_f1):
        # row i_f1 of the input becomes column i_f1 of the output
        nisa.tensor_copy(dst=dst[:, :, nl.ds(i_f1, 1)], src=src[:, nl.ds(i_f1, 1), :])
    nl.store(out_tensor, value=out_tile)
    return out_tensor


def test_transpose2d_with_ds():
    P, X, Y = 5, 3, 4
    a = np.arange(P * X * Y, dtype=np.int8).reshape((P, X * Y))
    expected = np.transpose(a.reshape(P, X, Y), (0, 2, 1)).reshape(P, X * Y)
    np.testing.assert_array_equal(transpose2d(a, (X, Y)), expected)


# ---- average pool through an .ap() access pattern ------------------------------------------------
@nki.jit
def avgpool2d(in_tensor, pool_size):
    sz_cin, sz_hin, sz_win = in_tensor.shape
    sz_pool = pool_size
    out_tensor = nl.ndarray(
        (sz_cin, sz_hin // sz_pool, sz_win // sz_pool), dtype=in_tensor.dtype, buffer=nl.shared_hbm
    )
    in_tile = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=in_tile, src=in_tensor)
    # [C, H/pool, W/pool, pool, pool]: window dims last so they can be reduced.
    windows = in_tile.ap(
        [
            [sz_hin * sz_win, sz_cin],
            [sz_pool * sz_win, sz_hin // sz_pool],
            [sz_pool, sz_win // sz_pool],
            [sz_win, sz_pool],
            [1, sz_pool],
        ]
    )
    sums = nl.sum(windows, axis=[3, 4])
    out_tile = nl.ndarray(sums.shape, dtype=sums.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=out_tile, data=sums, op0=nl.multiply, operand0=1.0 / (sz_pool * sz_pool))
    nisa.dma_copy(dst=out_tensor, src=out_tile)
    return out_tensor


def test_average_pool_via_access_pattern():
    C, H, W, pool = 2, 6, 6, 2
    x = np.arange(C * H * W, dtype=np.float16).reshape(C, H, W)
    expected = np.nanmean(x.reshape(C, H // pool, pool, W // pool, pool), axis=(2, 4))
    np.testing.assert_array_equal(avgpool2d(x, pool), expected)
    big = torch.randn(96, 32, 48)
    torch.testing.assert_close(avgpool2d(big, 4), torch.nn.functional.avg_pool2d(big, 4))


# ---- legacy conveniences still found in public kernels ------------------------------------------
def test_numpy_functions_as_operators():
    @nki.jit
    def exp_kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.activation(dst=r, op=np.exp, data=t)
        nl.store(out, r)
        return out

    x = np.random.rand(8, 8).astype(np.float32)
    np.testing.assert_allclose(exp_kernel(x), np.exp(x), rtol=1e-6)
