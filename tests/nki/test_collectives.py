"""Cross-core and cross-rank communication against numpy references: nisa.core_barrier and
nisa.sendrecv between the two cores of an LNC=2 launch, and nki.collectives across the ranks
of ``nki.simulate(kernel, num_ranks=n)``."""

import numpy as np
import pytest

import nki
import nki.collectives as ncc
import nki.isa as nisa
import nki.language as nl

GROUP2 = ncc.ReplicaGroup([[0, 1]])
GROUP4 = ncc.ReplicaGroup([[0, 1, 2, 3]])


def rank_data(ranks, shape=(4, 6)):
    return [
        np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 100 * r for r in range(ranks)
    ]


def staged(x, name):
    """A shared-HBM copy of kernel argument ``x`` (collectives do not read kernel IO)."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name=name)
    nisa.dma_copy(dst=t, src=x)
    return t


@nki.jit
def swap_halves_with_barrier(x, use_barrier, lag):
    """Each core writes its half of a shared buffer (core 1 after ``lag`` extra instructions),
    then reads the other core's half."""
    rows = x.shape[0] // 2
    core = nl.program_id(0)
    shared = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="shared")
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="out")
    mine = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x[core * rows : (core + 1) * rows])
    for _ in range(lag if core == 1 else 0):
        nisa.tensor_scalar(dst=mine, data=mine, op0=nl.add, operand0=0.0)
    nisa.tensor_scalar(dst=mine, data=mine, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=shared[core * rows : (core + 1) * rows], src=mine)
    if use_barrier:
        nisa.core_barrier(data=shared, cores=(0, 1))
    other = 1 - core
    theirs = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=theirs, src=shared[other * rows : (other + 1) * rows])
    nisa.dma_copy(dst=out[core * rows : (core + 1) * rows], src=theirs)
    return out


@pytest.mark.parametrize("lag", [0, 5])
def test_core_barrier_orders_the_cores_writes(lag):
    x = np.random.rand(8, 16).astype(np.float32)
    expected = np.concatenate([2 * x[4:], 2 * x[:4]])
    np.testing.assert_array_equal(swap_halves_with_barrier[2](x, True, lag), expected)
    racy = swap_halves_with_barrier[2](x, False, lag)
    if lag:
        # Without the barrier core 0 reads core 1's half before the lagging core 1 wrote it.
        assert np.isnan(racy[:4]).all()
    else:
        # The cores run in step, so core 1's write lands before core 0's read.
        np.testing.assert_array_equal(racy, expected)


@nki.jit
def peer_zeroes_then_core0_writes(x, steps):
    """Core 1 zero-initializes the whole output first thing; core 0 writes x + steps after
    ``steps`` instructions, with no barrier in between."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="out")
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    if nl.program_id(0) == 1:
        nisa.memset(dst=t, value=0.0)
        nisa.dma_copy(dst=out, src=t)
    else:
        nisa.dma_copy(dst=t, src=x)
        for _ in range(steps):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("platform", ["trn2", "trn3"])
def test_lnc_cores_run_concurrently(target, platform):
    """The two cores of a kernel[2] launch interleave instruction by instruction, so the peer's
    early initialization does not overwrite core 0's later result (as it would if core 1
    only started after core 0 had finished)."""
    target(platform)
    x = np.random.rand(4, 8).astype(np.float32)
    out = peer_zeroes_then_core0_writes[2](x, 3)
    np.testing.assert_allclose(out, x + 3, rtol=1e-6)


@nki.jit
def exchange(x, pipes):
    core = nl.program_id(0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="out")
    rows = x.shape[0] // 2
    mine = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    got = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x[core * rows : (core + 1) * rows])
    for pipe in range(pipes):
        nisa.sendrecv(
            src=mine, dst=got, send_to_rank=1 - core, recv_from_rank=1 - core, pipe_id=pipe
        )
        nisa.tensor_scalar(dst=mine, data=got, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=out[core * rows : (core + 1) * rows], src=mine)
    return out


@pytest.mark.parametrize("pipes", [1, 3])
def test_sendrecv_exchanges_tiles_between_cores(pipes):
    x = np.random.rand(8, 32).astype(np.float32)
    out = exchange[2](x, pipes)
    halves = [x[:4], x[4:]]
    for _ in range(pipes):
        halves = [halves[1] + 1, halves[0] + 1]
    np.testing.assert_allclose(out, np.concatenate(halves), rtol=1e-6)


def test_unmatched_sendrecv_is_reported_as_deadlock():
    @nki.jit
    def lonely(x):
        t = nl.load(x)
        if nl.program_id(0) == 0:
            nisa.sendrecv(src=t, dst=t, send_to_rank=1, recv_from_rank=1, pipe_id=0)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    with pytest.raises(nki.NkiValidationError, match="sendrecv: deadlock: program \\(0,\\) waits"):
        lonely[2](np.zeros((2, 4), np.float32))


def test_cross_core_instructions_need_lnc2():
    @nki.jit
    def single(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.core_barrier(data=out, cores=(0, 1))
        return out

    with pytest.raises(nki.NkiValidationError, match="launch the kernel as kernel\\[2\\]"):
        single(np.zeros((2, 2), np.float32))


@nki.jit
def reduce_kernel(x, rg, kind):
    src = staged(x, "src")
    shape = {
        "all_gather": (x.shape[0] * 4, x.shape[1]),
        "reduce_scatter": (x.shape[0] // 4, x.shape[1]),
    }.get(kind, x.shape)
    dst = nl.ndarray(shape, dtype=x.dtype, buffer=nl.shared_hbm, name="dst")
    if kind == "all_reduce":
        ncc.all_reduce(srcs=[src], dsts=[dst], replica_group=rg, op=nl.maximum)
    elif kind == "all_gather":
        ncc.all_gather(srcs=[src], dsts=[dst], replica_group=rg, collective_dim=0)
    elif kind == "reduce_scatter":
        ncc.reduce_scatter(srcs=[src], dsts=[dst], replica_group=rg, collective_dim=0, op=nl.add)
    else:
        ncc.all_to_all(srcs=[src], dsts=[dst], replica_group=rg, collective_dim=0)
    out = nl.ndarray(shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=dst)
    return out


@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
def test_hbm_collectives_across_four_ranks(kind):
    xs = [np.random.rand(8, 5).astype(np.float32) for _ in range(4)]
    outs = nki.simulate(reduce_kernel, num_ranks=4)(nki.per_rank(*xs), GROUP4, kind)
    stacked = np.stack(xs)
    for r, out in enumerate(outs):
        if kind == "all_reduce":
            expected = stacked.max(0)
        elif kind == "all_gather":
            expected = np.concatenate(xs)
        elif kind == "reduce_scatter":
            expected = stacked.sum(0)[2 * r : 2 * r + 2]
        else:
            expected = np.concatenate([x[2 * r : 2 * r + 2] for x in xs])
        np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_replica_groups_split_the_ranks():
    xs = rank_data(4)
    outs = nki.simulate(reduce_kernel, num_ranks=4)(
        nki.per_rank(*xs), ncc.ReplicaGroup([[0, 2], [1, 3]]), "all_reduce"
    )
    np.testing.assert_array_equal(outs[0], np.maximum(xs[0], xs[2]))
    np.testing.assert_array_equal(outs[3], np.maximum(xs[1], xs[3]))


@nki.jit
def sbuf_gather_per_core(x, rg):
    """LNC=2 on every rank: each core gathers its own SBUF tile along the free dim."""
    core = nl.program_id(0)
    rows = x.shape[0] // 2
    src = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x[core * rows : (core + 1) * rows])
    dst = nl.ndarray((rows, 2 * x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    ncc.all_gather(srcs=[src], dsts=[dst], replica_group=rg, collective_dim=1)
    out = nl.ndarray((x.shape[0], 2 * x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm, name="o")
    nisa.dma_copy(dst=out[core * rows : (core + 1) * rows], src=dst)
    return out


def test_sbuf_all_gather_on_lnc2_ranks_pairs_same_cores():
    xs = rank_data(2, (8, 3))
    outs = nki.simulate(sbuf_gather_per_core[2], num_ranks=2)(nki.per_rank(*xs), GROUP2)
    for out in outs:
        np.testing.assert_array_equal(out, np.concatenate(xs, axis=1))


@nki.jit
def ring_all_gather(x, rg, ranks):
    """A ring all-gather: step k forwards what arrived at step k-1 (fgcc's pattern)."""
    rows = x.shape[0]
    out = nl.ndarray((rows * ranks, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm, name="out")
    bufs = [staged(x, "buf0"), nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="b1")]
    for step in range(ranks):
        who = ncc.collective_permute_implicit_current_processing_rank_id(
            iteration_id=step, replica_group=rg
        )
        cur = bufs[step % 2]
        nisa.dma_copy(
            dst=out.reshape((ranks, rows, x.shape[1])).ap(
                [[x.shape[1], rows], [1, x.shape[1]]], scalar_offset=who, indirect_dim=0
            ),
            src=cur,
        )
        if step + 1 < ranks:
            ncc.collective_permute_implicit(
                srcs_by_channel=[[cur]], dsts_by_channel=[[bufs[(step + 1) % 2]]], replica_group=rg
            )
    return out


def test_ring_permute_and_processing_rank_id_build_an_all_gather():
    xs = rank_data(4, (2, 3))
    outs = nki.simulate(ring_all_gather, num_ranks=4)(nki.per_rank(*xs), GROUP4, 4)
    for out in outs:
        np.testing.assert_array_equal(out, np.concatenate(xs))


def test_permute_variants_and_rank_id():
    @nki.jit
    def kernel(x, rg):
        src = staged(x, "src")
        dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="dst")
        red = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="red")
        ncc.collective_permute(srcs=[src], dsts=[dst], source_target_pairs=[(0, 1), (1, 0)])
        ncc.collective_permute_implicit_reduce(
            srcs0_by_channel=[[src]],
            srcs1_by_channel=[[dst]],
            dsts_by_channel=[[red]],
            replica_group=rg,
            op=nl.add,
        )
        me = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="me")
        table = staged(x, "table")
        nisa.dma_copy(dst=me, src=table)
        out = nl.ndarray((3,) + x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[0], src=dst)
        nisa.dma_copy(dst=out[1], src=red)
        rank = ncc.rank_id()
        nisa.dma_copy(
            dst=out[2, 0:1, :], src=table.ap([[x.shape[1], 1], [1, x.shape[1]]], scalar_offset=rank)
        )
        return out

    xs = rank_data(2, (2, 4))
    outs = nki.simulate(kernel, num_ranks=2)(nki.per_rank(*xs), GROUP2)
    for r in range(2):
        np.testing.assert_array_equal(outs[r][0], xs[1 - r])
        # red = predecessor's (src + permuted dst) = x[1-r] + x[r]
        np.testing.assert_array_equal(outs[r][1], xs[0] + xs[1])
        np.testing.assert_array_equal(outs[r][2][0], xs[r][r])


def test_all_to_all_v_moves_counted_chunks():
    @nki.jit
    def kernel(x, meta, rg):
        src = staged(x, "src")
        m = staged(meta, "meta")
        dst = nl.ndarray((8,), dtype=x.dtype, buffer=nl.shared_hbm, name="dst")
        nisa.dma_copy(dst=dst, src=src)
        ncc.all_to_all_v(srcs=[src], dsts=[dst], replica_group=rg, metadata_tensor=m)
        out = nl.ndarray((8,), dtype=x.dtype, buffer=nl.shared_hbm)
        counts = nl.ndarray(meta.shape, dtype=meta.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst)
        nisa.dma_copy(dst=counts, src=m)
        return out, counts

    xs = [np.arange(8, dtype=np.float32) + 10 * r for r in range(2)]
    # rank r sends (1 + r) elements to each rank: to rank d from offset 4*d.
    metas = [np.array([[1 + r, 1 + r], [0, 4], [0, 0]], dtype=np.uint32) for r in range(2)]
    outs = nki.simulate(kernel, num_ranks=2)(nki.per_rank(*xs), nki.per_rank(*metas), GROUP2)
    for d, (out, counts) in enumerate(outs):
        expected = xs[d].copy()
        expected[0:1] = xs[0][4 * d : 4 * d + 1]
        expected[4:6] = xs[1][4 * d : 4 * d + 2]
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(counts[2], [1, 2])


@pytest.mark.parametrize(
    "ranks,group,message",
    [
        (1, GROUP2, "replica group names rank 1 but the launch has 1 rank"),
        (4, ncc.ReplicaGroup([[0, 1]]), "rank 2 is in none of the rank lists"),
    ],
)
def test_collective_rank_checks(ranks, group, message):
    with pytest.raises(nki.NkiValidationError, match=message):
        nki.simulate(reduce_kernel, num_ranks=ranks)(
            np.zeros((8, 2), np.float32), group, "all_reduce"
        )


@nki.jit
def mixed_spaces(x, rg):
    src = staged(x, "src")
    dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    ncc.all_reduce(srcs=[src], dsts=[dst], replica_group=rg, op=nl.add)
    return src


@nki.jit
def multiply_reduce(x, rg):
    src = staged(x, "src")
    dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="dst")
    ncc.all_reduce(srcs=[src], dsts=[dst], replica_group=rg, op=nl.multiply)
    return dst


@pytest.mark.parametrize(
    "kernel,message",
    [
        (mixed_spaces, "must all be in HBM or all in SBUF"),
        (multiply_reduce, "op must be nl.add, nl.minimum or nl.maximum"),
    ],
)
def test_collective_operand_checks(kernel, message):
    with pytest.raises(nki.NkiValidationError, match=message):
        nki.simulate(kernel, num_ranks=2)(np.zeros((2, 2), np.float32), GROUP2)


def test_replica_group_rejects_overlapping_lists():
    with pytest.raises(nki.NkiValidationError, match="overlap"):
        ncc.ReplicaGroup([[0, 1], [1, 2]])
