"""Wall time of the NKI simulator against CPU PyTorch on the same host, measured in one run.

(a) tiled matmul 1024^3 (fp32 and bf16) against ``torch.matmul`` (target <= 3x for fp32);
(b) a flash-attention forward (online softmax over key tiles) against
    ``torch.nn.functional.scaled_dot_product_attention``.
Each pair is timed alternately and the median ratio of several paired rounds is reported, so
that load from other processes affects both sides alike.  The kernels run on CPU torch tensors
(the simulator's eager path); the first call records the specialization and is not timed.
"""

import os
import statistics
import sys
import time

# This script is named like the package it measures: import the package, not the script.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]

import torch  # noqa: E402

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

P, FMAX = 128, 512


@nki.jit
def matmul(lhsT, rhs):
    """``lhsT.T @ rhs``: K-tiles of 128 accumulate in PSUM, one 128x512 output tile at a time;
    each 128-row strip of lhsT and each 512-column strip of rhs is loaded once."""
    k, m = lhsT.shape
    n = rhs.shape[1]
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    rhs_strips = []
    for j in nl.affine_range(n // FMAX):
        strip = nl.ndarray((P, k // P, FMAX), dtype=rhs.dtype, buffer=nl.sbuf)
        for kt in nl.affine_range(k // P):
            nisa.dma_copy(
                dst=strip[:, kt], src=rhs[kt * P : (kt + 1) * P, j * FMAX : (j + 1) * FMAX]
            )
        rhs_strips.append(strip)
    for i in nl.affine_range(m // P):
        lhs = nl.ndarray((P, k // P, P), dtype=lhsT.dtype, buffer=nl.sbuf)
        for kt in nl.affine_range(k // P):
            nisa.dma_copy(dst=lhs[:, kt], src=lhsT[kt * P : (kt + 1) * P, i * P : (i + 1) * P])
        row = nl.ndarray((P, n), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(n // FMAX):
            acc = nl.ndarray((P, FMAX), dtype=nl.float32, buffer=nl.psum)
            for kt in nl.affine_range(k // P):
                nisa.nc_matmul(dst=acc, stationary=lhs[:, kt], moving=rhs_strips[j][:, kt])
            nisa.tensor_copy(dst=row[:, j * FMAX : (j + 1) * FMAX], src=acc)
        nisa.dma_copy(dst=out[i * P : (i + 1) * P, :], src=row)
    return out


@nki.jit
def flash_attention(qT, kT, v):
    """softmax(q k^T / sqrt(d)) v for one head: qT, kT are (d, seq), v is (seq, d), d = 128.
    Query tiles of 128 rows; key tiles of 512 with a running max and sum (online softmax)."""
    d, seq = qT.shape
    out = nl.ndarray((seq, d), dtype=nl.float32, buffer=nl.shared_hbm)
    scale = 1.0 / d**0.5
    keys = nl.ndarray((d, seq), dtype=kT.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=keys, src=kT)
    values = nl.ndarray((P, seq // P, d), dtype=v.dtype, buffer=nl.sbuf)
    for t in nl.affine_range(seq // P):
        nisa.dma_copy(dst=values[:, t], src=v[t * P : (t + 1) * P, :])
    ident = nl.shared_identity_matrix(P, dtype=nl.float32)
    for qi in nl.affine_range(seq // P):
        q = nl.ndarray((d, P), dtype=qT.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=q, src=qT[:, qi * P : (qi + 1) * P])
        run_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=run_max, value=-3.0e38)
        run_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=run_sum, value=0.0)
        acc = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for kj in nl.sequential_range(seq // FMAX):
            scores = nl.ndarray((P, FMAX), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=scores, stationary=q, moving=keys[:, kj * FMAX : (kj + 1) * FMAX])
            tile_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=tile_max, op=nl.max, data=scores, axis=1)
            new_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=new_max, data=tile_max, op0=nl.multiply, operand0=scale)
            nisa.tensor_tensor(dst=new_max, data1=new_max, data2=run_max, op=nl.maximum)
            # exp(scale*s - m) with the tile's row sums; the old sum and output shrink by
            # exp(m_old - m_new)
            neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=neg_max, data=new_max, op0=nl.multiply, operand0=-1.0)
            probs = nl.ndarray((P, FMAX), dtype=nl.float32, buffer=nl.sbuf)
            tile_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation_reduce(
                dst=probs,
                op=nl.exp,
                data=scores,
                reduce_op=nl.add,
                reduce_res=tile_sum,
                bias=neg_max,
                scale=scale,
            )
            shrink = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=shrink, op=nl.exp, data=run_max, bias=neg_max)
            nisa.scalar_tensor_tensor(
                dst=run_sum,
                data=run_sum,
                op0=nl.multiply,
                operand0=shrink,
                op1=nl.add,
                operand1=tile_sum,
            )
            nisa.tensor_copy(dst=run_max, src=new_max)
            pv = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.psum)
            for c in nl.affine_range(FMAX // P):
                pT_psum = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=pT_psum, stationary=probs[:, c * P : (c + 1) * P], moving=ident)
                pT = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=pT, src=pT_psum)
                nisa.nc_matmul(dst=pv, stationary=pT, moving=values[:, kj * (FMAX // P) + c])
            nisa.scalar_tensor_tensor(
                dst=acc, data=acc, op0=nl.multiply, operand0=shrink, op1=nl.add, operand1=pv
            )
        inv = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=run_sum)
        res = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=res, data=acc, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[qi * P : (qi + 1) * P, :], src=res)
    return out


def paired(sim, ref, rounds):
    """Median of each side's time and of the per-round ratio sim/ref, in seconds."""
    sim(), ref()
    times = {"sim": [], "ref": []}
    for i in range(rounds):
        order = (("sim", sim), ("ref", ref)) if i % 2 == 0 else (("ref", ref), ("sim", sim))
        for side, fn in order:
            start = time.perf_counter()
            fn()
            times[side].append(time.perf_counter() - start)
    ratios = [s / r for s, r in zip(times["sim"], times["ref"])]
    return (
        statistics.median(times["sim"]),
        statistics.median(times["ref"]),
        statistics.median(ratios),
    )


def report(name, sim, ref, rounds=7, target=None):
    s, r, ratio = paired(sim, ref, rounds)
    verdict = (
        ""
        if target is None
        else f"   target <= {target}x: {'met' if ratio <= target else 'MISSED'}"
    )
    print(f"{name:<28}{r * 1e3:>10.2f}{s * 1e3:>12.2f}{ratio:>9.2f}x{verdict}")


def main():
    torch.manual_seed(0)
    print(
        f"NKI simulator vs CPU torch ({torch.get_num_threads()} threads), median of paired rounds"
    )
    print(f"{'case':<28}{'torch ms':>10}{'sim ms':>12}{'ratio':>10}")
    for dtype, target in ((torch.float32, 3.0), (torch.bfloat16, None)):
        a = torch.randn(1024, 1024, dtype=dtype)
        b = torch.randn(1024, 1024, dtype=dtype)
        aT = a.T.contiguous()
        got = matmul(aT, b)
        torch.testing.assert_close(got, (a.float() @ b.float()), rtol=2e-2, atol=2e-1)
        name = f"matmul 1024^3 {str(dtype).removeprefix('torch.')}"
        report(name, lambda: matmul(aT, b), lambda: torch.matmul(a, b), target=target)
    seq, d = 2048, 128
    q, k, v = (torch.randn(seq, d) for _ in range(3))
    qT, kT = q.T.contiguous(), k.T.contiguous()
    sdpa = torch.nn.functional.scaled_dot_product_attention
    got = flash_attention(qT, kT, v)
    torch.testing.assert_close(got, sdpa(q[None], k[None], v[None])[0], rtol=1e-3, atol=1e-3)
    report(
        f"flash attn fwd s={seq} d={d}",
        lambda: flash_attention(qT, kT, v),
        lambda: sdpa(q[None], k[None], v[None]),
        rounds=5,
    )


if __name__ == "__main__":
    main()
