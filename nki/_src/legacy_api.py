"""The simulator's interface to neuronxcc.nki, the pre-0.2 NKI API that runs on it.

neuronxcc builds on nki's public modules and on the names here, nothing else of ``nki._src``
(tests/neuronxcc/test_layering.py): the pre-0.2 API defines instructions of its own (operands
validated, tiles read and written, each issued to the trace the cost model schedules), takes
the simulator's tensors apart in its index expressions, and gives them its semantics through
one hook. A change to these names is a change to neuronxcc."""

from nki._src import tensor as _tensor
from nki._src.alu import Op as AluOp
from nki._src.alu import assign as assign_op
from nki._src.alu import resolve as resolve_alu_op
from nki._src.checks import same_tile
from nki._src.cost_model import BenchmarkKernel
from nki._src.dtypes import name as dtype_name
from nki._src.dtypes import normalize as normalize_dtype
from nki._src.dtypes import promote as promote_dtypes
from nki._src.dtypes import require_on_chip_dtype
from nki._src.dtypes import sentinel as dtype_sentinel
from nki._src.errors import fail, require
from nki._src.isa.matmul import accumulate_into
from nki._src.jit import Launch
from nki._src.language.memory import to_sbuf
from nki._src.runtime import current as current_runtime
from nki._src.tensor import PMAX, DynSlice, row_major
from nki._src.tensor import _check_slice as check_slice
from nki._src.tiles import fill, read_pf, write
from nki._src.trace import contiguous_run, issue, mark_written


def install_tensor_semantics(hook):
    """Makes ``hook`` decide indexing, assignment, ``+=`` and broadcasts of the simulator's
    tensors wherever its methods return anything but NotImplemented (nki._src.tensor.legacy)."""
    _tensor.legacy = hook


__all__ = [
    "PMAX",
    "AluOp",
    "BenchmarkKernel",
    "DynSlice",
    "Launch",
    "accumulate_into",
    "assign_op",
    "check_slice",
    "contiguous_run",
    "current_runtime",
    "dtype_name",
    "dtype_sentinel",
    "fail",
    "fill",
    "install_tensor_semantics",
    "issue",
    "mark_written",
    "normalize_dtype",
    "promote_dtypes",
    "read_pf",
    "require",
    "require_on_chip_dtype",
    "resolve_alu_op",
    "row_major",
    "same_tile",
    "to_sbuf",
    "write",
]
