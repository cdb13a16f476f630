"""``torch_neuronx.nki_hop``: the import path third-party kernel code uses for TorchNeuron's NKI
custom-operator API (``from torch_neuronx.nki_hop import nki_op, wrap_nki``). The functions are
nki.torch_integration's, the same objects as ``torch_neuronx.nki_op`` and ``wrap_nki``."""

from nki.torch_integration import nki_op, wrap_nki

__all__ = ["nki_op", "wrap_nki"]
