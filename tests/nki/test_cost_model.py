"""The analytical cost model: labelled estimates, per-engine breakdown, target differences."""

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from nki import cost_model
from nki._src import targets
from nki._src.cost_model import _Timeline, instruction_ns
from nki._src.trace import Instr


@nki.jit
def one_matmul(lhsT, rhs):
    out = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(lhsT)
    b = nl.load(rhs)
    acc = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.psum)
    for _ in range(8):
        nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    res = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nl.store(out, res)
    return out


@nki.jit
def copy_columns(x):
    """DMA efficiency probe: copies x row by row (contiguous runs)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_report_is_labelled_and_breaks_down_engines():
    rep = nki.estimate(
        one_matmul,
        torch.randn(128, 128, dtype=torch.bfloat16),
        torch.randn(128, 512, dtype=torch.bfloat16),
    )
    text = str(rep)
    assert "ESTIMATE (analytical model, not measured)" in text
    for engine in cost_model.ENGINES:
        assert engine in text
    assert rep.instructions["tensor"] == 8 and rep.instructions["dma"] == 3
    assert rep.instructions["vector"] == 1
    # 8 matmuls of N=512 at 2.4 GHz occupy the PE for 8 * 512 / 2.4 ns.
    assert rep.busy_us["tensor"] == pytest.approx(8 * 512 / 2.4 / 1e3)
    assert rep.flops == 8 * 2 * 128 * 128 * 512
    assert rep.latency_us >= max(rep.busy_us.values())


def test_fp32_matmul_takes_four_passes():
    bf = nki.estimate(
        one_matmul,
        torch.randn(128, 128, dtype=torch.bfloat16),
        torch.randn(128, 512, dtype=torch.bfloat16),
    )
    fp = nki.estimate(one_matmul, torch.randn(128, 128), torch.randn(128, 512))
    assert fp.busy_us["tensor"] == pytest.approx(4 * bf.busy_us["tensor"])


def test_small_matmuls_pay_the_minimum_issue_interval():
    rep = nki.estimate(
        one_matmul,
        torch.randn(128, 128, dtype=torch.bfloat16),
        torch.randn(128, 16, dtype=torch.bfloat16),
    )
    assert rep.busy_us["tensor"] == pytest.approx(8 * 64 / 2.4 / 1e3)


def test_trn3_moves_data_faster_than_trn2():
    x = torch.randn(128, 2048)
    trn2 = nki.estimate(copy_columns, x, target="trn2")
    trn3 = nki.estimate(copy_columns, x, target="trn3")
    assert trn3.target == "trn3" and trn2.target == "trn2"
    assert trn3.busy_us["dma"] == pytest.approx(trn2.busy_us["dma"] * 23 / 33)


@nki.jit
def copy_transposed(x):
    """DMA efficiency probe: reads x column by column (one element per descriptor)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap([[1, x.shape[1]], [x.shape[1], x.shape[0]]]))
    nisa.dma_copy(dst=out, src=t)
    return out


def test_short_dma_runs_are_overhead_bound():
    # Kernel arguments are dense device buffers (a strided argument arrives row-major), so the
    # short runs come from the kernel's own access pattern.
    x = torch.randn(128, 128)
    contiguous = nki.estimate(copy_columns, x)
    strided = nki.estimate(copy_transposed, x)  # 4-byte runs
    assert strided.busy_us["dma"] > 10 * contiguous.busy_us["dma"]


def test_engines_overlap_in_the_schedule():
    @nki.jit
    def pipelined(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(x.shape[0] // 128):
            t = nl.load(x[i * 128 : (i + 1) * 128])
            nl.store(out[i * 128 : (i + 1) * 128], nl.exp(t))
        return out

    rep = nki.estimate(pipelined, torch.randn(1024, 512))
    serial = sum(rep.busy_us.values()) + 16 * cost_model.DMA_LATENCY_NS / 1e3
    assert rep.latency_us - cost_model.LAUNCH_NS / 1e3 < serial


def test_spmd_instances_run_in_parallel():
    @nki.jit
    def per_program(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        rows = x.shape[0] // nl.num_programs()
        lo = nl.program_id(0) * rows
        nl.store(out[lo : lo + rows], nl.exp(nl.load(x[lo : lo + rows])))
        return out

    x = torch.randn(256, 512)
    one = nki.estimate(per_program[2], x)
    assert one.instances == 2
    assert one.latency_us < nki.estimate(per_program[1], x[:128]).latency_us * 1.01


def test_estimate_reuses_the_specialization_and_leaves_inputs_alone():
    @nki.jit
    def bump(x):
        nl.store(x, nl.add(nl.load(x), 1.0))

    x = np.zeros((4, 4), np.float32)
    nki.estimate(bump, x)
    assert (x == 0).all() and len(bump.specializations) == 1
    bump(x)
    assert (x == 1).all() and len(bump.specializations) == 1


def test_benchmark_decorator_reports_the_estimate_as_latency():
    bench = nki.benchmark(warmup=5, iters=10)(one_matmul)
    lhsT, rhs = np.random.rand(128, 128), np.random.rand(128, 512)
    out = bench(lhsT.astype(np.float32), rhs.astype(np.float32))
    assert out.shape == (128, 512)
    p50 = bench.benchmark_result.nc_latency.get_latency_percentile(50)
    assert p50 == bench.benchmark_result.nc_latency.latency_us > 0


def _instr(name, engine, free=512, inputs=1, narrow=False, **cost):
    return Instr(name, engine, (), (), (), free, inputs, narrow, **cost)


@pytest.mark.parametrize(
    "name, engine, inputs, narrow, cycles",
    [
        # The ISA docs' "Estimated instruction cost" formulas (N = 512 elements).
        ("tensor_tensor", "vector", 2, False, 2 * 512),
        ("tensor_tensor", "vector", 2, True, 512),  # bf16 add/multiply: one pass
        ("tensor_scalar", "vector", 1, False, 512),
        ("tensor_tensor_scan", "vector", 2, False, 2 * 512),
        ("reciprocal", "vector", 1, False, 8 * 512),
        ("bn_aggr", "vector", 1, False, 13 * 512 / 3),
        ("tensor_scalar_reduce", "vector", 1, False, 512 + cost_model.MIN_II),
        ("activation", "scalar", 1, False, 512),
        ("activation_reduce", "scalar", 1, False, 512 + cost_model.MIN_II),
        ("iota", "gpsimd", 0, False, cost_model.GPSIMD_START + 512),
        ("nonzero_with_count", "gpsimd", 1, False, cost_model.GPSIMD_START + 512),
        ("nc_find_index8", "vector", 1, False, 512),
        ("nc_stream_shuffle", "vector", 1, False, 512),
        ("quantize_mx", "vector", 1, False, 4 * 512),
    ],
)
def test_engine_cycles_follow_the_documented_formulas(name, engine, inputs, narrow, cycles):
    trn1 = targets.get("trn1")
    ghz = {"vector": trn1.vector_ghz, "scalar": trn1.scalar_ghz, "gpsimd": trn1.gpsimd_ghz}
    ns = instruction_ns(_instr(name, engine, inputs=inputs, narrow=narrow), trn1)
    assert ns == pytest.approx(cycles / ghz[engine])


def test_small_instructions_pay_the_minimum_interval_and_dependencies_more():
    trn2 = targets.get("trn2")
    tiny = _instr("tensor_scalar", "vector", free=4)
    assert instruction_ns(tiny, trn2) == pytest.approx(cost_model.MIN_II / trn2.vector_ghz)
    chained = instruction_ns(tiny, trn2, dependent=True)
    assert chained == pytest.approx((cost_model.MIN_II + cost_model.DEPENDENT_CYCLES) / 0.96)


def test_one_psum_input_halves_tensor_tensor():
    trn2 = targets.get("trn2")
    tt = _instr("tensor_tensor", "vector", inputs=2)
    assert instruction_ns(tt, trn2, psum_reads=1) == pytest.approx(instruction_ns(tt, trn2) / 2)


def test_mx_matmul_and_collectives_have_costs():
    trn3 = targets.get("trn3")
    mx = _instr("nc_matmul_mx", "tensor", moving=512)
    assert instruction_ns(mx, trn3) == pytest.approx(512 / trn3.pe_ghz)
    nbytes = 1 << 20
    reduce = _instr("all_reduce", "dma", nbytes=nbytes, chunk=nbytes)
    want = nbytes / trn3.link_bytes_per_ns + cost_model.COLLECTIVE_LATENCY_NS
    assert instruction_ns(reduce, trn3) == pytest.approx(want)
    send = _instr("sendrecv", "dma", nbytes=nbytes, chunk=4096)
    assert instruction_ns(send, trn3) == pytest.approx(
        (nbytes + 256 * trn3.descriptor_bytes) / trn3.dma_bytes_per_ns
    )


@nki.jit
def chain(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    c = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=b, data=a, op0=nl.multiply, operand0=2.0)
    nisa.tensor_scalar(dst=c, data=b, op0=nl.add, operand0=1.0)
    nl.store(out, c)
    return out


@nki.jit
def independent(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    c = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=b, data=a, op0=nl.multiply, operand0=2.0)
    nisa.tensor_scalar(dst=c, data=a, op0=nl.add, operand0=1.0)
    nl.store(out, nl.add(b, c))
    return out


def test_a_dependent_instruction_pays_the_dependency_overhead():
    x = torch.randn(128, 512)
    dep, ind = nki.estimate(chain, x), nki.estimate(independent, x)
    # chain: the second tensor_scalar reads the first one's output; independent: neither
    # tensor_scalar reads the other's (the final add then depends on the second).
    dependency = cost_model.DEPENDENT_CYCLES
    assert dep.busy_us["vector"] == pytest.approx((2 * 512 + dependency) / 0.96 / 1e3)
    assert ind.busy_us["vector"] == pytest.approx((2 * 512 + 2 * 512 + dependency) / 0.96 / 1e3)


def test_trn1_runs_the_pe_at_2_8_ghz():
    a = torch.randn(128, 128, dtype=torch.bfloat16)
    b = torch.randn(128, 512, dtype=torch.bfloat16)
    rep = nki.estimate(one_matmul, a, b, target="trn1")
    assert rep.target == "trn1"
    assert rep.busy_us["tensor"] == pytest.approx(8 * 512 / 2.8 / 1e3)


def test_dma_stays_active_until_its_data_is_visible():
    rep = nki.estimate(copy_columns, torch.randn(128, 2048))
    assert rep.active_us["dma"] == pytest.approx(
        rep.busy_us["dma"] + 2 * cost_model.DMA_LATENCY_NS / 1e3
    )
    assert rep.active_us["vector"] == rep.busy_us["vector"]
    assert "active" in str(rep)


def _earliest_fit(busy, ready, duration):
    """The first start at or after ``ready`` where ``duration`` overlaps no busy interval, the
    intervals that touch counting as one (so nothing starts where one ends and another begins)."""
    merged = []
    for s, e in sorted(busy):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    for start in sorted({ready, *(e for _, e in merged if e > ready)}):
        if all(start + duration <= s or start >= e for s, e in merged):
            return start
    raise AssertionError("unreachable: after the last interval everything fits")


def test_each_instruction_goes_into_the_earliest_gap_that_fits():
    # Repeated durations and early ready times are the cases the timeline's search skips
    # ahead for; every placement must still be the first fit over all intervals placed.
    rng = np.random.default_rng(3)
    timeline, busy = _Timeline(), []
    for _ in range(600):
        duration = float(rng.choice([0.0, 1.0, 2.5, 4.0, rng.uniform(0.5, 6.0)]))
        ready = float(rng.choice([0.0, rng.uniform(0.0, 300.0)]))
        want = _earliest_fit(busy, ready, duration)
        assert timeline.place(ready, duration) == want
        busy.append((want, want + duration))
