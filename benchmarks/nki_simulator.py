"""Wall time of the NKI simulator against CPU PyTorch on the same host, measured in one run.

(a) tiled matmul 1024^3 (fp32 and bf16) against ``torch.matmul``;
(b) a flash-attention forward (online softmax over key tiles) against
    ``torch.nn.functional.scaled_dot_product_attention``.
Target for each: at most 3x the torch op's time.
Each pair is timed alternately and the median ratio of several paired rounds is reported, so
that load from other processes affects both sides alike.  The kernels run on CPU torch tensors
(the simulator's eager path); the first call records the specialization and is not timed.
"""

import os
import statistics
import sys
import time

import torch
from targets import verdict

import nki
import nki.isa as nisa
import nki.language as nl

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "nki")
)
from flash_attention import flash_fwd

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


def report(name, sim, ref, rounds=7, target=3.0):
    s, r, ratio = paired(sim, ref, rounds)
    met = verdict(f"NKI simulator, {name}, vs torch", ratio, target, at_most=True)
    print(f"{name:<28}{r * 1e3:>10.2f}{s * 1e3:>12.2f}{ratio:>9.2f}x   target <= {target}x: {met}")


def main():
    torch.manual_seed(0)
    print(
        f"NKI simulator vs CPU torch ({torch.get_num_threads()} threads), median of paired rounds"
    )
    print(f"{'case':<28}{'torch ms':>10}{'sim ms':>12}{'ratio':>10}")
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(1024, 1024, dtype=dtype)
        b = torch.randn(1024, 1024, dtype=dtype)
        aT = a.T.contiguous()
        got = matmul(aT, b)
        torch.testing.assert_close(got, (a.float() @ b.float()), rtol=2e-2, atol=2e-1)
        name = f"matmul 1024^3 {str(dtype).removeprefix('torch.')}"
        report(name, lambda: matmul(aT, b), lambda: torch.matmul(a, b))
    seq, d = 2048, 128
    q, k, v = (torch.randn(1, seq, d) for _ in range(3))
    scale = d**-0.5
    sdpa = torch.nn.functional.scaled_dot_product_attention
    got, _ = flash_fwd[1](q, k, v, scale, False)
    torch.testing.assert_close(got, sdpa(q, k, v), rtol=1e-3, atol=1e-3)
    report(
        f"flash attn fwd s={seq} d={d}",
        lambda: flash_fwd[1](q, k, v, scale, False),
        lambda: sdpa(q, k, v),
        rounds=5,
    )


if __name__ == "__main__":
    main()
