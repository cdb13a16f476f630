"""nki.isa: one function per hardware instruction; every call takes its destination first."""

from .._src.enums import (
    dge_mode,
    dma_engine,
    engine,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
)
from .._src.errors import NkiValidationError
from .._src.isa.activation import activation, activation_reduce
from .._src.isa.dma import dma_compute, dma_copy, dma_transpose
from .._src.isa.elementwise import (
    exponential,
    memset,
    reciprocal,
    scalar_tensor_tensor,
    tensor_copy,
    tensor_copy_predicated,
    tensor_scalar,
    tensor_tensor,
)
from .._src.isa.gpsimd import affine_select, iota, sequence_bounds
from .._src.isa.matmul import nc_matmul, nc_transpose
from .._src.isa.mx import nc_matmul_mx, quantize_mx
from .._src.isa.random import dropout
from .._src.isa.reduce import max8, tensor_partition_reduce, tensor_reduce, tensor_scalar_reduce
from .._src.isa.registers import (
    VirtualRegister,
    register_alloc,
    register_load,
    register_move,
    register_store,
)
from .._src.isa.scan import tensor_scalar_cumulative, tensor_tensor_scan
from .._src.isa.search import nc_find_index8, nc_match_replace8, nonzero_with_count
from .._src.isa.select import local_gather, nc_n_gather, range_select, select_reduce
from .._src.isa.shuffle import nc_stream_shuffle
from .._src.isa.stats import bn_aggr, bn_stats
from .._src.isa.sync import core_barrier, sendrecv
from .._src.isa.version import get_nc_version
from . import constants

tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown

__all__ = [
    "NkiValidationError",
    "VirtualRegister",
    "activation",
    "activation_reduce",
    "affine_select",
    "bn_aggr",
    "bn_stats",
    "core_barrier",
    "dge_mode",
    "dma_compute",
    "dma_copy",
    "dma_engine",
    "dma_transpose",
    "dropout",
    "engine",
    "exponential",
    "get_nc_version",
    "gpsimd_engine",
    "iota",
    "local_gather",
    "matmul_perf_mode",
    "max8",
    "memset",
    "nc_find_index8",
    "nc_match_replace8",
    "nc_matmul",
    "nc_n_gather",
    "nc_matmul_mx",
    "nc_transpose",
    "nc_stream_shuffle",
    "nc_version",
    "nonzero_with_count",
    "oob_mode",
    "quantize_mx",
    "range_select",
    "reciprocal",
    "reduce_cmd",
    "register_alloc",
    "register_load",
    "register_move",
    "register_store",
    "scalar_engine",
    "scalar_tensor_tensor",
    "select_reduce",
    "sequence_bounds",
    "sendrecv",
    "tensor_copy",
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
