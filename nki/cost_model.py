"""nki.cost_model: an analytical latency ESTIMATE of a kernel on trn1/trn2/trn3, from its trace.

Model (rates per target in nki/_src/targets.py; the constants below come from AWS's NKI docs
unless marked fitted or assumed in nki/_src/cost_model.py; nki/README.md has the calibration
against AWS's published measurements):

* Tensor engine (2.8 GHz trn1, 2.4 GHz trn2/trn3): an ``nc_matmul`` occupies the PE for
  ``max(N_moving, 64)`` cycles for 8/16-bit inputs, 4x that for fp32, half with fp8
  ``double_row``; ``nc_matmul_mx`` counts 4-element words.  ``nc_transpose`` is a matmul
  against an identity (N = partitions).
* Vector (1.12/0.96/1.2 GHz), Scalar (1.4/1.2/1.2 GHz), GpSimd (1.4/1.2/1.2 GHz): each
  instruction costs ``max(MIN_II, k * N)`` cycles for N elements per partition, with ``k``
  from the ISA docs' cost formulas: 1 per streamed input, 2 for ``tensor_tensor`` and its
  relatives unless one input is in PSUM (then 1), 2 for ``tensor_tensor_scan``, 8 for
  ``reciprocal``...; 2-byte operands run at twice the rate on Vector (trn2/trn3) and Scalar
  (trn3).  Fused reductions add ``MIN_II``; GpSimd adds ``GPSIMD_START``.  An instruction that
  reads the output of the previous instruction on its engine cannot overlap with it and pays
  ``DEPENDENT_CYCLES``.
* DMA: all 16 queues of a core as one resource (272/368/528 GB/s); each contiguous run
  (descriptor) costs ``Target.descriptor_bytes`` of bandwidth extra (fitted: 1200 B trn1,
  512 B trn2/trn3), so runs under 256 B are overhead-bound and runs of 4 KiB or more come
  close to peak.  Data is visible ``DMA_LATENCY_NS`` after the
  transfer.  Collectives move their bytes over the chip-to-chip links plus
  ``COLLECTIVE_LATENCY_NS``.
* Engines run in parallel.  An instruction is ready when its inputs are (plus ``SYNC_NS``
  when the producer is another engine); rewriting an on-chip tile also waits for its earlier
  readers.  Like the compiler's scheduler, each engine runs it in the earliest idle slot
  after it is ready, so independent instructions may overtake each other.  The latency is the
  finish time of the last instruction plus ``LAUNCH_NS`` of kernel start-up and tear-down;
  SPMD instances are modelled on separate NeuronCores running in parallel.  Reports give
  each engine's busy time and its active time (an instruction in flight: for DMA, until its
  data is visible), the quantity profiles report as an engine's "active" share.
"""

from ._src.cost_model import (
    COLLECTIVE_LATENCY_NS,
    DEPENDENT_CYCLES,
    DMA_LATENCY_NS,
    ENGINES,
    GPSIMD_START,
    LABEL,
    LAUNCH_NS,
    MIN_II,
    PE_MIN_CYCLES,
    SYNC_NS,
    CostReport,
    benchmark,
    estimate,
)

__all__ = [
    "COLLECTIVE_LATENCY_NS",
    "DEPENDENT_CYCLES",
    "DMA_LATENCY_NS",
    "ENGINES",
    "GPSIMD_START",
    "LABEL",
    "LAUNCH_NS",
    "MIN_II",
    "PE_MIN_CYCLES",
    "SYNC_NS",
    "CostReport",
    "benchmark",
    "estimate",
]
