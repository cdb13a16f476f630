"""neuronxcc: the pre-0.2 NKI API (``neuronxcc.nki``) as a layer over the ``nki`` simulator.

Only the ``nki`` subpackage exists: kernels written for ``import neuronxcc.nki as nki`` run
unchanged on the host simulator (the Neuron compiler itself is not provided).
"""
