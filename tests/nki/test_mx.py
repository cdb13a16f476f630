"""MX (microscaling) dtypes and instructions against numpy/torch references: the x4 packed
dtypes, nisa.quantize_mx and nisa.nc_matmul_mx (NeuronCore-v4)."""

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from nki._src import dtypes, interop

FP4_VALUES = [
    0.0,
    0.5,
    1.0,
    1.5,
    2.0,
    3.0,
    4.0,
    6.0,
    -0.0,
    -0.5,
    -1.0,
    -1.5,
    -2.0,
    -3.0,
    -4.0,
    -6.0,
]
FP8 = {nl.float8_e4m3fn_x4: torch.float8_e4m3fn, nl.float8_e5m2_x4: torch.float8_e5m2}
MAX_EXP = {nl.float8_e4m3fn_x4: 8, nl.float8_e5m2_x4: 15}


@pytest.fixture(autouse=True)
def trn3(target):
    target("trn3")


def sbuf(values, dtype):
    """An SBUF tile holding the raw ``values`` (storage dtype) as ``dtype``."""
    values = torch.as_tensor(values)
    t = nl.ndarray(tuple(values.shape), dtype=dtype, buffer=nl.sbuf)
    t.host.copy_(values)
    t._alloc.written = True
    return t


def decode(codes, dtype):
    """float32 values of element codes ``[..., 4]`` of an x4 type (reference decoder)."""
    if dtype == nl.float4_e2m1fn_x4:
        return torch.tensor(FP4_VALUES)[codes.long()]
    return codes.to(torch.uint8).view(FP8[dtype]).float()


def pack_codes(codes, dtype):
    """x4 words of element codes ``[P, F, 4]`` (element j in bits [j*b, (j+1)*b))."""
    bits = 4 if dtype == nl.float4_e2m1fn_x4 else 8
    words = sum(codes[..., j].long() << (bits * j) for j in range(4))
    if bits == 8:
        return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)
    return torch.where(words >= 2**15, words - 2**16, words).to(torch.int16)


def random_codes(shape, dtype, gen):
    if dtype == nl.float4_e2m1fn_x4:
        return torch.randint(0, 16, shape, generator=gen)
    finite = decode(torch.arange(256), dtype).isfinite()
    pool = torch.arange(256)[finite]
    return pool[torch.randint(0, len(pool), shape, generator=gen)]


def quadrant_rows(groups):
    return [(i // 4) * 32 + i % 4 for i in range(groups)]


def test_x4_dtypes_are_named_packed_types():
    assert str(nl.float8_e4m3fn_x4) == "float8_e4m3fn_x4"
    assert nl.float4_e2m1fn_x4 == "float4_e2m1fn_x4"
    assert nl.float8_e5m2_x4 != nl.float8_e4m3fn_x4
    assert [nl.ndarray((2, 2), d).itemsize for d in (nl.float8_e4m3fn_x4, nl.float4_e2m1fn_x4)] == [
        4,
        2,
    ]
    assert nki.dtype.float8_e5m2_x4 is nl.float8_e5m2_x4


def test_x4_view_of_uint8_bytes_keeps_element_order():
    codes = torch.randint(0, 120, (4, 8, 4), dtype=torch.uint8)
    raw = sbuf(codes.reshape(4, 32), nl.uint8)
    words = raw.ap([[8, 4], [1, 8]], dtype=nl.float8_e4m3fn_x4)
    assert words.shape == (4, 8) and words.dtype == nl.float8_e4m3fn_x4
    assert torch.equal(words.host, pack_codes(codes, nl.float8_e4m3fn_x4))
    assert torch.equal(raw.view(nl.float8_e4m3fn_x4).host, words.host)


def test_compute_on_x4_tiles_is_refused():
    t = sbuf(torch.zeros(4, 4, dtype=torch.int32), nl.float8_e4m3fn_x4)
    dst = nl.ndarray((4, 4), nl.float32)
    with pytest.raises(nki.NkiValidationError, match="packed MX dtype float8_e4m3fn_x4"):
        nisa.tensor_copy(dst=dst, src=t)


def quantize_reference(x, dtype):
    """Doc formula: scale 2**(floor(log2(amax)) - (E_max - 1)) per 8x4 group, 2**-127 for 0."""
    p, f = x.shape
    amax = np.abs(x).reshape(p // 8, 8, f // 4, 4).max(axis=(1, 3))
    exp = np.floor(np.log2(np.where(amax > 0, amax, 1.0)))
    scale_exp = np.where(amax > 0, exp - (MAX_EXP[dtype] - 1), -127)
    factor = np.repeat(np.repeat(2.0**scale_exp, 8, axis=0), 4, axis=1)
    q = torch.from_numpy((x / factor).astype(np.float32)).to(FP8[dtype])
    return q, (scale_exp + 127).astype(np.uint8)


@pytest.mark.parametrize("dtype", [nl.float8_e4m3fn_x4, nl.float8_e5m2_x4])
@pytest.mark.parametrize("parts", [32, 128])
def test_quantize_mx_matches_doc_formula(dtype, parts):
    gen = torch.Generator().manual_seed(parts)
    x = (torch.randn(parts, 64, generator=gen) * 3).to(torch.bfloat16)
    x[8:16, 4:8] = 0  # an all-zero group gets scale 2**-127
    src = sbuf(x, nl.bfloat16)
    dst = nl.ndarray((parts, 16), dtype)
    scale = nl.ndarray((parts if parts > 32 else 4, 16), nl.uint8)
    nisa.quantize_mx(dst=dst, src=src, dst_scale=scale)

    q_ref, scale_ref = quantize_reference(x.float().numpy(), dtype)
    rows = quadrant_rows(parts // 8)
    assert np.array_equal(scale.host[rows].numpy(), scale_ref)
    assert scale_ref[1, 1] == 0
    words = dst.host
    codes = torch.stack([(words.long() >> (8 * j)) & 0xFF for j in range(4)], -1)
    assert torch.equal(codes.reshape(parts, 64).to(torch.uint8), q_ref.view(torch.uint8))


def test_quantize_mx_packs_scales_at_quadrant_offsets():
    gen = torch.Generator().manual_seed(1)
    a = sbuf(torch.randn(128, 32, generator=gen).to(torch.bfloat16), nl.bfloat16)
    b = sbuf((torch.randn(128, 64, generator=gen) * 100).to(torch.bfloat16), nl.bfloat16)
    packed = sbuf(torch.full((128, 16), 7, dtype=torch.uint8), nl.uint8)
    nisa.quantize_mx(dst=nl.ndarray((128, 8), nl.float8_e4m3fn_x4), src=a, dst_scale=packed[:, :8])
    nisa.quantize_mx(dst=nl.ndarray((128, 16), nl.float8_e4m3fn_x4), src=b, dst_scale=packed[4:, :])
    _, sa = quantize_reference(a.host.float().numpy(), nl.float8_e4m3fn_x4)
    _, sb = quantize_reference(b.host.float().numpy(), nl.float8_e4m3fn_x4)
    rows = quadrant_rows(16)
    assert np.array_equal(packed.host[rows, :8].numpy(), sa)
    assert np.array_equal(packed.host[[r + 4 for r in rows]].numpy(), sb)
    untouched = [p for p in range(128) if p % 32 >= 8]
    assert (packed.host[untouched] == 7).all()


def dequantize(codes, scale_bits, dtype):
    """float32 ``[K, F, 4]`` of codes ``[K, F, 4]`` times their group scales ``[K/8, F]``."""
    factors = torch.pow(2.0, scale_bits.double() - 127).float()
    return decode(codes, dtype) * factors.repeat_interleave(8, 0).unsqueeze(-1)


@pytest.mark.parametrize(
    "st_dtype,mv_dtype,out_dtype",
    [
        (nl.float8_e4m3fn_x4, nl.float8_e4m3fn_x4, nl.float32),
        (nl.float8_e5m2_x4, nl.float4_e2m1fn_x4, nl.bfloat16),
        (nl.float4_e2m1fn_x4, nl.float4_e2m1fn_x4, nl.float32),
    ],
)
def test_nc_matmul_mx_matches_dequantized_matmul(st_dtype, mv_dtype, out_dtype):
    gen = torch.Generator().manual_seed(2)
    k, m, n = 64, 32, 96
    st_codes = random_codes((k, m, 4), st_dtype, gen)
    mv_codes = random_codes((k, n, 4), mv_dtype, gen)
    st_scale = torch.randint(120, 130, (k // 8, m), generator=gen, dtype=torch.uint8)
    mv_scale = torch.randint(120, 130, (k // 8, n), generator=gen, dtype=torch.uint8)
    st_scale_tile = sbuf(torch.zeros(k, m, dtype=torch.uint8), nl.uint8)
    mv_scale_tile = sbuf(torch.zeros(k, n, dtype=torch.uint8), nl.uint8)
    st_scale_tile.host[quadrant_rows(k // 8)] = st_scale
    mv_scale_tile.host[quadrant_rows(k // 8)] = mv_scale
    dst = nl.ndarray((m, n), out_dtype, buffer=nl.psum)
    stationary = sbuf(pack_codes(st_codes, st_dtype), st_dtype)
    moving = sbuf(pack_codes(mv_codes, mv_dtype), mv_dtype)
    nisa.nc_matmul_mx(dst, stationary, moving, st_scale_tile, mv_scale_tile)

    ref = torch.einsum(
        "kiq,kjq->ij",
        dequantize(st_codes, st_scale, st_dtype).double(),
        dequantize(mv_codes, mv_scale, mv_dtype).double(),
    )
    # fp32 accumulation of K*4 products: compare against the double result at fp32 precision
    # of the largest magnitude (bf16 output: bf16 precision).
    scale = ref.abs().max().item()
    tol = (1e-6 if out_dtype == nl.float32 else 1e-2) * scale
    torch.testing.assert_close(dst.host.double(), ref, rtol=0, atol=tol)
    nisa.nc_matmul_mx(dst, stationary, moving, st_scale_tile, mv_scale_tile, accumulate=True)
    torch.testing.assert_close(dst.host.double(), 2 * ref, rtol=0, atol=2 * tol)


def test_quantize_then_matmul_mx_round_trip_in_a_kernel():
    @nki.jit
    def kernel(stationary_bf16, moving_bf16):
        tiles = []
        for src in (stationary_bf16, moving_bf16):
            p, f = src.shape
            sb = nl.ndarray((p, f), dtype=src.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=sb, src=src)
            data = nl.ndarray((p, f // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
            scale = nl.ndarray((p, f // 4), dtype=nl.float8_e8m0fnu, buffer=nl.sbuf)
            nisa.quantize_mx(dst=data, src=sb, dst_scale=scale)
            tiles += [data, scale]
        psum = nl.ndarray((tiles[0].shape[1], tiles[2].shape[1]), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(psum, tiles[0], tiles[2], tiles[1], tiles[3])
        out = nl.ndarray(psum.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        res = nl.ndarray(psum.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=psum)
        nisa.dma_copy(dst=out, src=res)
        return out

    gen = torch.Generator().manual_seed(3)
    # Interleaved layout: word f of partition p holds K rows p, p+128, p+256, p+384.
    st = torch.randn(128, 4 * 64, generator=gen).to(torch.bfloat16)
    mv = torch.randn(128, 4 * 128, generator=gen).to(torch.bfloat16)
    out = kernel(st, mv)
    ref = torch.einsum(
        "kiq,kjq->ij", st.float().reshape(128, 64, 4), mv.float().reshape(128, 128, 4)
    )
    # e4m3fn keeps 3 mantissa bits: the sum over K=512 stays within a few percent.
    assert (out - ref).abs().max() < 0.05 * ref.abs().max()


def test_x4_numpy_arguments_round_trip_with_metadata():
    @nki.jit
    def copy(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        assert x.dtype == nl.float8_e5m2_x4
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
        return out

    words = np.arange(32, dtype=np.uint32).reshape(4, 8) * 0x01010101
    x4 = words.view(np.dtype(np.uint32, metadata={"nki_dtype": "float8_e5m2_x4"}))
    out = copy(x4)
    assert out.dtype.metadata["nki_dtype"] == "float8_e5m2_x4"
    assert np.array_equal(out.view(np.uint32), words)


@pytest.mark.parametrize("x4", [nl.float8_e4m3fn_x4, nl.float8_e5m2_x4, nl.float4_e2m1fn_x4])
def test_x4_numpy_arrays_carry_their_type(x4):
    """``np.zeros(shape, dtype=nl.<x4>)`` names its type in ``str(arr.dtype)``, compares and
    hashes equal to it (dict lookups by array dtype), and runs through a kernel unchanged."""

    @nki.jit
    def copy(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
        return out

    arr = np.zeros((4, 8), dtype=x4)
    assert str(x4) in str(arr.dtype) and arr.dtype == x4 and x4 == arr.dtype
    assert x4.__name__ == str(x4)  # pytest and numpy-style tools label it by name
    assert {nl.float8_e4m3fn_x4: 1, nl.float8_e5m2_x4: 2, nl.float4_e2m1fn_x4: 3}[arr.dtype] == [
        nl.float8_e4m3fn_x4,
        nl.float8_e5m2_x4,
        nl.float4_e2m1fn_x4,
    ].index(x4) + 1
    raw = np.uint32 if x4.itemsize == 4 else np.uint16
    words = np.arange(32, dtype=raw).reshape(4, 8) * 0x0101
    arr.view(raw)[:] = words
    out = copy(arr)
    assert out.dtype == x4 and np.array_equal(out.view(raw), words)


@pytest.mark.parametrize("x4", [nl.float8_e4m3fn_x4, nl.float8_e5m2_x4, nl.float4_e2m1fn_x4])
def test_x4_numpy_results_refuse_numeric_conversion(x4):
    """A packed word is four values, not one: numpy refuses to convert it (TypeError, which
    harnesses catch to unpack), so a result wrong by 2x cannot pass a tolerance check on words."""
    values = torch.tensor([[1.0, -2.0, 0.5, 4.0] * 4])
    good = interop.to_numpy(dtypes.pack(values, x4), x4)
    wrong = interop.to_numpy(dtypes.pack(values * 2, x4), x4)
    for convert in (
        lambda a: a.astype(np.float32),
        lambda a: np.asarray(a, dtype=np.float32),
        lambda a: np.array(a, dtype=np.float64),
        lambda a: a.astype(np.int64),
        torch.from_numpy,
    ):
        with pytest.raises(TypeError):
            convert(wrong)
    with pytest.raises(TypeError):
        np.allclose(wrong, good, rtol=2e-2)
    assert not np.array_equal(wrong, good) and np.array_equal(good, good.copy())
    raw = np.uint32 if x4.itemsize == 4 else np.uint16
    assert torch.equal(dtypes.unpack(torch.from_numpy(good.view(raw).astype(np.int64)), x4), values)


def validation_case(name):
    """Run the named invalid call; returns the raised validation message."""
    gen = torch.Generator().manual_seed(4)
    bf16 = sbuf(torch.randn(64, 32, generator=gen).to(torch.bfloat16), nl.bfloat16)
    data = nl.ndarray((64, 8), nl.float8_e4m3fn_x4)
    scale = nl.ndarray((64, 8), nl.uint8)
    x4 = sbuf(torch.zeros(64, 8, dtype=torch.int32), nl.float8_e4m3fn_x4)
    psum = nl.ndarray((8, 8), nl.float32, buffer=nl.psum)
    calls = {
        "fp32 src": lambda: nisa.quantize_mx(data, sbuf(torch.zeros(64, 32), nl.float32), scale),
        "partitions": lambda: nisa.quantize_mx(data[:40], bf16[:40], scale),
        "scale offset": lambda: nisa.quantize_mx(data, bf16, nl.ndarray((128, 8), nl.uint8)[16:]),
        "scale quadrant": lambda: nisa.quantize_mx(data, bf16, nl.ndarray((128, 8), nl.uint8)[32:]),
        "odd stationary": lambda: nisa.nc_matmul_mx(
            nl.ndarray((7, 8), nl.float32, buffer=nl.psum), x4[:, :7], x4, scale, scale
        ),
        "unpacked input": lambda: nisa.nc_matmul_mx(psum, bf16[:, :8], x4, scale, scale),
        "scale rows": lambda: nisa.nc_matmul_mx(psum, x4, x4, scale[:8], scale),
    }
    with pytest.raises(nki.NkiValidationError) as info:
        calls[name]()
    return str(info.value)


@pytest.mark.parametrize(
    "name,message",
    [
        ("fp32 src", "src dtype float32 must be float16 or bfloat16"),
        ("partitions", "partition dimension 40 must be a multiple of 32"),
        ("scale offset", "scales sit at offset 0, 4, 8 or 12 of a quadrant"),
        ("scale quadrant", "starts in quadrant 1 but its data starts in quadrant 0"),
        ("odd stationary", "stationary free size 7 must be even"),
        ("unpacked input", "stationary dtype bfloat16 must be float8_e5m2_x4"),
        ("scale rows", "stationary_scale has 8 partitions"),
    ],
)
def test_mx_validation(name, message):
    assert message in validation_case(name)


def test_mx_instructions_need_trn3(target):
    target("trn2")
    with pytest.raises(nki.NkiValidationError, match="requires NeuronCore-v4"):
        nisa.quantize_mx(
            nl.ndarray((32, 1), nl.float8_e4m3fn_x4),
            nl.ndarray((32, 4), nl.bfloat16),
            nl.ndarray((4, 1), nl.uint8),
        )
