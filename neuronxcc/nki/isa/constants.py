"""neuronxcc.nki.isa.constants: the enumerations of the ISA API."""

from nki.isa import (  # noqa: F401 - re-exported
    dge_mode,
    dma_engine,
    engine,
    nc_version,
    oob_mode,
    reduce_cmd,
)
