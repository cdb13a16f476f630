"""nki.torch_integration: ``nki_op`` turns a kernel launcher into a PyTorch custom op and
``wrap_nki`` makes a kernel callable from torch code and ``torch.compile``; ``decode_call``
tells tools what an ``nki::call`` node launches.

Importing it registers the generic ``nki::call`` op, so ``import nki`` leaves it out.
"""

from ._src.torch_integration import decode_call, nki_op, wrap_nki

__all__ = ["decode_call", "nki_op", "wrap_nki"]
