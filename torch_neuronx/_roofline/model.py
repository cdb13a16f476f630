"""The cost model: the documented rates, the engine each op runs on, and what one call of an
op costs on one logical NeuronCore (``op_time``)."""

import collections
import dataclasses

from torch_neuronx._platforms import PLATFORMS

# The documented rates of the platforms a model runs on (torch_neuronx/_platforms.py).
HARDWARE = {name: p for name, p in PLATFORMS.items() if p.torch_device}

# Engines, and the op classes the report groups time by.
TENSOR, VECTOR, SCALAR, DMA, LINK, NKI = "TensorE", "VectorE", "ScalarE", "DMA", "link", "NKI"
HOST = "host"  # host<->device copies: counted, but outside the estimate

# Ops whose work is transcendental functions: the Scalar engine's (activation) job.
SCALAR_OPS = {
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sigmoid", "gelu", "silu",
    "mish", "elu", "softplus", "erf", "erfc", "sqrt", "rsqrt", "reciprocal", "sin", "cos",
    "pow", "_softmax", "_safe_softmax", "_log_softmax", "softmax", "log_softmax", "logsumexp",
    "hardswish",
}  # fmt: skip
# Ops that only move data (no arithmetic): their time is their bytes.
MOVE_OPS = {
    "copy", "_to_copy", "clone", "contiguous", "cat", "stack", "index", "index_select",
    "gather", "embedding", "slice_scatter", "select_scatter", "constant_pad_nd", "repeat",
    "fill", "zero", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros",
    "new_ones", "new_full", "arange", "tril", "triu", "flip", "roll",
    "split_with_sizes_copy", "unbind_copy", "_foreach_copy",
}  # fmt: skip
# Ops that move no data at all (allocation without initialisation, bookkeeping).
FREE_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "detach",
    "lift_fresh", "_local_scalar_dense", "set", "resize", "alias", "record_stream",
    "wait_tensor", "_has_compatible_shallow_copy_type", "_version", "is_same_size", "_unsafe_view",
    "_foreach_zero",
}  # fmt: skip
# Collectives: the fraction of the message each rank sends around a ring of W ranks.
RING = {
    "all_reduce": lambda w: 2 * (w - 1) / w,
    "allreduce": lambda w: 2 * (w - 1) / w,
    "all_gather": lambda w: (w - 1) / w,
    "allgather": lambda w: (w - 1) / w,
    "reduce_scatter": lambda w: (w - 1) / w,
    "all_to_all": lambda w: (w - 1) / w,
    "alltoall": lambda w: (w - 1) / w,
    "broadcast": lambda w: 1.0,
    "reduce": lambda w: 1.0,
    "send": lambda w: 1.0,
    "recv": lambda w: 1.0,
}


def base_name(func):
    """``aten.add_.Tensor`` -> ``add``: the op's name without overload, in-place mark or _out."""
    name = func._opname if hasattr(func, "_opname") else str(func)
    return name.rstrip("_").removesuffix("_backward").removesuffix("_out")


def collective_kind(name):
    for kind in RING:
        if name.lstrip("_").startswith(kind):
            return kind
    return None


def current_world_size():
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def dtype_class(dtype):
    """The Tensor engine's rate class of a dtype."""
    import torch

    if dtype.itemsize == 1 and dtype.is_floating_point:
        return "fp8"
    if dtype in (torch.bfloat16, torch.float16):
        return "16bit"
    if dtype == torch.float32 and torch.get_float32_matmul_precision() != "highest":
        return "tf32"  # the user allowed reduced-precision float32 matmuls
    return "fp32"


@dataclasses.dataclass(frozen=True)
class Op:
    """What one call of an op costs, independent of the hardware; hashable to count calls."""

    name: str  # e.g. aten.mm.default
    engine: str  # TENSOR, VECTOR, SCALAR, DMA, LINK or NKI
    dtype: str  # the Tensor engine's rate class, or "16bit"/"other" for element rates
    flops: int = 0
    bytes: int = 0  # HBM bytes read and written; for a collective, the bytes each rank sends
    elements: int = 0
    nki_us: tuple = ()  # NKI kernels: ((platform, latency in us), ...) from the cost model
    shapes: str = ""

    @property
    def op_class(self):
        """The class the report groups time by."""
        if self.engine == TENSOR:
            return "attention" if "attention" in self.name else "matmul"
        return {
            VECTOR: "vector",
            SCALAR: "activation",
            DMA: "data movement",
            LINK: "collective",
            NKI: "NKI kernel",
            HOST: "host transfer",
        }[self.engine]


def op_time(op, hw, lnc, world_size=1):
    """(seconds, bound) of one call of ``op`` on one logical core of ``hw``."""
    if op.engine == NKI:
        return dict(op.nki_us)[hw.name] * 1e-6, "NKI cost model"
    if op.engine == LINK:
        logical_per_chip = hw.physical_cores // lnc
        bandwidth = hw.dma_gb_s * 1e9 * lnc  # ranks on one chip: DMA between cores
        if world_size > logical_per_chip:
            bandwidth = min(bandwidth, hw.link_tb_s * 1e12 / logical_per_chip)
        return op.bytes / bandwidth, "interconnect"
    memory = op.bytes / hw.hbm_bytes_per_s(lnc)
    if op.engine == TENSOR:
        compute = op.flops / (hw.tensor_tflops[op.dtype] * 1e12 * lnc)
    elif op.engine in (VECTOR, SCALAR):
        ghz, per_cycle = (
            (hw.vector_ghz, hw.vector_elements)
            if op.engine == VECTOR
            else (hw.scalar_ghz, hw.scalar_elements)
        )
        rate = per_cycle[0 if op.dtype == "16bit" else 1] * ghz * 1e9 * lnc
        compute = op.elements / rate
    else:
        compute = 0.0
    return (compute, "compute") if compute > memory else (memory, "HBM")


def ops_to_json(counter):
    """A Counter of Op as a JSON-able list (the CLI's child process hands it to the parent)."""
    return [{**dataclasses.asdict(op), "calls": n} for op, n in counter.items()]


def ops_from_json(items):
    """The inverse of ``ops_to_json``."""
    counter = collections.Counter()
    for item in items:
        item = dict(item)
        calls = item.pop("calls")
        item["nki_us"] = tuple(tuple(x) for x in item["nki_us"])
        counter[Op(**item)] += calls
    return counter


def scaled(counter, divisor):
    """Each op's calls divided by ``divisor`` (a step as the average of a run of steps)."""
    return collections.Counter({op: n / divisor for op, n in counter.items()})
