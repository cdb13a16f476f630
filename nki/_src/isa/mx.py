"""OCP microscaling (MX) instructions of NeuronCore-v4: quantize_mx and nc_matmul_mx.

An MX scaling group is 32 values: 8 partitions x 4 consecutive free elements (one x4 word).
Group ``i`` (data partitions ``8i..8i+7``) keeps its scale in the same SBUF quadrant as its
data: at partition ``(i // 4) * 32 + i % 4`` of the scale view, so each quadrant holds four
scale rows and a scale view may start at offset 0, 4, 8 or 12 of a quadrant to pack the
scales of several tensors into one tile.
"""

import functools
from collections.abc import Sequence

import torch

from .. import buffers, checks, dtypes, runtime
from ..errors import fail, require
from ..tensor import NkiTensor
from ..tiles import read_pf
from ..trace import issue
from .matmul import _tiling, accumulate_into

QUADRANT = 32
GROUP_PARTITIONS = 8
SCALE_OFFSETS = (0, 4, 8, 12)
SCALE_DTYPES = (dtypes.float8_e8m0fnu, dtypes.uint8)
E8M0_BIAS = 127
E8M0_NAN = 255


def _require_v4(where):
    target = runtime.current().target
    require(
        target.generation >= 4,
        where,
        f"requires NeuronCore-v4 (trn3); target {target.name} is NeuronCore-v{target.generation}",
    )


@functools.cache
def scale_rows(groups):
    """Partitions of the scale view holding the scales of ``groups`` scaling groups (a shared
    tensor: callers only index with it)."""
    i = torch.arange(groups)
    return (i // 4) * QUADRANT + i % 4


def _check_data_partitions(where, label, data):
    parts = data.shape[0]
    require(
        parts % QUADRANT == 0 and parts <= 128,
        where,
        f"{label} partition dimension {parts} must be a multiple of {QUADRANT}, at most 128",
    )
    require(
        data.partition_offset % QUADRANT == 0,
        where,
        f"{label} starts at partition {data.partition_offset}, not on a {QUADRANT}-partition "
        "quadrant boundary",
    )


def _check_scale(where, label, scale, data, columns):
    """``scale`` holds the scales of ``data`` (``columns`` scale columns per row)."""
    checks.on_chip(where, label, scale, buffers.sbuf)
    require(
        scale.dtype in SCALE_DTYPES,
        where,
        f"{label} dtype {dtypes.name(scale.dtype)} must be float8_e8m0fnu or uint8",
    )
    groups = data.shape[0] // GROUP_PARTITIONS
    needed = int(scale_rows(groups)[-1]) + 1
    require(
        scale.shape[0] >= needed,
        where,
        f"{label} has {scale.shape[0]} partitions; the scales of {data.shape[0]} data partitions "
        f"occupy partitions up to {needed - 1} (4 per {QUADRANT}-partition quadrant)",
    )
    start = scale.partition_offset
    require(
        start % QUADRANT in SCALE_OFFSETS,
        where,
        f"{label} starts at partition {start}: scales sit at offset 0, 4, 8 or 12 of a quadrant",
    )
    require(
        start // QUADRANT == data.partition_offset // QUADRANT,
        where,
        f"{label} starts in quadrant {start // QUADRANT} but its data starts in quadrant "
        f"{data.partition_offset // QUADRANT}; scales must sit in their data's quadrant",
    )
    require(
        scale.free_size >= columns,
        where,
        f"{label} has {scale.free_size} elements per partition, needs {columns}",
    )


def _scale_bits(scale):
    """Scale tile values as biased exponents ``[partitions, free]`` (int64)."""
    bits = scale.host.view(torch.uint8) if scale.dtype == dtypes.float8_e8m0fnu else scale.host
    return bits.reshape(scale.shape[0], -1).to(torch.int64)


def _factor_of_code():
    """2**(code - 127) as float32 for every e8m0 code, NaN for the NaN code."""
    codes = torch.arange(E8M0_NAN + 1)
    factors = torch.pow(2.0, (codes - E8M0_BIAS).to(torch.float64)).to(torch.float32)
    return torch.where(codes == E8M0_NAN, torch.tensor(float("nan")), factors)


_FACTOR_OF_CODE = _factor_of_code()


def _scale_factors(bits):
    """2**(bits - 127) as float32, NaN for the e8m0 NaN code (``bits``: int64 codes 0..255)."""
    return torch.index_select(_FACTOR_OF_CODE, 0, bits.flatten()).reshape(bits.shape)


def _dequantized(data, scale):
    """float32 ``[K, F, 4]`` values of x4 ``data`` ``[K, F]`` times their group scales."""
    parts, free = data.shape[0], data.free_size
    groups = parts // GROUP_PARTITIONS
    values = dtypes.unpack(data.host.reshape(parts, free), data.dtype)
    factors = _scale_factors(_scale_bits(scale)[scale_rows(groups), :free])
    scaled = values.reshape(groups, GROUP_PARTITIONS, free, 4) * factors[:, None, :, None]
    return scaled.reshape(parts, free, 4)


def quantize_mx(
    dst: NkiTensor, src: NkiTensor, dst_scale: NkiTensor, name: str | None = None
) -> None:
    """Quantize fp16/bf16 ``src`` ``[P, 4F]`` to MXFP8 words ``dst`` ``[P, F]`` and group scales.

    Each group's scale is ``2**(floor(log2(max|v|)) - (E_max - 1))`` (E_max = 8 for e4m3fn,
    15 for e5m2; ``2**-127`` for an all-zero group): twice the OCP sample algorithm's scale, so
    the largest values round without saturating.  Values are divided by the scale and rounded
    to nearest even.
    """
    where = "quantize_mx"
    _require_v4(where)
    checks.on_chip(where, "src", src, buffers.sbuf)
    checks.on_chip(where, "dst", dst, buffers.sbuf)
    checks.dtype_in(where, "src", src, dtypes.float16, dtypes.bfloat16)
    checks.dtype_in(where, "dst", dst, dtypes.float8_e4m3fn_x4, dtypes.float8_e5m2_x4)
    _check_data_partitions(where, "src", src)
    checks.same_partitions(where, "dst", dst, "src", src)
    require(
        src.free_size % 4 == 0,
        where,
        f"src free size {src.free_size} must be a multiple of 4 (one x4 word per 4 values)",
    )
    words = src.free_size // 4
    require(
        dst.free_size == words,
        where,
        f"dst free size {dst.free_size} must be a quarter of the src free size {src.free_size}",
    )
    _check_scale(where, "dst_scale", dst_scale, src, words)

    parts = src.shape[0]
    groups = parts // GROUP_PARTITIONS
    values = read_pf(src).reshape(groups, GROUP_PARTITIONS, words, 4)
    amax = values.abs().amax(dim=(1, 3))
    exponent = torch.frexp(amax).exponent.to(torch.int64) - 1  # floor(log2(amax))
    biased = (exponent - (dst.dtype.element.max_exp - 1) + E8M0_BIAS).clamp(0, E8M0_NAN - 1)
    biased = torch.where(amax == 0, torch.zeros_like(biased), biased)
    biased = torch.where(amax.isfinite(), biased, torch.full_like(biased, E8M0_NAN))
    factors = _scale_factors(biased)[:, None, :, None]
    scaled = (values / factors).reshape(parts, words * 4)
    dst.host.copy_(dtypes.pack(scaled, dst.dtype).reshape(dst.shape))

    try:
        scale_view = dst_scale.host.view(torch.uint8).view(dst_scale.shape[0], -1)
    except RuntimeError:
        fail(where, f"dst_scale view {dst_scale.shape} must be contiguous within each partition")
    scale_view[scale_rows(groups), :words] = biased.to(torch.uint8)
    issue(where, "vector", [dst, dst_scale], [src], free=words)


def nc_matmul_mx(
    dst: NkiTensor,
    stationary: NkiTensor,
    moving: NkiTensor,
    stationary_scale: NkiTensor,
    moving_scale: NkiTensor,
    tile_position: Sequence[int] | None = None,
    tile_size: Sequence[int] | None = None,
    accumulate: bool | None = None,
    name: str | None = None,
) -> None:
    """``dst (+)= dequant(stationary).T @ dequant(moving)`` over partitions and the 4 values of
    each x4 word (K = 4 x partitions), dequantizing with the group scales; fp32 accumulation."""
    where = "nc_matmul_mx"
    _require_v4(where)
    checks.tensor(where, "dst", dst)
    checks.buffer(where, "dst", dst, buffers.psum)
    for label, t in (("stationary", stationary), ("moving", moving)):
        checks.on_chip(where, label, t, buffers.sbuf)
        require(
            t.dtype in dtypes.PACKED,
            where,
            f"{label} dtype {dtypes.name(t.dtype)} must be float8_e5m2_x4, float8_e4m3fn_x4 or "
            "float4_e2m1fn_x4",
        )
        _check_data_partitions(where, label, t)
    checks.dtype_in(where, "dst", dst, dtypes.float32, dtypes.bfloat16)
    require(
        stationary.shape[0] == moving.shape[0],
        where,
        f"contraction (partition) dimension mismatch: stationary has {stationary.shape[0]}, "
        f"moving has {moving.shape[0]}",
    )
    rows, cols = _tiling(where, tile_position, tile_size, 4)
    require(cols == 128, where, "nc_matmul_mx supports only row tiling: column size must be 128")
    require(
        not tile_position or int(tile_position[1]) == 0,
        where,
        f"tile_position {tuple(tile_position or ())} must start at column 0",
    )
    checks.partitions(where, "stationary", stationary, rows)
    m, n = stationary.free_size, moving.free_size
    require(
        m % 2 == 0 and m <= 128,
        where,
        f"stationary free size {m} must be even and at most 128",
    )
    n_max = runtime.current().target.psum_partition_bytes // dst.itemsize
    require(
        n <= n_max,
        where,
        f"moving free size {n} exceeds {n_max} (the whole PSUM partition in {dst.dtype})",
    )
    require(
        dst.shape[0] == m,
        where,
        f"dst partition dimension {dst.shape[0]} must equal the stationary free size {m}",
    )
    require(
        dst.free_size == n,
        where,
        f"dst free size {dst.free_size} must equal the moving free size {n}",
    )
    _check_scale(where, "stationary_scale", stationary_scale, stationary, m)
    _check_scale(where, "moving_scale", moving_scale, moving, n)

    s = _dequantized(stationary, stationary_scale)
    mv = _dequantized(moving, moving_scale)
    result = torch.einsum("kiq,kjq->ij", s, mv)
    accumulate_into(where, dst, result, accumulate)
    parts = stationary.shape[0]
    issue(
        where,
        "tensor",
        [dst],
        [stationary, moving],
        reads=(stationary_scale, moving_scale),
        free=n,
        moving=n,
        flops=2 * parts * 4 * m * n,
    )
