"""Tensor addition: tiles of [128, 512] moved by DMA and added on the Vector engine."""

import torch

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def tensor_add(a, b):
    """``a + b`` for [M, N] inputs, M a multiple of 128 and N of 512."""
    assert a.shape == b.shape and a.dtype == b.dtype
    rows, cols = a.shape
    tile_m, tile_n = nl.tile_size.pmax, 512
    assert rows % tile_m == 0 and cols % tile_n == 0
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(rows // tile_m):
        for n in nl.affine_range(cols // tile_n):
            window = (slice(m * tile_m, (m + 1) * tile_m), slice(n * tile_n, (n + 1) * tile_n))
            a_tile = nl.ndarray((tile_m, tile_n), dtype=a.dtype, buffer=nl.sbuf)
            b_tile = nl.ndarray((tile_m, tile_n), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_tile, src=a[window])
            nisa.dma_copy(dst=b_tile, src=b[window])
            total = nl.ndarray((tile_m, tile_n), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=total, data1=a_tile, data2=b_tile, op=nl.add)
            nisa.dma_copy(dst=out[window], src=total)
    return out


def reference(a, b):
    """Torch reference."""
    return a + b


def main():
    a, b = torch.randn(256, 1024), torch.randn(256, 1024)
    err = (tensor_add(a, b) - reference(a, b)).abs().max().item()
    print(f"tensor_add max abs error: {err:.3g}")
    print(nki.estimate(tensor_add, a, b))


if __name__ == "__main__":
    main()
