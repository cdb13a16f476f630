"""Which ATen ops run natively on the emulated NeuronCore and which fall back to the CPU."""


def cpu_fallback_ops():
    """The op names of the CPU-fallback tier."""
    return []
