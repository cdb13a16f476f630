"""Selections with a running max in the Vector accumulators (range_select, select_reduce) and the
GpSimd gathers: nc_n_gather (within each partition) and local_gather (per 16-partition core)."""

from typing import SupportsInt

import torch

from .. import alu, buffers, checks, dtypes, runtime
from ..argtypes import Operand, Operator
from ..enums import reduce_cmd as Cmd
from ..errors import require
from ..tensor import NkiTensor
from ..tiles import as_float32, read_pf, write
from ..trace import issue
from .accumulators import accumulate
from .elementwise import operand_value

FP32_MIN = float(torch.finfo(torch.float32).min)
CORE_PARTITIONS = 16  # SBUF partitions wired to each of the 8 GpSimd cores
ELEMS_PER_INDEX = (1, 2, 4, 8, 16, 32)
MAX_INDICES_PER_CORE = 4096
_COMPARISONS = ("equal", "less", "less_equal", "greater", "greater_equal")


def _max_reduce(where, values, reduce_op, reduce_cmd, reduce_res, parts):
    """Run the (max) accumulation of ``values`` and write ``reduce_res`` if given."""
    red = alu.resolve(reduce_op, where, "reduce")
    require(red.name in ("max", "maximum"), where, f"reduce_op must be nl.maximum, got {red!r}")
    if reduce_cmd is Cmd.idle:
        require(reduce_res is None, where, "reduce_res needs a reduce_cmd other than idle")
        return []
    regs = accumulate(runtime.current().vector_regs, reduce_cmd, values.amax(1), red, where=where)
    if reduce_res is None:
        return []
    checks.operand(where, "reduce_res", reduce_res, parts)
    require(
        reduce_res.dtype.is_floating_point,
        where,
        f"reduce_res dtype {dtypes.name(reduce_res.dtype)} must be a float type",
    )
    write(reduce_res, regs)
    return [reduce_res]


def range_select(
    dst: NkiTensor,
    on_true_tile: NkiTensor,
    comp_op0: Operator,
    comp_op1: Operator,
    bound0: Operand,
    bound1: Operand,
    reduce_cmd: Cmd = Cmd.reset_reduce,
    reduce_res: NkiTensor | None = None,
    reduce_op: Operator = alu.maximum,
    range_start: float = 0,
    on_false_value: float = FP32_MIN,
    name: str | None = None,
) -> None:
    """Keep element ``i`` of each partition where ``comp_op0(range_start + i, bound0)`` and
    ``comp_op1(range_start + i, bound1)`` hold (else ``on_false_value``); max-reduce the result."""
    where = "range_select"
    target = runtime.current().target
    require(
        target.generation >= 3,
        where,
        f"requires NeuronCore-v3 or newer; target {target.name} is NeuronCore-v{target.generation}",
    )
    checks.on_chip(where, "dst", dst)
    checks.on_chip(where, "on_true_tile", on_true_tile)
    checks.same_tile(where, "dst", dst, "on_true_tile", on_true_tile)
    require(
        on_true_tile.dtype.is_floating_point and not on_true_tile.dtype.packed,
        where,
        f"on_true_tile must be a float tile, got {dtypes.name(on_true_tile.dtype)}",
    )
    parts = on_true_tile.shape[0]
    ops = []
    for label, op, bound in (("comp_op0", comp_op0, bound0), ("comp_op1", comp_op1, bound1)):
        fn = alu.resolve(op, where, "binary")
        require(
            fn.name in _COMPARISONS,
            where,
            f"{label} must be nl.equal, less, less_equal, greater or greater_equal, got {fn!r}",
        )
        checks.operand(where, label.replace("comp_op", "bound"), bound, parts)
        require(
            isinstance(bound, NkiTensor) and bound.dtype == dtypes.float32,
            where,
            f"bound{label[-1]} must be a float32 ({parts}, 1) tile",
        )
        ops.append((fn, operand_value(bound, parts)))
    # On the float32 the engine holds: AWS's documented literal -3.4028235e+38 is FP32_MIN
    # there, though not as a Python float.
    require(
        as_float32(on_false_value) == FP32_MIN,
        where,
        f"on_false_value must be FP32_MIN ({FP32_MIN}, written -3.4028235e+38), "
        f"got {on_false_value!r}",
    )
    values = read_pf(on_true_tile)
    index = float(range_start) + torch.arange(values.shape[1], dtype=torch.float32)
    keep = torch.ones_like(values, dtype=torch.bool)
    for fn, bound in ops:
        keep &= fn.binary(index.expand_as(values), bound.expand_as(values)) != 0
    out = torch.where(keep, values, torch.tensor(FP32_MIN))
    write(dst, out)
    extra = _max_reduce(where, out, reduce_op, reduce_cmd, reduce_res, parts)
    issue(where, "vector", [dst] + extra, [on_true_tile], reads=(bound0, bound1))


def select_reduce(
    dst: NkiTensor,
    predicate: NkiTensor,
    on_true: NkiTensor,
    on_false: Operand,
    reduce_res: NkiTensor | None = None,
    reduce_cmd: Cmd = Cmd.idle,
    reduce_op: Operator = alu.maximum,
    reverse_pred: bool = False,
    name: str | None = None,
) -> None:
    """``dst = where(predicate, on_true, on_false)`` with an optional running max per partition."""
    where = "select_reduce"
    for label, t in (("dst", dst), ("predicate", predicate), ("on_true", on_true)):
        checks.on_chip(where, label, t)
    checks.same_tile(where, "dst", dst, "on_true", on_true)
    checks.same_tile(where, "predicate", predicate, "on_true", on_true)
    checks.not_both_psum(where, "on_true", on_true, "predicate", predicate)
    require(
        predicate.dtype in (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16),
        where,
        f"predicate dtype {dtypes.name(predicate.dtype)} must be int8, uint8, int16 or uint16",
    )
    require(
        on_true.dtype not in (dtypes.tfloat32, dtypes.int32, dtypes.uint32),
        where,
        f"on_true dtype {dtypes.name(on_true.dtype)} is not supported",
    )
    parts = on_true.shape[0]
    checks.operand(where, "on_false", on_false, parts)
    mask = read_pf(predicate) != 0
    if reverse_pred:
        mask = ~mask
    out = torch.where(mask, read_pf(on_true), operand_value(on_false, parts))
    write(dst, out)
    extra = _max_reduce(where, out, reduce_op, reduce_cmd, reduce_res, parts)
    issue(where, "vector", [dst] + extra, [predicate, on_true], reads=(on_false,))


def nc_n_gather(
    dst: NkiTensor, data: NkiTensor, indices: NkiTensor, name: str | None = None
) -> None:
    """``dst[p, j] = data[p].flatten()[indices[p, j]]`` within each partition (GpSimd)."""
    where = "nc_n_gather"
    for label, t in (("dst", dst), ("data", data), ("indices", indices)):
        checks.on_chip(where, label, t, buffers.sbuf)
    checks.same_partitions(where, "dst", dst, "data", data)
    checks.same_partitions(where, "indices", indices, "data", data)
    checks.same_dtype(where, "dst", dst, "data", data)
    checks.dtype_in(where, "indices", indices, dtypes.uint32)
    checks.same_free(where, "dst", dst, "indices", indices)
    idx = indices.host.reshape(indices.shape[0], -1).to(torch.int64)
    width = data.free_size
    require(
        bool(((idx >= 0) & (idx < width)).all()),
        where,
        f"indices must lie in [0, {width}) (the elements per partition of data)",
    )
    rows = data.host.reshape(data.shape[0], -1)
    write(dst, torch.gather(rows, 1, idx))
    issue(where, "gpsimd", [dst], [data, indices])


def local_gather(
    dst: NkiTensor,
    src_buffer: NkiTensor,
    index: NkiTensor,
    num_elem_per_idx: int = 1,
    num_valid_indices: SupportsInt | None = None,
    name: str | None = None,
) -> None:
    """Each GpSimd core gathers, into each of its 16 partitions, ``num_elem_per_idx`` contiguous
    elements of that partition at every offset of its 16-partition ``index`` slice (read
    partition-first, the first ``num_valid_indices`` offsets)."""
    where = "local_gather"
    for label, t in (("dst", dst), ("src_buffer", src_buffer), ("index", index)):
        checks.on_chip(where, label, t, buffers.sbuf)
    parts = src_buffer.shape[0]
    require(
        parts % CORE_PARTITIONS == 0,
        where,
        f"src_buffer partition dimension {parts} must be a multiple of {CORE_PARTITIONS} "
        "(one GpSimd core per 16 partitions)",
    )
    checks.same_partitions(where, "index", index, "src_buffer", src_buffer)
    checks.same_partitions(where, "dst", dst, "src_buffer", src_buffer)
    checks.dtype_in(where, "index", index, dtypes.uint16)
    checks.same_dtype(where, "dst", dst, "src_buffer", src_buffer, "local_gather does not cast")
    require(
        num_elem_per_idx in ELEMS_PER_INDEX,
        where,
        f"num_elem_per_idx {num_elem_per_idx} must be one of {ELEMS_PER_INDEX}",
    )
    per_core = CORE_PARTITIONS * index.free_size
    valid = per_core if num_valid_indices is None else int(num_valid_indices)
    require(
        0 < valid <= min(per_core, MAX_INDICES_PER_CORE),
        where,
        f"num_valid_indices {valid} must be in [1, {min(per_core, MAX_INDICES_PER_CORE)}]: at most "
        f"the {per_core} indices of a 16-partition index slice and at most {MAX_INDICES_PER_CORE}",
    )
    require(
        dst.free_size == valid * num_elem_per_idx,
        where,
        f"dst has {dst.free_size} elements per partition; it must hold num_valid_indices * "
        f"num_elem_per_idx = {valid * num_elem_per_idx}",
    )
    cores = parts // CORE_PARTITIONS
    # Each core flattens its index slice partition-first (column-major).
    idx = index.host.reshape(cores, CORE_PARTITIONS, -1).transpose(1, 2).reshape(cores, -1)
    idx = idx[:, :valid].to(torch.int64)
    width = src_buffer.free_size
    require(
        bool((idx + num_elem_per_idx <= width).all()),
        where,
        f"an index plus num_elem_per_idx ({num_elem_per_idx}) exceeds the {width} elements per "
        "partition of src_buffer (out-of-bound gathers are undefined on hardware)",
    )
    offsets = (idx.unsqueeze(-1) + torch.arange(num_elem_per_idx)).reshape(cores, -1)
    offsets = offsets.repeat_interleave(CORE_PARTITIONS, dim=0)
    rows = src_buffer.host.reshape(parts, -1)
    write(dst, torch.gather(rows, 1, offsets))
    issue(where, "gpsimd", [dst], [src_buffer, index])
