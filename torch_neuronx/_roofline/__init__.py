"""An ESTIMATE of one step's time on Trainium2 and Trainium3: a roofline over the ops it runs.

Capture (``Recorder``, a TorchDispatchMode) sees every op on a neuron or meta tensor, below
autograd, so backward ops are counted too: its FLOPs (torch.utils.flop_counter's formulas),
the HBM bytes it reads and writes (every tensor argument and result, as viewed; views move
nothing), the elements it processes, its dtype, collectives with their sizes, and NKI kernels
with the NKI cost model's latency. Costing is pure arithmetic on those records, so the CLI
captures in the script's process and costs in its own.

Model, per op, on one logical NeuronCore (LNC physical cores):
* matmuls and attention (ops with a flop formula) run on the Tensor engine at the dtype's
  dense peak; other ops on the Vector engine, transcendental ones on the Scalar engine, at
  their element rates; copies and layout ops only move data;
* an op takes max(compute time, HBM bytes / HBM bandwidth): whichever bounds it;
* ops run one after another: no overlap between ops, no fusion, no launch or latency
  overheads, so small ops are estimated optimistically;
* collectives move the ring algorithm's bytes over the interconnect; NKI kernels take the
  NKI cost model's latency (``nki.estimate``).
"""

from .api import estimate
from .capture import Recorder, end_serving_step
from .model import (
    DMA,
    HARDWARE,
    HOST,
    LINK,
    NKI,
    SCALAR,
    TENSOR,
    VECTOR,
    Op,
    op_time,
    ops_from_json,
    ops_to_json,
    scaled,
)
from .report import DISCLAIMER, LABEL, Estimate, markdown, plot

__all__ = [
    "DISCLAIMER",
    "DMA",
    "HARDWARE",
    "HOST",
    "LABEL",
    "LINK",
    "NKI",
    "SCALAR",
    "TENSOR",
    "VECTOR",
    "Estimate",
    "Op",
    "Recorder",
    "end_serving_step",
    "estimate",
    "markdown",
    "op_time",
    "ops_from_json",
    "ops_to_json",
    "plot",
    "scaled",
]
