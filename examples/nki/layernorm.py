"""LayerNorm with bn_stats over 512-wide chunks and bn_aggr for the row mean and variance."""

import torch

import nki
import nki.isa as nisa
import nki.language as nl

P = 128


@nki.jit
def layernorm(x, gamma, beta, eps):
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over the last dim of x [N, D]."""
    n, d = x.shape
    fmax = nl.tile_size.bn_stats_fmax
    chunks = [(c, min(fmax, d - c)) for c in range(0, d, fmax)]
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    g_tile = nl.ndarray((P, d), dtype=gamma.dtype, buffer=nl.sbuf)
    b_tile = nl.ndarray((P, d), dtype=beta.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g_tile, src=gamma.reshape((1, d)).broadcast(0, P))
    nisa.dma_copy(dst=b_tile, src=beta.reshape((1, d)).broadcast(0, P))
    for start in range(0, n, P):
        rows = min(P, n - start)
        x_tile = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile[:rows], src=x[start : start + rows])
        stats = nl.ndarray((P, 6 * len(chunks)), dtype=nl.float32, buffer=nl.sbuf)
        for i, (c, size) in enumerate(chunks):
            nisa.bn_stats(dst=stats[:rows, 6 * i : 6 * i + 6], data=x_tile[:rows, c : c + size])
        moments = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=moments[:rows], data=stats[:rows])
        rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd[:rows], data=moments[:rows, 1:2], op0=nl.add, operand0=eps)
        nisa.activation(dst=rstd[:rows], op=nl.rsqrt, data=rstd[:rows])
        normed = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=normed[:rows],
            data=x_tile[:rows],
            op0=nl.subtract,
            operand0=moments[:rows, 0:1],
            op1=nl.multiply,
            operand1=rstd[:rows],
        )
        scaled = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(
            dst=scaled[:rows], data1=normed[:rows], data2=g_tile[:rows], op=nl.multiply
        )
        y = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=y[:rows], data1=scaled[:rows], data2=b_tile[:rows], op=nl.add)
        nisa.dma_copy(dst=out[start : start + rows], src=y[:rows])
    return out


def reference(x, gamma, beta, eps):
    """Torch reference, computed in fp32."""
    y = torch.nn.functional.layer_norm(x.float(), x.shape[-1:], gamma.float(), beta.float(), eps)
    return y.to(x.dtype)


def main():
    x = torch.randn(300, 1200) * 3 + 1
    gamma, beta = torch.randn(1200), torch.randn(1200)
    err = (layernorm(x, gamma, beta, 1e-5) - reference(x, gamma, beta, 1e-5)).abs().max().item()
    print(f"layernorm max abs error: {err:.3g}")
    print(nki.estimate(layernorm, x, gamma, beta, 1e-5))


if __name__ == "__main__":
    main()
