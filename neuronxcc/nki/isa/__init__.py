"""neuronxcc.nki.isa: the pre-0.2 instruction API, over the simulator's ``nki.isa``.

Old instructions return a new tile instead of writing a ``dst=`` argument (except
``dma_copy``, ``nc_stream_shuffle``, ``select_reduce``, ``tensor_copy_predicated`` and
``tensor_scalar_cumulative``, which took a destination already), accept ``mask=`` and
``dtype=`` (the output type, default: the input's), take NumPy functions as operators,
``affine_select`` takes a predicate on index expressions and ``iota`` an index expression.
"""

import math

import numpy as np
import torch

import nki.isa as new
import nki.language as nl
from nki import NkiValidationError
from nki._src.legacy_api import (
    fail,
    issue,
    normalize_dtype,
    promote_dtypes,
    read_pf,
    require,
    write,
)
from nki.isa import dge_mode, dma_engine, engine, nc_version, oob_mode, reduce_cmd
from nki.isa import matmul_perf_mode as _perf_mode
from nki.language import NkiTensor

from .._dma import dma
from .._index import Access, IndexExpr, Predicate
from .._masking import execute
from .._ops import resolve_op
from ..language import fp32

tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown
get_nc_version = new.get_nc_version


def _tile(where, shape, dtype, buffer=nl.sbuf):
    return NkiTensor.allocate(tuple(int(s) for s in shape), dtype, buffer, op=where)


def _returned(instruction, where, shape, dtype, buffer=nl.sbuf, *, mask, **operands):
    """Runs a 0.7 instruction into a new tile and returns it, as the pre-0.2 ISA calls do."""
    dst = _tile(where, shape, dtype, buffer)
    execute(instruction, where, mask=mask, writes=("dst",), dst=dst, **operands)
    return dst


def _free(t):
    return math.prod(t.shape[1:])


def _same_dtype(*tiles):
    return promote_dtypes(*(t.dtype for t in tiles if isinstance(t, (NkiTensor, Access))))


def activation(
    op,
    data,
    *,
    bias=None,
    scale=1.0,
    reduce_op=None,
    reduce_res=None,
    reduce_cmd=reduce_cmd.idle,
    mask=None,
    dtype=None,
    **kwargs,
):
    """``op(data * scale + bias)`` on the Scalar engine; optional add-reduce to ``reduce_res``."""
    dst = _tile("activation", data.shape, dtype or data.dtype)
    execute(
        new.activation,
        "activation",
        mask=mask,
        writes=("dst", "reduce_res"),
        dst=dst,
        op=resolve_op(op),
        data=data,
        bias=bias,
        scale=scale,
        reduce_op=resolve_op(reduce_op),
        reduce_res=reduce_res,
        reduce_cmd=reduce_cmd,
    )
    return dst


def activation_reduce(
    op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None, **kwargs
):
    """``activation`` with a free-axis reduction of its result into ``reduce_res``."""
    return activation(
        op,
        data,
        bias=bias,
        scale=scale,
        reduce_op=reduce_op,
        reduce_res=reduce_res,
        reduce_cmd=reduce_cmd.reset_reduce,
        mask=mask,
        dtype=dtype,
    )


def _predicate_select(dst, pred, on_true_tile, on_false_value):
    where = "affine_select"
    require(
        isinstance(pred, Predicate),
        where,
        "pred must be a predicate on nl.arange/nl.mgrid index expressions",
    )
    keep = np.broadcast_to(pred.values, on_true_tile.shape)
    value = torch.where(
        torch.from_numpy(keep.copy()).reshape(on_true_tile.shape[0], -1),
        read_pf(on_true_tile),
        torch.tensor(float(on_false_value)),
    )
    write(dst, value)
    issue(where, "gpsimd", [dst], [on_true_tile])


def affine_select(pred, on_true_tile, on_false_value, *, mask=None, dtype=None, **kwargs):
    """``on_true_tile`` where the affine predicate ``pred`` holds, else ``on_false_value``."""
    dst = _tile("affine_select", on_true_tile.shape, dtype or on_true_tile.dtype)
    execute(
        lambda dst, on_true_tile: _predicate_select(dst, pred, on_true_tile, on_false_value),
        "affine_select",
        mask=mask,
        writes=("dst",),
        dst=dst,
        on_true_tile=on_true_tile,
    )
    return dst


def bn_stats(data, *, mask=None, dtype=None, **kwargs):
    """Six mean/variance statistics per partition of ``data`` (at most 512 per partition)."""
    return _returned(
        new.bn_stats, "bn_stats", (data.shape[0], 6), dtype or data.dtype, mask=mask, data=data
    )


def bn_aggr(data, *, mask=None, dtype=None, **kwargs):
    """Mean and variance per partition from ``bn_stats`` results."""
    return _returned(
        new.bn_aggr, "bn_aggr", (data.shape[0], 2), dtype or data.dtype, mask=mask, data=data
    )


def dma_copy(
    *, dst, src, mask=None, dst_rmw_op=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown
):
    """Copy ``src`` to ``dst`` by DMA; either may be indexed by tile values (indirect DMA),
    ``dst_rmw_op`` combines with the destination, ``oob_mode`` handles indirect
    out-of-bounds indices (``error`` raises ``IndexError``, ``skip`` leaves them)."""
    execute(
        dma,
        "dma_copy",
        mask=mask,
        writes=("dst",),
        lazy=("dst", "src"),
        dst=dst,
        src=src,
        oob_mode=oob_mode,
        dge_mode=dge_mode,
        dst_rmw_op=dst_rmw_op,
    )


def dma_transpose(src, *, axes=None, mask=None, dtype=None, dge_mode=dge_mode.unknown, **kwargs):
    """A new SBUF tile holding ``src`` (HBM or SBUF, 2-D to 4-D) transposed by DMA."""
    perm = tuple(axes) if axes is not None else tuple(reversed(range(src.ndim)))
    require(
        dtype is None or normalize_dtype(dtype) == src.dtype,
        "dma_transpose",
        "dma_transpose cannot change the data type",
    )
    return _returned(
        new.dma_transpose,
        "dma_transpose",
        tuple(src.shape[p] for p in perm),
        src.dtype,
        mask=mask,
        src=src,
        axes=axes,
        dge_mode=dge_mode,
    )


def dropout(data, prob, *, mask=None, dtype=None, **kwargs):
    """``data`` with each element zeroed with probability ``prob`` (Vector engine)."""
    return _returned(
        new.dropout, "dropout", data.shape, dtype or data.dtype, mask=mask, data=data, prob=prob
    )


def _iota(dst, expr):
    write(dst, torch.from_numpy(np.ascontiguousarray(expr.values)).to(torch.int32))
    issue("iota", "gpsimd", [dst], [])


def iota(expr, dtype, *, mask=None, **kwargs):
    """A new SBUF tile holding the values of index expression ``expr`` (int32 math)."""
    require(
        isinstance(expr, IndexExpr),
        "iota",
        f"expr must be an nl.arange/nl.mgrid index expression, got {type(expr).__name__}",
    )
    shape = expr.shape if expr.ndim >= 2 else (expr.shape[0], 1)
    dst = _tile("iota", shape, dtype)
    execute(lambda dst: _iota(dst, expr), "iota", mask=mask, writes=("dst",), dst=dst)
    return dst


def local_gather(src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, *, mask=None):
    """Gather along the free axis within each GpSimd core's 16 partitions (see nki.isa)."""
    count = 16 * _free(index) if num_valid_indices is None else int(num_valid_indices)
    return _returned(
        new.local_gather,
        "local_gather",
        (src_buffer.shape[0], count, num_elem_per_idx),
        src_buffer.dtype,
        mask=mask,
        src_buffer=src_buffer,
        index=index,
        num_elem_per_idx=num_elem_per_idx,
        num_valid_indices=num_valid_indices,
    )


def max8(*, src, mask=None, dtype=None, **kwargs):
    """The 8 largest values of each partition, descending."""
    return _returned(new.max8, "max8", (src.shape[0], 8), dtype or src.dtype, mask=mask, src=src)


def memset(shape, value, dtype, *, mask=None, engine=engine.unknown, **kwargs):
    """A new SBUF tile of ``shape`` filled with ``value``."""
    return _returned(new.memset, "memset", shape, dtype, mask=mask, value=value, engine=engine)


def nc_find_index8(*, data, vals, mask=None, dtype=np.uint32, **kwargs):
    """Indices (uint32 by default) of the first occurrence of each of the 8 ``vals``."""
    return _returned(
        new.nc_find_index8,
        "nc_find_index8",
        (data.shape[0], 8),
        dtype,
        mask=mask,
        data=data,
        vals=vals,
    )


def nc_match_replace8(*, data, vals, imm, dst_idx=None, mask=None, dtype=None, **kwargs):
    """``data`` with the first occurrence of each of the 8 ``vals`` replaced by ``imm``."""
    dst = _tile("nc_match_replace8", data.shape, dtype or data.dtype)
    execute(
        new.nc_match_replace8,
        "nc_match_replace8",
        mask=mask,
        writes=("dst", "dst_idx"),
        dst=dst,
        data=data,
        vals=vals,
        imm=imm,
        dst_idx=dst_idx,
    )
    return dst


_PERF_MODES = {
    None: _perf_mode.none,
    "none": _perf_mode.none,
    "double_row": _perf_mode.double_row,
    "double_row_gen3": _perf_mode.double_row,
}


def nc_matmul(
    stationary,
    moving,
    *,
    is_stationary_onezero=False,
    is_moving_onezero=False,
    is_transpose=False,
    tile_position=(),
    tile_size=(),
    perf_mode=None,
    mask=None,
    **kwargs,
):
    """``stationary.T @ moving`` into a new fp32 PSUM tile (contraction over partitions)."""
    mode = perf_mode if isinstance(perf_mode, _perf_mode) else _PERF_MODES.get(perf_mode)
    require(mode is not None, "nc_matmul", f"unknown perf_mode {perf_mode!r}")
    rows = 2 if mode is _perf_mode.double_row else 1
    shape = (_free(stationary) // rows, _free(moving) // rows)
    dtype = stationary.dtype if is_transpose else nl.float32
    return _returned(
        new.nc_matmul,
        "nc_matmul",
        shape,
        dtype,
        nl.psum,
        mask=mask,
        stationary=stationary,
        moving=moving,
        is_stationary_onezero=is_stationary_onezero,
        is_moving_onezero=is_moving_onezero,
        is_transpose=is_transpose,
        tile_position=tile_position,
        tile_size=tile_size,
        perf_mode=mode,
    )


def nc_stream_shuffle(src, dst, shuffle_mask, *, dtype=None, mask=None, **kwargs):
    """Shuffle partitions within 32-partition quadrants from ``src`` into ``dst``."""
    execute(
        new.nc_stream_shuffle,
        "nc_stream_shuffle",
        mask=mask,
        writes=("dst",),
        dst=dst,
        src=src,
        shuffle_mask=shuffle_mask,
    )


def nc_transpose(data, *, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    """``data`` with partition and free axes swapped: a PSUM tile on the Tensor engine, an
    SBUF tile on the Vector engine (chosen for tiles up to 32x32 when ``engine`` is unknown)."""
    if engine is unknown_engine:
        small = data.shape[0] <= 32 and _free(data) <= 32
        engine = vector_engine if small else tensor_engine
    buffer = nl.psum if engine is tensor_engine else nl.sbuf
    dst = _tile("nc_transpose", (_free(data), data.shape[0]), data.dtype, buffer)
    execute(
        new.nc_transpose,
        "nc_transpose",
        mask=mask,
        writes=("dst",),
        dst=dst,
        data=data,
        engine=engine,
    )
    if dtype is None or normalize_dtype(dtype) == dst.dtype:
        return dst
    return tensor_copy(dst, dtype=dtype)


def range_select(
    *,
    on_true_tile,
    comp_op0,
    comp_op1,
    bound0,
    bound1,
    reduce_cmd=reduce_cmd.idle,
    reduce_res=None,
    reduce_op=np.amax,
    range_start=0,
    on_false_value=fp32.min,
    mask=None,
    dtype=None,
    **kwargs,
):
    """``on_true_tile`` where its free index + ``range_start`` lies between the bounds."""
    dst = _tile("range_select", on_true_tile.shape, dtype or on_true_tile.dtype)
    execute(
        new.range_select,
        "range_select",
        mask=mask,
        writes=("dst", "reduce_res"),
        dst=dst,
        on_true_tile=on_true_tile,
        comp_op0=resolve_op(comp_op0),
        comp_op1=resolve_op(comp_op1),
        bound0=bound0,
        bound1=bound1,
        reduce_cmd=reduce_cmd,
        reduce_res=reduce_res,
        reduce_op=resolve_op(reduce_op),
        range_start=range_start,
        on_false_value=on_false_value,
    )
    return dst


def reciprocal(data, *, dtype=None, mask=None, **kwargs):
    """``1 / data`` elementwise."""
    return _returned(
        new.reciprocal, "reciprocal", data.shape, dtype or data.dtype, mask=mask, data=data
    )


def scalar_tensor_tensor(
    *, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None, mask=None
):
    """``(data op0 operand0) op1 operand1``: operand0 per partition, operand1 a tile."""
    return _returned(
        new.scalar_tensor_tensor,
        "scalar_tensor_tensor",
        data.shape,
        dtype or _same_dtype(data, operand1),
        mask=mask,
        data=data,
        op0=resolve_op(op0),
        operand0=operand0,
        op1=resolve_op(op1),
        operand1=operand1,
        reverse0=reverse0,
        reverse1=reverse1,
    )


def select_reduce(
    *,
    dst,
    predicate,
    on_true,
    on_false,
    reduce_res=None,
    reduce_cmd=reduce_cmd.idle,
    reduce_op=np.amax,
    reverse_pred=False,
    mask=None,
    dtype=None,
    **kwargs,
):
    """``dst = where(predicate, on_true, on_false)``, optionally max-reduced to reduce_res."""
    if isinstance(predicate, NkiTensor) and predicate.dtype == nl.bool_:
        # Old kernels load numpy bool masks as predicates; on chip a bool is a 0/1 byte.
        predicate = predicate.view(nl.uint8)
    execute(
        new.select_reduce,
        "select_reduce",
        mask=mask,
        writes=("dst", "reduce_res"),
        dst=dst,
        predicate=predicate,
        on_true=on_true,
        on_false=on_false,
        reduce_res=reduce_res,
        reduce_cmd=reduce_cmd,
        reduce_op=resolve_op(reduce_op),
        reverse_pred=reverse_pred,
    )


def sequence_bounds(*, segment_ids, dtype=None):
    """Start and end of each element's segment: a ``(P, 2, n)`` tile."""
    shape = (segment_ids.shape[0], 2, _free(segment_ids))
    dst = _tile("sequence_bounds", shape, dtype or segment_ids.dtype)
    execute(
        new.sequence_bounds, "sequence_bounds", writes=("dst",), dst=dst, segment_ids=segment_ids
    )
    return dst


def tensor_copy(src, *, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    """A new SBUF tile holding ``src`` (cast to ``dtype``)."""
    dst = _tile("tensor_copy", src.shape, dtype or src.dtype)
    execute(
        new.tensor_copy, "tensor_copy", mask=mask, writes=("dst",), dst=dst, src=src, engine=engine
    )
    return dst


def tensor_copy_dynamic_src(src, *, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    """``tensor_copy`` of a source indexed with tile values."""
    return tensor_copy(src, mask=mask, dtype=dtype, engine=engine)


def tensor_copy_dynamic_dst(*, dst, src, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    """Copy ``src`` into a destination indexed with tile values."""
    execute(
        new.tensor_copy,
        "tensor_copy_dynamic_dst",
        mask=mask,
        writes=("dst",),
        dst=dst,
        src=src,
        engine=engine,
    )


def tensor_copy_predicated(*, src, dst, predicate, reverse_pred=False, mask=None, dtype=None):
    """Copy ``src`` into ``dst`` where ``predicate`` is non-zero."""
    execute(
        new.tensor_copy_predicated,
        "tensor_copy_predicated",
        mask=mask,
        writes=("dst",),
        dst=dst,
        src=src,
        predicate=predicate,
        reverse_pred=reverse_pred,
    )


def tensor_partition_reduce(op, data, *, mask=None, dtype=None, **kwargs):
    """Reduce ``data`` across its partitions into a one-partition tile (GpSimd)."""
    return _returned(
        new.tensor_partition_reduce,
        "tensor_partition_reduce",
        (1,) + tuple(data.shape[1:]),
        dtype or data.dtype,
        mask=mask,
        op=resolve_op(op),
        data=data,
    )


def tensor_reduce(op, data, axis, *, mask=None, dtype=None, negate=False, keepdims=False, **kw):
    """Reduce ``data`` along its trailing free ``axis`` (Vector engine)."""
    axes = {int(a) % data.ndim for a in ((axis,) if isinstance(axis, int) else axis)}
    if keepdims:
        shape = tuple(1 if d in axes else s for d, s in enumerate(data.shape))
    else:
        shape = tuple(s for d, s in enumerate(data.shape) if d not in axes)
    if len(shape) < 2:
        shape = (data.shape[0], 1)
    return _returned(
        new.tensor_reduce,
        "tensor_reduce",
        shape,
        dtype or data.dtype,
        mask=mask,
        op=resolve_op(op),
        data=data,
        axis=axis,
        negate=negate,
        keepdims=keepdims,
    )


def tensor_scalar(
    data,
    op0,
    operand0,
    reverse0=False,
    op1=None,
    operand1=None,
    reverse1=False,
    *,
    dtype=None,
    mask=None,
    engine=engine.unknown,
    **kwargs,
):
    """``(data op0 operand0) op1 operand1`` with scalar or per-partition operands."""
    return _returned(
        new.tensor_scalar,
        "tensor_scalar",
        data.shape,
        dtype or data.dtype,
        mask=mask,
        data=data,
        op0=resolve_op(op0),
        operand0=operand0,
        reverse0=reverse0,
        op1=resolve_op(op1),
        operand1=operand1,
        reverse1=reverse1,
        engine=engine,
    )


def tensor_scalar_reduce(
    *, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None, **kwargs
):
    """``data op0 operand0``, also reduced along the free axes into ``reduce_res``."""
    dst = _tile("tensor_scalar_reduce", data.shape, dtype or data.dtype)
    execute(
        new.tensor_scalar_reduce,
        "tensor_scalar_reduce",
        mask=mask,
        writes=("dst", "reduce_res"),
        dst=dst,
        data=data,
        op0=resolve_op(op0),
        operand0=operand0,
        reduce_op=resolve_op(reduce_op),
        reduce_res=reduce_res,
        reverse0=reverse0,
    )
    return dst


def tensor_scalar_cumulative(
    *, src, dst, op0, op1, imm0, imm1=None, reduce_cmd=reduce_cmd.reset_reduce, mask=None, **kw
):
    """Cumulative ``op1`` of ``src op0 imm0`` along the free axis into ``dst``."""
    execute(
        new.tensor_scalar_cumulative,
        "tensor_scalar_cumulative",
        mask=mask,
        writes=("dst",),
        dst=dst,
        src=src,
        op0=resolve_op(op0),
        op1=resolve_op(op1),
        imm0=imm0,
        imm1=imm1,
        reduce_cmd=reduce_cmd,
    )


def tensor_tensor(data1, data2, op, *, dtype=None, mask=None, engine=engine.unknown, **kwargs):
    """``data1 op data2`` elementwise (same partitions and elements per partition)."""
    return _returned(
        new.tensor_tensor,
        "tensor_tensor",
        data1.shape,
        dtype or _same_dtype(data1, data2),
        mask=mask,
        data1=data1,
        data2=data2,
        op=resolve_op(op),
        engine=engine,
    )


def tensor_tensor_scan(
    data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *, dtype=None, mask=None
):
    """``r[i] = op1(op0(data0[i], r[i-1]), data1[i])`` along the free axis."""
    return _returned(
        new.tensor_tensor_scan,
        "tensor_tensor_scan",
        data0.shape,
        dtype or _same_dtype(data0, data1),
        mask=mask,
        data0=data0,
        data1=data1,
        initial=initial,
        op0=resolve_op(op0),
        op1=resolve_op(op1),
        reverse0=reverse0,
        reverse1=reverse1,
    )


def builtin_custom_op(function_name, lib_file_name, *args, **kwargs):
    """Custom GpSimd libraries cannot run on the simulator."""
    fail("builtin_custom_op", f"custom op {function_name} from {lib_file_name} cannot be simulated")


__all__ = [
    "NkiValidationError",
    "activation",
    "activation_reduce",
    "affine_select",
    "bn_aggr",
    "bn_stats",
    "builtin_custom_op",
    "dge_mode",
    "dma_copy",
    "dma_engine",
    "dma_transpose",
    "dropout",
    "engine",
    "fp32",
    "get_nc_version",
    "gpsimd_engine",
    "iota",
    "local_gather",
    "max8",
    "memset",
    "nc_find_index8",
    "nc_match_replace8",
    "nc_matmul",
    "nc_stream_shuffle",
    "nc_transpose",
    "nc_version",
    "oob_mode",
    "range_select",
    "reciprocal",
    "reduce_cmd",
    "scalar_engine",
    "scalar_tensor_tensor",
    "select_reduce",
    "sequence_bounds",
    "tensor_copy",
    "tensor_copy_dynamic_dst",
    "tensor_copy_dynamic_src",
    "tensor_copy_predicated",
    "tensor_engine",
    "tensor_partition_reduce",
    "tensor_reduce",
    "tensor_scalar",
    "tensor_scalar_cumulative",
    "tensor_scalar_reduce",
    "tensor_tensor",
    "tensor_tensor_scan",
    "unknown_engine",
    "vector_engine",
]
