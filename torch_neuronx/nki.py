"""``import torch_neuronx.nki`` (TorchNeuron's spelling) gives the ``nki`` package itself.

Its submodules are aliased too: loading one again under a second name would define its classes
twice and register its torch ops twice."""

import sys

import nki
import nki.torch_integration

# nki loads its public names on first use; load them all now, so that each of its modules has
# its alias below.
for _public in dir(nki):
    getattr(nki, _public)

for _name, _module in list(sys.modules.items()):
    if _name == "nki" or _name.startswith("nki."):
        sys.modules["torch_neuronx." + _name] = _module
