"""Flash attention forward (online softmax, stores the log-sum-exp) and backward, for training.

Layout: q, k, v, o and their gradients are [heads, seq, d] with d <= 128 and seq a multiple
of 128; one SPMD program per head (``kernel[heads](...)``).  Matmuls contract over the
partition dim, so q/k/v tiles are transposed on the Tensor engine where d must lead.
"""

import math

import torch

import nki
import nki.isa as nisa
import nki.language as nl
from nki.torch_integration import nki_op

T = 128  # query and key/value tile length
MASKED = -3.0e38  # fill for masked scores: exp(MASKED - m) == 0


def _load(src, dtype):
    """Load a [T, d] HBM block into SBUF."""
    tile = nl.ndarray(src.shape, dtype=dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=src)
    return tile


def _transposed(tile):
    """[T, d] SBUF tile -> [d, T] SBUF tile via a Tensor-engine transpose through PSUM."""
    rows, cols = tile.shape
    flipped = nl.ndarray((cols, rows), dtype=tile.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=flipped, data=tile)
    out = nl.ndarray((cols, rows), dtype=tile.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=flipped)
    return out


def _scores(q_t, k_t, scale, masked):
    """Scaled fp32 scores [T, T] of a q tile against a kv tile; causal mask on the diagonal."""
    s_psum = nl.ndarray((T, T), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=s_psum, stationary=q_t, moving=k_t)
    s = nl.ndarray((T, T), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=s, op=nl.copy, data=s_psum, scale=scale)
    if masked:
        # keep key f for query p where p - f >= 0
        nisa.affine_select(
            dst=s,
            pattern=[[-1, T]],
            channel_multiplier=1,
            on_true_tile=s,
            on_false_value=MASKED,
            cmp_op=nl.greater_equal,
        )
    return s


@nki.jit
def flash_fwd(q, k, v, scale, causal):
    """Attention output o [H, S, d] and the row log-sum-exp lse [H, S] (fp32)."""
    heads, seq, d = q.shape
    assert seq % T == 0 and d <= nl.tile_size.pmax
    o = nl.ndarray((heads, seq, d), dtype=q.dtype, buffer=nl.shared_hbm)
    lse = nl.ndarray((heads, seq), dtype=nl.float32, buffer=nl.shared_hbm)
    h = nl.program_id(0)
    tiles = seq // T
    k_t = [_transposed(_load(k[h, j * T : (j + 1) * T], k.dtype)) for j in range(tiles)]
    v_tiles = [_load(v[h, j * T : (j + 1) * T], v.dtype) for j in range(tiles)]
    for i in nl.affine_range(tiles):
        q_t = _transposed(_load(q[h, i * T : (i + 1) * T], q.dtype))
        m = nl.full((T, 1), MASKED, dtype=nl.float32)
        total = nl.zeros((T, 1), dtype=nl.float32)
        acc = nl.zeros((T, d), dtype=nl.float32)
        for j in nl.sequential_range(i + 1 if causal else tiles):
            s = _scores(q_t, k_t[j], scale, causal and i == j)
            row_max = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=row_max, op=nl.max, data=s, axis=1)
            m_new = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=m_new, data1=m, data2=row_max, op=nl.maximum)
            neg_m = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=neg_m, data=m_new, op0=nl.multiply, operand0=-1.0)
            p = nl.ndarray((T, T), dtype=q.dtype, buffer=nl.sbuf)
            row_sum = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(
                dst=p, op=nl.exp, data=s, bias=neg_m, reduce_op=nl.add, reduce_res=row_sum
            )
            alpha = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=alpha, op=nl.exp, data=m, bias=neg_m)
            nisa.scalar_tensor_tensor(
                dst=total, data=total, op0=nl.multiply, operand0=alpha, op1=nl.add, operand1=row_sum
            )
            pv = nl.ndarray((T, d), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=pv, stationary=_transposed(p), moving=v_tiles[j])
            nisa.scalar_tensor_tensor(
                dst=acc, data=acc, op0=nl.multiply, operand0=alpha, op1=nl.add, operand1=pv
            )
            nisa.tensor_copy(dst=m, src=m_new)
        inv = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=total)
        out = nl.ndarray((T, d), dtype=q.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=out, data=acc, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=o[h, i * T : (i + 1) * T], src=out)
        log_total = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=log_total, op=nl.log, data=total)
        nisa.tensor_tensor(dst=log_total, data1=log_total, data2=m, op=nl.add)
        nisa.dma_copy(dst=lse[h, i * T : (i + 1) * T], src=log_total)
    return o, lse


@nki.jit
def flash_bwd(q, k, v, o, d_o, lse, scale, causal):
    """Gradients (dq, dk, dv) of flash_fwd, recomputing probabilities from the stored lse."""
    heads, seq, d = q.shape
    dq = nl.ndarray((heads, seq, d), dtype=q.dtype, buffer=nl.shared_hbm)
    dk = nl.ndarray((heads, seq, d), dtype=k.dtype, buffer=nl.shared_hbm)
    dv = nl.ndarray((heads, seq, d), dtype=v.dtype, buffer=nl.shared_hbm)
    h = nl.program_id(0)
    tiles = seq // T
    blocks = [slice(i * T, (i + 1) * T) for i in range(tiles)]
    q_tiles = [_load(q[h, b], q.dtype) for b in blocks]
    q_t = [_transposed(t) for t in q_tiles]
    do_tiles = [_load(d_o[h, b], d_o.dtype) for b in blocks]
    do_t = [_transposed(t) for t in do_tiles]
    k_tiles = [_load(k[h, b], k.dtype) for b in blocks]
    k_t = [_transposed(t) for t in k_tiles]
    v_t = [_transposed(_load(v[h, b], v.dtype)) for b in blocks]
    neg_lse, delta, dq_acc = [], [], []
    for i, b in enumerate(blocks):
        lse_tile = _load(lse[h, b].reshape((T, 1)), nl.float32)
        nisa.tensor_scalar(dst=lse_tile, data=lse_tile, op0=nl.multiply, operand0=-1.0)
        neg_lse.append(lse_tile)
        # delta_i = rowsum(dO * O)
        prod = nl.ndarray((T, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(
            dst=prod, data1=do_tiles[i], data2=_load(o[h, b], o.dtype), op=nl.multiply
        )
        row = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=row, op=nl.add, data=prod, axis=1)
        delta.append(row)
        dq_acc.append(nl.zeros((T, d), dtype=nl.float32))
    for j in nl.affine_range(tiles):
        dv_psum = nl.ndarray((T, d), dtype=nl.float32, buffer=nl.psum)
        dk_psum = nl.ndarray((T, d), dtype=nl.float32, buffer=nl.psum)
        for i in nl.affine_range(j if causal else 0, tiles):
            s = _scores(q_t[i], k_t[j], scale, causal and i == j)
            p = nl.ndarray((T, T), dtype=q.dtype, buffer=nl.sbuf)
            nisa.activation(dst=p, op=nl.exp, data=s, bias=neg_lse[i])
            # dV_j += P^T dO_i and dK_j += dS^T Q_i accumulate across i in PSUM.
            nisa.nc_matmul(dst=dv_psum, stationary=p, moving=do_tiles[i])
            dp = nl.ndarray((T, T), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=dp, stationary=do_t[i], moving=v_t[j])
            ds = nl.ndarray((T, T), dtype=q.dtype, buffer=nl.sbuf)
            nisa.scalar_tensor_tensor(
                dst=ds, data=dp, op0=nl.subtract, operand0=delta[i], op1=nl.multiply, operand1=p
            )
            nisa.nc_matmul(dst=dk_psum, stationary=ds, moving=q_tiles[i])
            dq_psum = nl.ndarray((T, d), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=dq_psum, stationary=_transposed(ds), moving=k_tiles[j])
            nisa.tensor_tensor(dst=dq_acc[i], data1=dq_acc[i], data2=dq_psum, op=nl.add)
        dk_tile = nl.ndarray((T, d), dtype=k.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=dk_tile, data=dk_psum, op0=nl.multiply, operand0=scale)
        nisa.dma_copy(dst=dk[h, blocks[j]], src=dk_tile)
        dv_tile = nl.ndarray((T, d), dtype=v.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=dv_tile, src=dv_psum)
        nisa.dma_copy(dst=dv[h, blocks[j]], src=dv_tile)
    for i, b in enumerate(blocks):
        dq_tile = nl.ndarray((T, d), dtype=q.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=dq_tile, data=dq_acc[i], op0=nl.multiply, operand0=scale)
        nisa.dma_copy(dst=dq[h, b], src=dq_tile)
    return dq, dk, dv


@nki_op("nki_examples::flash_attention", mutates_args=())
def flash_attention_fwd(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) for q, k, v of shape [heads, seq, d]."""
    return flash_fwd[q.shape[0]](q.contiguous(), k.contiguous(), v.contiguous(), scale, causal)


@nki_op("nki_examples::flash_attention_backward", mutates_args=())
def flash_attention_bwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    d_o: torch.Tensor,
    lse: torch.Tensor,
    scale: float,
    causal: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) of flash_attention_fwd."""
    return flash_bwd[q.shape[0]](q, k, v, o, d_o.contiguous(), lse, scale, causal)


def _setup_context(ctx, inputs, output):
    q, k, v, scale, causal = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.scale, ctx.causal = scale, causal


def _backward(ctx, d_o, d_lse):
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = flash_attention_bwd(q, k, v, o, d_o, lse, ctx.scale, ctx.causal)
    return dq, dk, dv, None, None


flash_attention_fwd.register_autograd(_backward, setup_context=_setup_context)


def flash_attention(q, k, v, causal=False):
    """Differentiable attention over [heads, seq, d] tensors backed by the NKI kernels."""
    return flash_attention_fwd(q, k, v, 1.0 / math.sqrt(q.shape[-1]), causal)[0]


def reference(q, k, v, causal=False):
    """Torch reference attention, computed in fp32."""
    out = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=causal
    )
    return out.to(q.dtype)


class TinyAttention(torch.nn.Module):
    """One multi-head self-attention layer whose core is flash attention (or the reference)."""

    def __init__(self, dim=64, heads=2, use_nki=True):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)
        self.proj = torch.nn.Linear(dim, dim, bias=False)
        self.use_nki = use_nki

    def forward(self, x):
        batch, seq, dim = x.shape
        qkv = self.qkv(x).reshape(batch, seq, 3, self.heads, dim // self.heads)
        q, k, v = (
            qkv[:, :, i].permute(0, 2, 1, 3).reshape(batch * self.heads, seq, -1) for i in range(3)
        )
        attend = flash_attention if self.use_nki else reference
        out = attend(q, k, v, causal=True)
        out = out.reshape(batch, self.heads, seq, -1).permute(0, 2, 1, 3).reshape(batch, seq, dim)
        return self.proj(out)


def main():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 256, 64) for _ in range(3))
    for causal in (False, True):
        err = (flash_attention(q, k, v, causal) - reference(q, k, v, causal)).abs().max().item()
        print(f"flash attention fwd (causal={causal}) max abs error: {err:.3g}")
    print(nki.estimate(flash_fwd[2], q, k, v, 0.125, True))


if __name__ == "__main__":
    main()
