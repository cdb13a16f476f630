"""nki.collectives: collective communication between ranks (logical NeuronCores)."""

from ._src.collectives import (
    ReplicaGroup,
    all_gather,
    all_gather_v,
    all_reduce,
    all_to_all,
    all_to_all_v,
    collective_permute,
    collective_permute_implicit,
    collective_permute_implicit_current_processing_rank_id,
    collective_permute_implicit_reduce,
    rank_id,
    reduce_scatter,
)

__all__ = [
    "ReplicaGroup",
    "all_gather",
    "all_gather_v",
    "all_reduce",
    "all_to_all",
    "all_to_all_v",
    "collective_permute",
    "collective_permute_implicit",
    "collective_permute_implicit_current_processing_rank_id",
    "collective_permute_implicit_reduce",
    "rank_id",
    "reduce_scatter",
]
