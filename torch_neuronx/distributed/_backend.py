"""Registration of the ``neuron`` c10d backend and its per-group creator."""

import atexit
import functools

import torch.distributed as dist

from torch_neuronx.distributed import _launch as launch

NAME = "neuron"
EXIT_DRAIN_TIMEOUT_S = 10.0


def register():
    """Registers ``neuron`` for neuron and CPU tensors; a no-op when already registered."""
    if dist.is_available() and NAME not in dist.Backend.backend_list:
        # Listing "cpu" lets init_process_group("neuron") serve CPU tensors from the same
        # backend (they go to its gloo transport untouched); cpu's default stays gloo.
        dist.Backend.register_backend(NAME, create, extended_api=True, devices=["neuron", "cpu"])


def create(opts, pg_options):
    """Builds the backend of one process group: a gloo transport wrapped for neuron tensors."""
    if pg_options is not None:
        raise ValueError("the neuron backend takes no pg_options; pass timeout= instead")
    if not opts.global_ranks_in_group:
        launch.bind_local_core()
    gloo = dist.ProcessGroupGloo(opts.store, opts.group_rank, opts.group_size, opts.timeout)
    gloo.options.global_ranks_in_group = opts.global_ranks_in_group
    gloo.options.group_name = opts.group_id
    # Both imports are deferred to the first process group so that `import torch` stays cheap.
    from torch_neuronx import _C_dist
    from torch_neuronx.distributed import _rng as rng

    rng.install()
    _drain_completions_at_exit(_C_dist)
    return _C_dist.NeuronBackend(gloo)


@functools.cache
def _drain_completions_at_exit(module):
    # A collective that finishes on a transport thread as the script ends releases the
    # caller's tensors there, which needs the interpreter; let it finish before shutdown.
    atexit.register(module.wait_for_completions, EXIT_DRAIN_TIMEOUT_S)
