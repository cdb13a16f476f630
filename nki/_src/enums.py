"""Enumerations of the ISA API (engines, reduce commands, DMA and matmul modes)."""

from enum import Enum


class engine(Enum):
    """Neuron Device engines."""

    tensor = "tensor"
    vector = "vector"
    scalar = "scalar"
    gpsimd = "gpsimd"
    dma = "dma"
    sync = "sync"
    unknown = "unknown"


class reduce_cmd(Enum):
    """Engine accumulator-register commands."""

    idle = "idle"
    reset = "reset"
    reduce = "reduce"
    reset_reduce = "reset_reduce"
    load_reduce = "load_reduce"


class dge_mode(Enum):
    """Descriptor Generation Engine mode."""

    unknown = "unknown"
    swdge = "swdge"
    hwdge = "hwdge"
    none = "none"


class oob_mode(Enum):
    """Out-of-bounds access mode."""

    error = "error"
    skip = "skip"


class matmul_perf_mode(Enum):
    """Tensor Engine performance mode."""

    none = "none"
    double_row = "double_row"


class nc_version(Enum):
    """NeuronCore version."""

    gen2 = 2
    gen3 = 3
    gen4 = 4


class dma_engine(Enum):
    """DMA transfer engine."""

    dma = "dma"
    gpsimd_dma = "gpsimd_dma"
