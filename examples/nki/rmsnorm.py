"""RMSNorm forward and backward kernels, registered for PyTorch training with nki_op."""

import torch

import nki
import nki.isa as nisa
import nki.language as nl
from nki.torch_integration import nki_op

P = 128


def _row_tiles(n_rows):
    """(start, rows) of each partition tile covering ``n_rows`` rows; the last may be short."""
    return [(start, min(P, n_rows - start)) for start in range(0, n_rows, P)]


def _broadcast_rows(vec, dtype):
    """Load a [D] HBM vector into every partition of a [128, D] SBUF tile (stride-0 DMA source)."""
    (d,) = vec.shape
    tile = nl.ndarray((P, d), dtype=dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=vec.reshape((1, d)).broadcast(0, P))
    return tile


def _rstd(x_tile, rows, d, eps):
    """Per-row ``1 / sqrt(mean(x^2) + eps)`` as a [128, 1] fp32 tile."""
    squares = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
    ssq = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(
        dst=squares[:rows],
        op=nl.square,
        data=x_tile[:rows],
        reduce_op=nl.add,
        reduce_res=ssq[:rows],
    )
    rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(
        dst=rstd[:rows],
        data=ssq[:rows],
        op0=nl.multiply,
        operand0=1.0 / d,
        op1=nl.add,
        operand1=eps,
    )
    nisa.activation(dst=rstd[:rows], op=nl.rsqrt, data=rstd[:rows])
    return rstd


@nki.jit
def rmsnorm_fwd(x, weight, eps):
    """``x * rsqrt(mean(x^2, -1) + eps) * weight`` for x [N, D]."""
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    w_tile = _broadcast_rows(weight, weight.dtype)
    for start, rows in _row_tiles(n):
        x_tile = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile[:rows], src=x[start : start + rows])
        rstd = _rstd(x_tile, rows, d, eps)
        y = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(
            dst=y[:rows],
            data=x_tile[:rows],
            op0=nl.multiply,
            operand0=rstd[:rows],
            op1=nl.multiply,
            operand1=w_tile[:rows],
        )
        nisa.dma_copy(dst=out[start : start + rows], src=y[:rows])
    return out


@nki.jit
def rmsnorm_bwd(x, weight, grad, eps):
    """Gradients (dx, dweight) of rmsnorm_fwd; dweight sums over rows by PSUM accumulation."""
    n, d = x.shape
    chunk = nl.tile_size.gemm_moving_fmax
    assert d <= 4 * chunk, "this kernel keeps at most 4 PSUM banks of dweight partial sums"
    dx = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    dw = nl.ndarray((d,), dtype=weight.dtype, buffer=nl.shared_hbm)
    w_tile = _broadcast_rows(weight, nl.float32)
    ones = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    spans = [(c, min(chunk, d - c)) for c in range(0, d, chunk)]
    dw_psum = [nl.ndarray((1, size), dtype=nl.float32, buffer=nl.psum) for _, size in spans]
    for start, rows in _row_tiles(n):
        x_tile = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        g_tile = nl.ndarray((P, d), dtype=grad.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile[:rows], src=x[start : start + rows])
        nisa.dma_copy(dst=g_tile[:rows], src=grad[start : start + rows])
        rstd = _rstd(x_tile, rows, d, eps)
        xhat = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=xhat[:rows], data=x_tile[:rows], op0=nl.multiply, operand0=rstd[:rows]
        )
        dxhat = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(
            dst=dxhat[:rows], data1=g_tile[:rows], data2=w_tile[:rows], op=nl.multiply
        )
        # dx = rstd * (dxhat - xhat * mean(dxhat * xhat))
        prod = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=prod[:rows], data1=dxhat[:rows], data2=xhat[:rows], op=nl.multiply)
        neg_mean = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_mean[:rows], op=nl.add, data=prod[:rows], axis=1, negate=True)
        nisa.tensor_scalar(
            dst=neg_mean[:rows], data=neg_mean[:rows], op0=nl.multiply, operand0=1.0 / d
        )
        centered = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(
            dst=centered[:rows],
            data=xhat[:rows],
            op0=nl.multiply,
            operand0=neg_mean[:rows],
            op1=nl.add,
            operand1=dxhat[:rows],
        )
        dx_tile = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=dx_tile[:rows], data=centered[:rows], op0=nl.multiply, operand0=rstd[:rows]
        )
        nisa.dma_copy(dst=dx[start : start + rows], src=dx_tile[:rows])
        # dweight += ones.T @ (grad * xhat): a partition-axis sum on the Tensor engine.
        gx = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=gx[:rows], data1=g_tile[:rows], data2=xhat[:rows], op=nl.multiply)
        for acc, (c, size) in zip(dw_psum, spans):
            nisa.nc_matmul(dst=acc, stationary=ones[:rows], moving=gx[:rows, c : c + size])
    for acc, (c, size) in zip(dw_psum, spans):
        dw_tile = nl.ndarray((1, size), dtype=weight.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=dw_tile, src=acc)
        nisa.dma_copy(dst=dw[c : c + size], src=dw_tile)
    return dx, dw


@nki_op("nki_examples::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim of ``x`` (any leading shape)."""
    return rmsnorm_fwd(x.reshape(-1, x.shape[-1]), weight, eps).reshape(x.shape)


@nki_op("nki_examples::rms_norm_backward", mutates_args=())
def rms_norm_backward(
    x: torch.Tensor, weight: torch.Tensor, grad: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx, dweight) of ``rms_norm``."""
    d = x.shape[-1]
    dx, dw = rmsnorm_bwd(x.reshape(-1, d), weight, grad.reshape(-1, d), eps)
    return dx.reshape(x.shape), dw


def _setup_context(ctx, inputs, output):
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _backward(ctx, grad):
    x, weight = ctx.saved_tensors
    dx, dw = rms_norm_backward(x, weight, grad.contiguous(), ctx.eps)
    return dx, dw, None


rms_norm.register_autograd(_backward, setup_context=_setup_context)


def reference(x, weight, eps):
    """Torch reference, computed in fp32."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


class RMSNorm(torch.nn.Module):
    """RMSNorm layer backed by the NKI kernels (``use_nki=False`` gives the torch reference)."""

    def __init__(self, dim, eps=1e-6, use_nki=True):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps
        self.use_nki = use_nki

    def forward(self, x):
        if self.use_nki:
            return rms_norm(x, self.weight, self.eps)
        return reference(x, self.weight, self.eps)


def main():
    x = torch.randn(300, 256)
    w = torch.rand(256) + 0.5
    err = (rmsnorm_fwd(x, w, 1e-6) - reference(x, w, 1e-6)).abs().max().item()
    print(f"rmsnorm fwd max abs error: {err:.3g}")
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    reference(xr, wr, 1e-6).sum().backward()
    xn, wn = x.clone().requires_grad_(), w.clone().requires_grad_()
    rms_norm(xn, wn, 1e-6).sum().backward()
    print(
        f"rmsnorm dx error {(xn.grad - xr.grad).abs().max():.3g}, "
        f"dweight error {(wn.grad - wr.grad).abs().max():.3g}"
    )
    print(nki.estimate(rmsnorm_fwd, x, w, 1e-6))


if __name__ == "__main__":
    main()
