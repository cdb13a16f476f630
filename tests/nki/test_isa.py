"""nki.isa semantics, each instruction against a torch reference."""

import pytest
import torch

import nki.isa as nisa
import nki.language as nl
from nki._src.trace import mark_written


def tile(values, dtype=nl.float32, buffer=nl.sbuf):
    """An on-chip tile holding ``values`` (marked as written)."""
    values = torch.as_tensor(values)
    t = nl.ndarray(tuple(values.shape), dtype=dtype, buffer=buffer)
    t.host.copy_(values)
    mark_written(t)
    return t


def empty(shape, dtype=nl.float32, buffer=nl.sbuf):
    return nl.ndarray(shape, dtype=dtype, buffer=buffer)


def test_dma_copy_casts_through_fp32_and_reshapes():
    src = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm)
    src.host.copy_(torch.randn(4, 8))
    dst = empty((4, 2, 4), nl.bfloat16)
    nisa.dma_copy(dst=dst, src=src)
    assert torch.equal(dst.host.reshape(4, 8), src.host.bfloat16())


def test_tensor_copy_and_memset():
    src = tile(torch.randn(8, 16), buffer=nl.psum)
    dst = empty((8, 4, 4), nl.bfloat16)
    nisa.tensor_copy(dst=dst, src=src)
    assert torch.equal(dst.host.reshape(8, 16), src.host.bfloat16())
    nisa.memset(dst=dst, value=3.0, engine=nisa.gpsimd_engine)
    assert (dst.host == 3).all()


@pytest.mark.parametrize(
    "op,ref",
    [
        (nl.add, torch.add),
        (nl.subtract, torch.sub),
        (nl.multiply, torch.mul),
        (nl.maximum, torch.maximum),
        (nl.divide, torch.div),
        (nl.power, torch.pow),
    ],
)
def test_tensor_tensor(op, ref):
    a, b = torch.rand(16, 32) + 0.5, torch.rand(16, 32) + 0.5
    dst = empty((16, 32))
    nisa.tensor_tensor(dst=dst, data1=tile(a), data2=tile(b), op=op)
    torch.testing.assert_close(dst.host, ref(a, b))


def test_tensor_tensor_int32_is_exact():
    a = torch.tensor([[2**30 + 1, 7]], dtype=torch.int32)
    dst = empty((1, 2), nl.int32)
    nisa.tensor_tensor(dst=dst, data1=tile(a, nl.int32), data2=tile(a, nl.int32), op=nl.subtract)
    assert dst.host.tolist() == [[0, 0]]


def test_tensor_scalar_two_ops_vector_operands_and_reverse():
    x = torch.randn(8, 16)
    v = torch.randn(8, 1)
    dst = empty((8, 16))
    nisa.tensor_scalar(
        dst=dst,
        data=tile(x),
        op0=nl.subtract,
        operand0=tile(v),
        reverse0=True,
        op1=nl.multiply,
        operand1=2.0,
    )
    torch.testing.assert_close(dst.host, (v - x) * 2)
    nisa.tensor_scalar(dst=dst, data=tile(x), op0=nl.abs, operand0=None)
    torch.testing.assert_close(dst.host, x.abs())


def test_scalar_tensor_tensor():
    x, y, s = torch.randn(8, 16), torch.randn(8, 16), torch.randn(8, 1)
    dst = empty((8, 16))
    nisa.scalar_tensor_tensor(
        dst=dst, data=tile(x), op0=nl.multiply, operand0=tile(s), op1=nl.add, operand1=tile(y)
    )
    torch.testing.assert_close(dst.host, x * s + y)


def test_activation_scale_bias_and_reduce():
    x, bias = torch.randn(8, 32), torch.randn(8, 1)
    dst, total = empty((8, 32)), empty((8, 1))
    nisa.activation(
        dst=dst,
        op=nl.exp,
        data=tile(x),
        bias=tile(bias),
        scale=0.5,
        reduce_op=nl.add,
        reduce_res=total,
    )
    torch.testing.assert_close(dst.host, torch.exp(0.5 * x + bias))
    torch.testing.assert_close(total.host, torch.exp(0.5 * x + bias).sum(1, keepdim=True))


def test_activation_reduce_registers_persist_across_instructions():
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    dst, total = empty((4, 8)), empty((4, 1))
    nisa.activation(dst=dst, op=nl.copy, data=tile(a), reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.activation(
        dst=dst, op=nl.copy, data=tile(b), reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=total
    )
    torch.testing.assert_close(total.host, (a.sum(1) + b.sum(1)).reshape(4, 1))


def test_activation_reduce_alias():
    x = torch.randn(4, 8)
    dst, total = empty((4, 8)), empty((4, 1))
    nisa.activation_reduce(dst=dst, op=nl.square, data=tile(x), reduce_op=nl.add, reduce_res=total)
    torch.testing.assert_close(total.host, x.square().sum(1, keepdim=True))


def test_tensor_reduce_axes_negate_keepdims():
    x = torch.randn(8, 4, 6)
    dst = empty((8, 1))
    nisa.tensor_reduce(dst=dst, op=nl.max, data=tile(x), axis=(1, 2), negate=True)
    torch.testing.assert_close(dst.host, -x.amax((1, 2)).reshape(8, 1))
    dst3 = empty((8, 4, 1))
    nisa.tensor_reduce(dst=dst3, op=nl.add, data=tile(x), axis=2, keepdims=True)
    torch.testing.assert_close(dst3.host, x.sum(2, keepdim=True))


def test_tensor_partition_reduce():
    x = torch.randn(16, 8)
    dst = empty((1, 8))
    nisa.tensor_partition_reduce(dst=dst, op=nl.add, data=tile(x))
    torch.testing.assert_close(dst.host, x.sum(0, keepdim=True))


def test_nc_matmul_accumulate_semantics():
    s1, m1 = torch.randn(128, 64), torch.randn(128, 256)
    s2, m2 = torch.randn(128, 64), torch.randn(128, 256)
    acc = empty((64, 256), buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=tile(s1, nl.bfloat16), moving=tile(m1, nl.bfloat16))
    first = s1.bfloat16().float().T @ m1.bfloat16().float()
    torch.testing.assert_close(acc.host, first)
    nisa.nc_matmul(dst=acc, stationary=tile(s2), moving=tile(m2))  # accumulate=None: adds
    torch.testing.assert_close(acc.host, first + s2.T @ m2, rtol=1e-5, atol=1e-4)
    nisa.nc_matmul(dst=acc, stationary=tile(s2), moving=tile(m2), accumulate=False)
    torch.testing.assert_close(acc.host, s2.T @ m2)
    nisa.nc_matmul(dst=acc, stationary=tile(s2), moving=tile(m2), accumulate=True)
    torch.testing.assert_close(acc.host, 2 * (s2.T @ m2))


def test_nc_matmul_partial_psum_writes_accumulate_per_element():
    acc = empty((4, 8), buffer=nl.psum)
    ones = tile(torch.ones(2, 4))
    nisa.nc_matmul(dst=acc[:, 0:4], stationary=ones, moving=tile(torch.ones(2, 4)))
    nisa.nc_matmul(dst=acc, stationary=ones, moving=tile(torch.ones(2, 8)))
    assert acc.host[:, :4].eq(4).all() and acc.host[:, 4:].eq(2).all()


@pytest.mark.parametrize("dtype", [nl.float32, nl.bfloat16])
def test_nc_matmul_k_tiles_accumulate_bit_exactly_in_instruction_order(dtype):
    """PSUM holds fp32: each instruction's product of the inputs' values (in fp32) is added to
    what the bank holds, one instruction after another, with no other rounding."""
    k_tiles = [(torch.randn(128, 64), torch.randn(128, 512)) for _ in range(4)]
    acc = empty((64, 512), buffer=nl.psum)
    expected = None
    for s, m in k_tiles:
        stationary, moving = tile(s, dtype), tile(m, dtype)
        nisa.nc_matmul(dst=acc, stationary=stationary, moving=moving)
        product = stationary.host.float().T @ moving.host.float()
        expected = product if expected is None else expected + product
    assert torch.equal(acc.host.view(torch.int32), expected.view(torch.int32))


def test_psum_written_state_after_a_partial_then_a_full_write():
    acc = empty((4, 8), buffer=nl.psum)
    ones = tile(torch.ones(2, 4))
    with pytest.raises(AssertionError, match="accumulate=True on PSUM that was never written"):
        nisa.nc_matmul(dst=acc, stationary=ones, moving=tile(torch.ones(2, 8)), accumulate=True)
    nisa.nc_matmul(dst=acc[:, 0:4], stationary=ones, moving=tile(torch.ones(2, 4)))
    with pytest.raises(AssertionError, match="accumulate=True on PSUM that was never written"):
        nisa.nc_matmul(dst=acc, stationary=ones, moving=tile(torch.ones(2, 8)), accumulate=True)
    nisa.nc_matmul(dst=acc, stationary=ones, moving=tile(torch.ones(2, 8)))
    nisa.nc_matmul(dst=acc, stationary=ones, moving=tile(torch.ones(2, 8)), accumulate=True)
    assert acc.host[:, :4].eq(6).all() and acc.host[:, 4:].eq(4).all()


def test_nc_matmul_double_row_fp8():
    s = torch.randn(128, 2, 32).to(torch.float8_e4m3fn)
    m = torch.randn(128, 2, 64).to(torch.float8_e4m3fn)
    acc = empty((32, 64), buffer=nl.psum)
    nisa.nc_matmul(
        dst=acc,
        stationary=tile(s, nl.float8_e4m3),
        moving=tile(m, nl.float8_e4m3),
        perf_mode=nisa.matmul_perf_mode.double_row,
    )
    expected = s.float().reshape(256, 32).T @ m.float().reshape(256, 64)
    torch.testing.assert_close(acc.host, expected, rtol=1e-5, atol=1e-4)


def test_nc_transpose_tensor_and_vector_engines():
    x = torch.randn(96, 40)
    dst = empty((40, 96), buffer=nl.psum)
    nisa.nc_transpose(dst=dst, data=tile(x))
    assert torch.equal(dst.host, x.T)
    small = torch.randn(16, 32)
    out = empty((32, 16))
    nisa.nc_transpose(dst=out, data=tile(small), engine=nisa.vector_engine)
    assert torch.equal(out.host, small.T)


def test_iota_and_affine_select_causal_mask():
    idx = empty((4, 2, 3), nl.int32)
    nisa.iota(dst=idx, pattern=[[10, 2], [1, 3]], offset=5, channel_multiplier=100)
    p, a, b = torch.meshgrid(torch.arange(4), torch.arange(2), torch.arange(3), indexing="ij")
    assert torch.equal(idx.host, (5 + 100 * p + 10 * a + b).int())
    scores = torch.randn(8, 8)
    masked = empty((8, 8))
    nisa.affine_select(
        dst=masked,
        pattern=[[-1, 8]],
        channel_multiplier=1,
        on_true_tile=tile(scores),
        on_false_value=-1e9,
        cmp_op=nl.greater_equal,
    )
    future = torch.ones(8, 8).triu(1).bool()
    torch.testing.assert_close(masked.host, scores.masked_fill(future, -1e9))


def test_bn_stats_and_bn_aggr_give_mean_and_variance():
    x = torch.randn(16, 1000) * 2 + 3
    stats = empty((16, 12))
    nisa.bn_stats(dst=stats[:, 0:6], data=tile(x[:, :512]))
    nisa.bn_stats(dst=stats[:, 6:12], data=tile(x[:, 512:]))
    moments = empty((16, 2))
    nisa.bn_aggr(dst=moments, data=stats)
    torch.testing.assert_close(moments.host[:, 0], x.mean(1))
    torch.testing.assert_close(moments.host[:, 1], x.var(1, unbiased=False), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "op0,op1,rev0,rev1",
    [
        (nl.multiply, nl.add, False, False),
        (nl.subtract, nl.multiply, True, False),
        (nl.add, nl.subtract, False, True),
    ],
)
def test_tensor_tensor_scan_matches_sequential_recurrence(op0, op1, rev0, rev1):
    d0, d1 = torch.rand(4, 100) * 0.5 + 0.5, torch.randn(4, 100) * 0.1
    init = torch.randn(4, 1)
    fns = {nl.multiply: torch.mul, nl.add: torch.add, nl.subtract: torch.sub}
    expected, r = [], init[:, 0]
    for i in range(100):
        v = fns[op0](r, d0[:, i]) if rev0 else fns[op0](d0[:, i], r)
        r = fns[op1](d1[:, i], v) if rev1 else fns[op1](v, d1[:, i])
        expected.append(r)
    dst = empty((4, 100))
    nisa.tensor_tensor_scan(
        dst=dst,
        data0=tile(d0),
        data1=tile(d1),
        initial=tile(init),
        op0=op0,
        op1=op1,
        reverse0=rev0,
        reverse1=rev1,
    )
    torch.testing.assert_close(dst.host, torch.stack(expected, 1), rtol=1e-4, atol=1e-5)


def test_reciprocal_max8_predicated_copy():
    x = torch.rand(4, 20) + 0.1
    out = empty((4, 20))
    nisa.reciprocal(dst=out, data=tile(x))
    torch.testing.assert_close(out.host, 1 / x)
    top = empty((4, 8))
    nisa.max8(dst=top, src=tile(x))
    torch.testing.assert_close(top.host, x.topk(8, 1).values)
    pred = tile((x > 0.5).to(torch.uint8), nl.uint8)
    dst = tile(torch.zeros(4, 20))
    nisa.tensor_copy_predicated(dst=dst, src=tile(x), predicate=pred)
    torch.testing.assert_close(dst.host, torch.where(x > 0.5, x, 0.0))


def test_dma_transpose():
    src = nl.ndarray((16, 32), nl.bfloat16, buffer=nl.shared_hbm)
    src.host.copy_(torch.randn(16, 32))
    dst = empty((32, 16), nl.bfloat16)
    nisa.dma_transpose(dst=dst, src=src)
    assert torch.equal(dst.host, src.host.T)


def test_tensor_scalar_reduce_and_exponential_on_trn3(target):
    target("trn3")
    x = torch.randn(4, 16)
    dst, red = empty((4, 16)), empty((4, 1))
    nisa.tensor_scalar_reduce(
        dst=dst, data=tile(x), op0=nl.multiply, operand0=2.0, reduce_op=nl.max, reduce_res=red
    )
    torch.testing.assert_close(red.host, (2 * x).amax(1, keepdim=True))
    nisa.exponential(
        dst=dst,
        src=tile(x),
        max_value=tile(red.host),
        reduce_res=red,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
    )
    e = torch.exp(x - (2 * x).amax(1, keepdim=True))
    torch.testing.assert_close(dst.host, e)
    torch.testing.assert_close(red.host, e.sum(1, keepdim=True))
    assert nisa.get_nc_version() is nisa.nc_version.gen4


def test_registers():
    reg = nisa.register_alloc()
    nisa.register_move(reg, 7)
    out = nl.ndarray((1, 1), nl.int32)
    nisa.register_store(out, reg)
    assert out.host.item() == 7
    nisa.register_load(reg, tile([[3]], nl.int32))
    assert int(reg) == 3 and bool(reg)
