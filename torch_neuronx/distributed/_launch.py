"""torchrun integration: one process per NeuronCore."""

import os

import torch


def bind_local_core():
    """Makes core LOCAL_RANK current, as TorchNeuron does when NEURON_RT_VISIBLE_CORES is unset."""
    local_rank = os.environ.get("LOCAL_RANK")
    if local_rank is None or os.environ.get("NEURON_RT_VISIBLE_CORES"):
        return
    index, count = int(local_rank), torch.neuron.device_count()
    if index >= count:
        raise RuntimeError(
            f"LOCAL_RANK={index} has no NeuronCore: each process takes core LOCAL_RANK, and this "
            f"node emulates {count} (neuron:0 to neuron:{count - 1}). Start at most {count} "
            f"processes per node (torchrun --nproc-per-node={count}); NEURON_RT_NUM_CORES and "
            "NEURON_LOGICAL_NC_CONFIG set how many cores are emulated."
        )
    torch.neuron.set_device(index)
