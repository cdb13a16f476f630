"""Tensor-engine instructions: nc_matmul (PSUM accumulation) and nc_transpose."""

from collections.abc import Sequence

import torch

from .. import buffers, checks, dtypes, runtime
from ..enums import engine as E
from ..enums import matmul_perf_mode
from ..errors import fail, require
from ..tensor import NkiTensor
from ..tiles import read, write
from ..trace import issue, psum_written

# Sets: a membership test is one hash, not a comparison per member (each matmul asks 5).
_INPUTS = frozenset(
    (
        dtypes.float8_e4m3,
        dtypes.float8_e4m3fn,
        dtypes.float8_e5m2,
        dtypes.bfloat16,
        dtypes.float16,
        dtypes.tfloat32,
        dtypes.float32,
    )
)
_FP8 = frozenset((dtypes.float8_e4m3, dtypes.float8_e4m3fn, dtypes.float8_e5m2))
_WIDE = frozenset((dtypes.float32, dtypes.tfloat32))
GEMM_STATIONARY_FMAX = 128


def _bank_span(where, dst, bank):
    """PSUM before NeuronCore-v4: a matmul result must stay within one 2 KiB bank per partition."""
    size = dst.itemsize
    lo = dst._alloc.col_bytes + (dst._offset - dst._origin) % dst._pitch * size
    hi = lo + (sum((c - 1) * s for c, s in zip(dst.shape[1:], dst.strides[1:])) + 1) * size
    if lo // bank != (hi - 1) // bank:
        fail(
            where,
            f"dst occupies bytes [{lo}, {hi}) of each PSUM partition, crossing a {bank}-byte bank "
            f"boundary (psum_bank_fmax is {bank // 4} fp32)",
        )


def _check_dtypes(where, stationary, moving, dst, is_transpose, target):
    for label, t in (("stationary", stationary), ("moving", moving)):
        if t.dtype not in _INPUTS:
            fail(
                where,
                f"{label} dtype {dtypes.name(t.dtype)} is not supported "
                "(float8_e4m3/float8_e5m2/bfloat16/float16/tfloat32/float32)",
            )
    wide = (stationary.dtype in _WIDE, moving.dtype in _WIDE)
    if wide[0] != wide[1]:
        fail(
            where,
            "if one input is float32/tfloat32 the other must be too (stationary "
            f"{dtypes.name(stationary.dtype)}, moving {dtypes.name(moving.dtype)})",
        )
    if is_transpose:
        if dst.dtype != stationary.dtype:
            fail(
                where,
                f"transpose dst dtype {dtypes.name(dst.dtype)} must equal the input dtype "
                f"{dtypes.name(stationary.dtype)}",
            )
    elif target.generation >= 4:
        if dst.dtype not in (dtypes.float32, dtypes.bfloat16):
            fail(
                where,
                f"dst must be float32 or bfloat16 on NeuronCore-v4, got {dtypes.name(dst.dtype)}",
            )
    else:
        if dst.dtype != dtypes.float32:
            fail(
                where,
                f"dst must be float32 (fp32 accumulation) on NeuronCore-v{target.generation} "
                f"({target.name}), got {dtypes.name(dst.dtype)}",
            )


def _tiling(where, tile_position, tile_size, generation):
    """Row/column tile limits from Tensor Engine tiling mode (default: the full 128x128 array)."""
    if not tile_position and not tile_size:
        return 128, 128
    require(
        bool(tile_position) and bool(tile_size),
        where,
        "tile_position and tile_size must both be set to use tiling mode",
    )
    row, col = (int(v) for v in tile_size)
    allowed = (64, 128) if generation < 3 else (32, 64, 128)
    if not (row in allowed and col in allowed):
        fail(where, f"tile_size {tuple(tile_size)} must use sizes {allowed}")
    start_row, start_col = (int(v) for v in tile_position)
    aligned = start_row % row == 0 and start_col % col == 0
    if not (aligned and start_row < 128 and start_col < 128):
        fail(
            where,
            f"tile_position {tuple(tile_position)} must be multiples of tile_size "
            f"{tuple(tile_size)}",
        )
    return row, col


def _check_double_row(where, stationary, moving, tile_size, target):
    """FP8 double-row mode: NC-v3+, float8 inputs laid out as [K, 2, F], no column tiling."""
    require(target.generation >= 3, where, "double_row needs NeuronCore-v3 or newer")
    require(
        stationary.dtype in _FP8 and moving.dtype in _FP8, where, "double_row needs float8 inputs"
    )
    shapes_ok = stationary.ndim == moving.ndim == 3 and stationary.shape[1] == moving.shape[1] == 2
    if not shapes_ok:
        fail(where, f"double_row needs [K, 2, F] inputs, got {stationary.shape} and {moving.shape}")
    require(not tile_size or tile_size[1] == 128, where, "double_row cannot use column tiling")


def _check_shapes(where, dst, stationary, moving, rows, cols, contraction, target):
    """Partition/free size limits of the operands; returns (K, M, N)."""
    parts = stationary.shape[0]
    if moving.shape[0] != parts:
        fail(
            where,
            f"contraction (partition) dimension mismatch: stationary has {parts}, "
            f"moving has {moving.shape[0]}",
        )
    checks.partitions(where, "stationary", stationary, rows)
    m = stationary.free_size // contraction
    n = moving.free_size // contraction
    m_max = min(cols, GEMM_STATIONARY_FMAX)
    if m > m_max:
        fail(where, f"stationary free size {m} exceeds gemm_stationary_fmax {m_max}")
    n_max = target.moving_fmax(dst.itemsize)
    if n > n_max:
        fail(where, f"moving free size {n} exceeds gemm_moving_fmax {n_max} on {target.name}")
    if dst.shape[0] != m:
        fail(
            where, f"dst partition dimension {dst.shape[0]} must equal the stationary free size {m}"
        )
    if dst.free_size != n:
        fail(where, f"dst free size {dst.free_size} must equal the moving free size {n}")
    if target.generation < 4:
        _bank_span(where, dst, target.psum_bank_bytes)
    return parts, m, n


def accumulate_into(where, dst, result, accumulate):
    """Write the ``[M, N]`` fp32 ``result`` to PSUM ``dst``, adding what is there when
    ``accumulate`` is True, or (None) where this tile's PSUM was written before."""
    m, n = result.shape
    written = psum_written(dst)
    if accumulate is None and not isinstance(written, bool):
        result = torch.where(written.reshape(m, n), read(dst).reshape(m, n) + result, result)
    elif accumulate or (accumulate is None and written):
        require(
            written if isinstance(written, bool) else bool(written.all()),
            where,
            "accumulate=True on PSUM that was never written (undefined behaviour)",
        )
        view = dst.host
        if view.dtype == torch.float32 and 0 not in view.stride():
            # In place: the same fp32 sum without a temporary and a copy back.
            view.add_(result.reshape(view.shape))
            return
        result = read(dst).reshape(m, n) + result
    write(dst, result)


def nc_matmul(
    dst: NkiTensor,
    stationary: NkiTensor,
    moving: NkiTensor,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    accumulate: bool | None = None,
    tile_position: Sequence[int] = (),
    tile_size: Sequence[int] = (),
    perf_mode: matmul_perf_mode = matmul_perf_mode.none,
    name: str | None = None,
) -> None:
    """``dst (+)= stationary.T @ moving``: contraction over partitions, fp32 accumulation."""
    where = "nc_matmul"
    target = runtime.current().target
    checks.tensor(where, "dst", dst)
    checks.buffer(where, "dst", dst, buffers.psum)
    for label, t in (("stationary", stationary), ("moving", moving)):
        checks.tensor(where, label, t)
        checks.buffer(where, label, t, buffers.sbuf)
    _check_dtypes(where, stationary, moving, dst, is_transpose, target)
    rows, cols = _tiling(where, tile_position, tile_size, target.generation)
    if not isinstance(perf_mode, matmul_perf_mode):
        fail(where, f"perf_mode must be a matmul_perf_mode, got {perf_mode!r}")
    double_row = perf_mode is matmul_perf_mode.double_row
    if double_row:
        _check_double_row(where, stationary, moving, tile_size, target)
    contraction = 2 if double_row else 1
    parts, m, n = _check_shapes(where, dst, stationary, moving, rows, cols, contraction, target)

    s = read(stationary).reshape(parts * contraction, m)
    mv = read(moving).reshape(parts * contraction, n)
    accumulate_into(where, dst, s.T @ mv, accumulate)
    issue(
        where,
        "tensor",
        [dst],
        [stationary, moving],
        free=n,
        moving=n,
        fp32=stationary.dtype in _WIDE,
        double_row=double_row,
        flops=0 if is_transpose else 2 * parts * contraction * m * n,
    )


def nc_transpose(
    dst: NkiTensor, data: NkiTensor, engine: E = E.unknown, name: str | None = None
) -> None:
    """2-D transpose of partition and (flattened) free axes, on the Tensor or Vector engine."""
    where = "nc_transpose"
    checks.tensor(where, "dst", dst)
    checks.tensor(where, "data", data)
    eng = checks.engine(where, engine, E.tensor, E.vector)
    if eng is E.unknown:
        pe_path = data.buffer is buffers.sbuf and dst.buffer is buffers.psum
        eng = E.tensor if pe_path else E.vector
    limit = 128 if eng is E.tensor else 32
    if eng is E.tensor:
        checks.buffer(where, "data", data, buffers.sbuf)
        checks.buffer(where, "dst", dst, buffers.psum)
    else:
        checks.on_chip(where, "data", data)
        checks.on_chip(where, "dst", dst)
    checks.partitions(where, "data", data, limit)
    if data.free_size > limit:
        fail(where, f"data free size {data.free_size} exceeds maximum {limit} ({eng.name} engine)")
    checks.same_dtype(where, "dst", dst, "data", data)
    if not (dst.shape[0] == data.free_size and dst.free_size == data.shape[0]):
        fail(where, f"dst shape {dst.shape} is not the transpose of data shape {data.shape}")
    write(dst, data.host.reshape(data.shape[0], -1).T)
    if eng is E.tensor:
        issue(
            where,
            "tensor",
            [dst],
            [data],
            free=data.shape[0],
            moving=data.shape[0],
            fp32=data.itemsize == 4,
        )
    else:
        issue(where, "vector", [dst], [data])
