"""nki.language: tensors and views, creation, dtypes, loops, SPMD queries and tile math."""

import math

import numpy as np
import torch

import nki
import nki.isa as nisa
import nki.language as nl


def sbuf_from(values, dtype=nl.float32):
    """An SBUF tile holding ``values``."""
    values = torch.as_tensor(values)
    t = nl.ndarray(tuple(values.shape), dtype=dtype, buffer=nl.sbuf)
    t.host.copy_(values)
    return t


def test_tensor_attributes_follow_the_language_guide():
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    assert t.shape == (128, 64) and t.strides == (64, 1) and t.offset == 0
    assert t.dtype == nl.float32 and t.buffer is nl.sbuf and t.ndim == 2 and t.size == 128 * 64
    assert t.get_pattern() == [[64, 128], [1, 64]] and t.is_contiguous()


def test_fresh_allocations_hold_sentinels():
    assert torch.isnan(nl.ndarray((4, 8), dtype=nl.bfloat16).host).all()
    assert (nl.ndarray((4, 8), dtype=nl.int32).host == 4).all()
    assert (nl.ndarray((4, 8), dtype=nl.uint8, buffer=nl.shared_hbm).host == 4).all()


def test_on_chip_indexing_keeps_partition_dim_and_two_dims():
    t = nl.ndarray((64, 64, 64), dtype=nl.float32, buffer=nl.sbuf)
    assert t[0, 0, 10].shape == (1, 1)
    assert t[:, 0].shape == (64, 64)
    assert t[:, 0, 10].shape == (64, 1)
    assert t[0, ...].shape == (1, 64, 64)
    assert t[..., ::2].shape == (64, 64, 32)
    h = nl.ndarray((4, 128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    assert h[0, :, :].shape == (128, 32)


def test_views_share_storage():
    t = nl.zeros((128, 64), dtype=nl.float32)
    u = t.reshape((128, 8, 8))
    nisa.memset(dst=u[:, 2:4, :], value=1.0)
    assert (t.host[:, 16:32] == 1).all() and (t.host[:, :16] == 0).all()


def test_ds_slices_by_start_and_size():
    t = sbuf_from(torch.arange(16.0).reshape(2, 8))
    v = t[:, nl.ds(3, 4)]
    assert v.shape == (2, 4) and v.offset == 3
    assert v.host.tolist() == [[3, 4, 5, 6], [11, 12, 13, 14]]


def test_permute_broadcast_expand_select_flatten():
    t = sbuf_from(torch.arange(24.0).reshape(2, 3, 4))
    assert torch.equal(t.permute((0, 2, 1)).host, t.host.permute(0, 2, 1))
    assert t.expand_dim(1).shape == (2, 1, 3, 4)
    assert t.expand_dim(1).broadcast(1, 5).strides[1] == 0
    assert t.select(1, 2).host.tolist() == t.host[:, 2].tolist()
    assert t.flatten_dims(1, 2).shape == (2, 12)
    assert t.reshape_dim(2, (2, 2)).shape == (2, 3, 2, 2)
    assert t.slice(2, 1, 4, 2).host.tolist() == t.host[:, :, 1:4:2].tolist()


def test_view_reinterprets_dtype():
    t = sbuf_from(torch.ones(2, 4))
    bits = t.view(nl.uint8)
    assert bits.shape == (2, 16)
    assert bits.host[0, :4].tolist() == list(np.float32(1.0).tobytes())


def test_ap_addresses_storage_with_offset():
    t = sbuf_from(torch.arange(32.0).reshape(4, 8))
    every_other = t.ap([[8, 4], [2, 4]])
    assert every_other.host.tolist() == t.host[:, ::2].tolist()
    shifted = t.ap([[8, 4], [2, 4]], offset=1)
    assert shifted.host.tolist() == t.host[:, 1::2].tolist()
    # Not composable: the pattern restarts from the storage but keeps the view's offset.
    assert t[:, 2:].ap([[8, 4], [1, 2]]).host.tolist() == t.host[:, 2:4].tolist()


def test_hbm_ap_can_express_overlapping_windows():
    h = nl.ndarray((10,), dtype=nl.float32, buffer=nl.shared_hbm)
    h.host.copy_(torch.arange(10.0))
    windows = h.ap([[2, 4], [1, 3]])
    assert windows.host.tolist() == [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6, 7, 8]]


def test_dtype_normalization_accepts_numpy_torch_and_strings():
    for spec in (np.float32, "float32", torch.float32, float):
        assert nl.ndarray((2, 2), dtype=spec).dtype == torch.float32
    assert nl.ndarray((2, 2), dtype="bfloat16").dtype == nl.bfloat16
    # tfloat32 is its own NKI type, held in float32 storage on the host.
    assert nl.tfloat32 != nl.float32 and nl.ndarray((2, 2), nl.tfloat32).host.dtype == torch.float32


def test_creation_helpers():
    assert (nl.zeros((4, 4), nl.float32).host == 0).all()
    assert (nl.ones((4, 4), nl.int32).host == 1).all()
    assert (nl.full((4, 4), 2.5, nl.float32, buffer=nl.psum).host == 2.5).all()
    src = nl.zeros((4, 6), nl.float16)
    assert nl.zeros_like(src).shape == (4, 6) and nl.empty_like(src, dtype=nl.int8).dtype == nl.int8
    r = nl.rand((8, 8))
    assert ((r.host >= 0) & (r.host < 1)).all()
    eye = nl.shared_identity_matrix(4, dtype=nl.float32)
    assert nl.is_sbuf(eye) and torch.equal(eye.host, torch.eye(4))


def test_buffer_predicates_and_tile_size(target):
    t = nl.ndarray((2, 2), nl.float32, buffer=nl.psum)
    assert nl.is_psum(t) and nl.is_on_chip(t) and not nl.is_sbuf(t) and not nl.is_hbm(t)
    assert nl.hbm is nl.private_hbm
    assert nl.tile_size.pmax == 128 and nl.tile_size.gemm_moving_fmax == 512
    assert nl.tile_size.psum_fmax == 512 and nl.tile_size.bn_stats_fmax == 512
    target("trn3")
    assert nl.tile_size.sbuf_fmax_bytes == 256 * 1024
    target("trn2")
    assert nl.tile_size.total_available_sbuf_size == 224 * 1024  # per partition, as documented


def test_ranges_are_plain_ranges():
    assert list(nl.affine_range(3)) == [0, 1, 2]
    assert list(nl.sequential_range(1, 7, 2)) == [1, 3, 5]
    assert list(nl.static_range(2)) == [0, 1]
    assert list(nl.range(2, 8, 3)) == [2, 5]
    reg = nisa.register_alloc(3)
    assert [int(i) for i in nl.dynamic_range(reg)] == [0, 1, 2]


def test_elementwise_math_broadcasts_and_promotes():
    a = sbuf_from(torch.randn(4, 8))
    b = sbuf_from(torch.randn(4, 1), dtype=nl.bfloat16)
    out = nl.add(a, b)
    assert out.dtype == nl.float32 and out.shape == (4, 8) and nl.is_sbuf(out)
    torch.testing.assert_close(out.host, a.host + b.host.float())
    torch.testing.assert_close(nl.multiply(a, 3.0).host, a.host * 3)
    torch.testing.assert_close(nl.exp(a).host, torch.exp(a.host))
    torch.testing.assert_close(
        nl.gelu_apprx_tanh(a).host, torch.nn.functional.gelu(a.host, approximate="tanh")
    )
    torch.testing.assert_close(nl.maximum(a, 0.0).host, torch.relu(a.host))
    assert nl.greater(a, 0.0).dtype == nl.bool_
    assert torch.equal(nl.greater(a, 0.0).host, a.host > 0)
    torch.testing.assert_close(nl.where(nl.greater(a, 0.0), a, 0.0).host, torch.relu(a.host))
    torch.testing.assert_close((a * 2 + 1).host, a.host * 2 + 1)


def test_bitwise_ops_use_integers():
    a = sbuf_from(torch.tensor([[12, 10]]), dtype=nl.int32)
    b = sbuf_from(torch.tensor([[10, 6]]), dtype=nl.int32)
    assert nl.bitwise_and(a, b).host.tolist() == [[8, 2]]
    assert nl.left_shift(a, 1).host.tolist() == [[24, 20]]


def test_reductions_over_free_axes():
    x = torch.randn(8, 3, 5)
    t = sbuf_from(x)
    torch.testing.assert_close(nl.sum(t, axis=2).host, x.sum(2))
    torch.testing.assert_close(nl.max(t, axis=(1, 2)).host, x.amax((1, 2)).reshape(8, 1))
    torch.testing.assert_close(nl.mean(t, axis=[1], keepdims=True).host, x.mean(1, keepdim=True))
    torch.testing.assert_close(nl.var(t, axis=2).host, x.var(2, unbiased=False))
    torch.testing.assert_close(nl.prod(t, axis=2).host, x.prod(2))


def test_softmax_and_rms_norm_helpers():
    x = torch.randn(16, 32)
    w = torch.rand(1, 32)
    t, wt = sbuf_from(x), sbuf_from(w)
    torch.testing.assert_close(nl.softmax(t, axis=1).host, torch.softmax(x, 1))
    expected = x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(nl.rms_norm(t, wt, axis=1).host, expected)


def test_matmul_and_transpose():
    x, y = torch.randn(64, 32), torch.randn(32, 96)
    out = nl.matmul(sbuf_from(x), sbuf_from(y))
    assert nl.is_psum(out) and out.dtype == nl.float32
    torch.testing.assert_close(out.host, x @ y)
    out_t = nl.matmul(sbuf_from(x.T.contiguous()), sbuf_from(y), transpose_x=True)
    torch.testing.assert_close(out_t.host, x @ y)
    tr = nl.transpose(sbuf_from(x))
    assert nl.is_psum(tr) and torch.equal(tr.host, x.T)


def test_psum_plus_equals_accumulates_matmuls():
    xs = [torch.randn(128, 16) for _ in range(3)]
    ys = [torch.randn(128, 32) for _ in range(3)]
    acc = nl.zeros((16, 32), nl.float32, buffer=nl.psum)
    for x, y in zip(xs, ys):
        acc += nl.matmul(sbuf_from(x), sbuf_from(y), transpose_x=True)
    torch.testing.assert_close(acc.host, sum(x.T @ y for x, y in zip(xs, ys)))


def test_load_store_copy_and_setitem():
    src = nl.ndarray((4, 6), nl.float32, buffer=nl.shared_hbm)
    src.host.copy_(torch.randn(4, 6))
    tile = nl.load(src, dtype=nl.bfloat16)
    assert nl.is_sbuf(tile) and tile.dtype == nl.bfloat16
    copied = nl.copy(tile, dtype=nl.float32)
    dst = nl.ndarray((4, 6), nl.float32, buffer=nl.shared_hbm)
    nl.store(dst, copied)
    torch.testing.assert_close(dst.host, src.host.bfloat16().float())
    init = nl.zeros((4, 1), nl.float32)
    init[:, :] = copied[:, 5]
    torch.testing.assert_close(init.host, copied.host[:, 5:6])
    dst[0:2, :] = 0.0
    assert (dst.host[:2] == 0).all()


def test_broadcast_to_and_expand_dims():
    row = sbuf_from(torch.arange(4.0).reshape(1, 4))
    full = nl.broadcast_to(row, (8, 4))
    assert full.shape == (8, 4) and (full.host == torch.arange(4.0)).all()
    assert nl.expand_dims(full, 1).shape == (8, 1, 4)


def test_program_queries_inside_a_grid():
    seen = []

    @nki.jit
    def probe(x):
        seen.append(
            (
                nl.program_id(0),
                nl.program_id(1),
                nl.num_programs(),
                nl.num_programs(1),
                nl.program_ndim(),
            )
        )

    probe[2, 3](np.zeros(1, np.float32))
    assert len(seen) == 6 and seen[-1] == (1, 2, 6, 3, 2)
    probe(np.zeros(1, np.float32))
    assert seen[-1] == (0, 0, 1, 1, 0)


def test_typing_annotations():
    from nki.typing import mutable_tensor, tensor

    assert mutable_tensor[nl.float32, 2, 3] == tensor[nl.float32, 2, 3]
    ann = tensor[128, 512]
    assert ann.shape == (128, 512) and ann.dtype is None
    assert tensor[nl.bfloat16, 4, 4].dtype == torch.bfloat16
    assert math.prod(tensor[(2, 3)].shape) == 6
