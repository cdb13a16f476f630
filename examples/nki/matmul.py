"""Tiled matrix multiplication: PSUM accumulation over K, lhsT tiles hoisted out of the N loop."""

import torch

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def matmul_tiled(lhsT, rhs):
    """``lhsT.T @ rhs`` for lhsT [K, M] and rhs [K, N] (K, M multiples of 128, N of 512)."""
    k_size, m_size = lhsT.shape
    k_rhs, n_size = rhs.shape
    assert k_size == k_rhs, "contraction dims differ"
    tile_k = nl.tile_size.pmax
    tile_m = nl.tile_size.gemm_stationary_fmax
    tile_n = nl.tile_size.gemm_moving_fmax
    assert k_size % tile_k == 0 and m_size % tile_m == 0 and n_size % tile_n == 0
    result = nl.ndarray((m_size, n_size), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_size // tile_m):
        # The stationary column block is reused for every N tile, so load it once.
        lhs_tiles = []
        for k in nl.affine_range(k_size // tile_k):
            tile = nl.ndarray((tile_k, tile_m), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(
                dst=tile, src=lhsT[k * tile_k : (k + 1) * tile_k, m * tile_m : (m + 1) * tile_m]
            )
            lhs_tiles.append(tile)
        for n in nl.affine_range(n_size // tile_n):
            acc = nl.ndarray((tile_m, tile_n), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_size // tile_k):
                rhs_tile = nl.ndarray((tile_k, tile_n), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(
                    dst=rhs_tile,
                    src=rhs[k * tile_k : (k + 1) * tile_k, n * tile_n : (n + 1) * tile_n],
                )
                # accumulate=None: the first matmul into fresh PSUM overwrites, later ones add.
                nisa.nc_matmul(dst=acc, stationary=lhs_tiles[k], moving=rhs_tile)
            out_tile = nl.ndarray((tile_m, tile_n), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out_tile, src=acc)
            nisa.dma_copy(
                dst=result[m * tile_m : (m + 1) * tile_m, n * tile_n : (n + 1) * tile_n],
                src=out_tile,
            )
    return result


def reference(lhsT, rhs):
    """Torch reference (fp32 accumulation, cast to the input dtype)."""
    return (lhsT.float().T @ rhs.float()).to(lhsT.dtype)


def main():
    k, m, n = 1024, 512, 1024
    lhsT = torch.randn(k, m, dtype=torch.bfloat16) / k**0.5
    rhs = torch.randn(k, n, dtype=torch.bfloat16)
    err = (matmul_tiled(lhsT, rhs).float() - reference(lhsT, rhs).float()).abs().max().item()
    print(f"matmul_tiled bf16 [{k}x{m}]^T @ [{k}x{n}] max abs error: {err:.3g}")
    for target in ("trn2", "trn3"):
        print(nki.estimate(matmul_tiled, lhsT, rhs, target=target))


if __name__ == "__main__":
    main()
