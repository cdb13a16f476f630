"""``python -m torch_neuronx``: the ``torchneuron`` command."""

import sys

from torch_neuronx.cli import main

sys.exit(main())
