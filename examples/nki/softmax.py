"""Row softmax: max on the Vector engine, exp with a fused row sum on the Scalar engine."""

import torch

import nki
import nki.isa as nisa
import nki.language as nl

P = 128


@nki.jit
def softmax(x):
    """Softmax over the last dim of x [N, D]."""
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for start in range(0, n, P):
        rows = min(P, n - start)
        x_tile = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile[:rows], src=x[start : start + rows])
        neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max[:rows], op=nl.max, data=x_tile[:rows], axis=1, negate=True)
        exps = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(
            dst=exps[:rows],
            op=nl.exp,
            data=x_tile[:rows],
            bias=neg_max[:rows],
            reduce_op=nl.add,
            reduce_res=total[:rows],
        )
        inv = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[:rows], data=total[:rows])
        y = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[:rows], data=exps[:rows], op0=nl.multiply, operand0=inv[:rows])
        nisa.dma_copy(dst=out[start : start + rows], src=y[:rows])
    return out


def reference(x):
    """Torch reference, computed in fp32."""
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def main():
    x = torch.randn(200, 1000) * 4
    print(f"softmax max abs error: {(softmax(x) - reference(x)).abs().max().item():.3g}")
    print(nki.estimate(softmax, x))


if __name__ == "__main__":
    main()
