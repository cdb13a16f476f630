"""nki.cost_model: an analytical latency ESTIMATE of a kernel on trn2/trn3, from its trace.

Model (rates per target in nki/_src/targets.py; every constant below is an assumption, not a
measurement):

* Tensor engine (2.4 GHz): an ``nc_matmul`` occupies the PE for ``max(N_moving, 64)`` cycles
  for 8/16-bit inputs, 4x that for fp32, half with fp8 ``double_row``.  ``nc_transpose`` is
  a matmul against an identity (N = partitions).
* Vector engine (0.96 GHz trn2, 1.2 GHz trn3): ``STATIC_CYCLES + F * inputs`` cycles, halved
  when every operand is a 2-byte type (512 vs 256 elements/cycle).
* Scalar engine (1.2 GHz): ``STATIC_CYCLES + F`` cycles (2-byte types twice as fast on trn3).
* GpSimd (1.2 GHz): ``STATIC_CYCLES + F * inputs`` cycles.
* DMA: all 16 queues of a core as one resource of 368 GB/s (trn2) or 528 GB/s (trn3); each
  contiguous run (descriptor) costs ``DESCRIPTOR_BYTES`` extra, so runs under 256 B are
  overhead-bound and runs of 4 KiB or more come close to peak.  Data is visible
  ``DMA_LATENCY_NS`` after the transfer (the ~1.3 us fixed DMA latency).
* Engines run in parallel.  An instruction is ready when its inputs are (plus ``SYNC_NS``
  when the producer is another engine); rewriting an on-chip tile also waits for its earlier
  readers.  Like the compiler's scheduler, each engine runs it in the earliest idle slot
  after it is ready, so independent instructions may overtake each other.  The latency is the
  finish time of the last instruction; SPMD instances are modelled on separate NeuronCores
  running in parallel.
"""

from ._src.cost_model import (
    DESCRIPTOR_BYTES,
    DMA_LATENCY_NS,
    ENGINES,
    LABEL,
    PE_MIN_CYCLES,
    STATIC_CYCLES,
    SYNC_NS,
    CostReport,
    benchmark,
    estimate,
)

__all__ = [
    "DESCRIPTOR_BYTES",
    "DMA_LATENCY_NS",
    "ENGINES",
    "LABEL",
    "PE_MIN_CYCLES",
    "STATIC_CYCLES",
    "SYNC_NS",
    "CostReport",
    "benchmark",
    "estimate",
]
