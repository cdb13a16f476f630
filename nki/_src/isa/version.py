"""nisa.get_nc_version: the NeuronCore generation kernels run for."""

from .. import runtime
from ..enums import nc_version


def get_nc_version() -> nc_version:
    """The NeuronCore version of the current target."""
    return nc_version(runtime.current().target.generation)
