"""A small GPT trained for 5 steps with DDP, FSDP2, TP/SP and pipelining on 2 and 4 ranks,
compared with one CPU process; DTensor random ops; a DCP round trip and a 2 -> 4 reshard."""

import pytest
from dist_harness import run_suite

BOTH = [
    "check_ddp",
    "check_fsdp2",
    "check_fsdp2_mixed_precision",
    "check_fsdp2_cpu_offload",
    "check_tensor_parallel",
    "check_sequence_parallel",
    "check_dtensor_random_ops",
]
TWO = BOTH + [
    "check_pipeline_two_stages",
    "check_dcp_save_and_round_trip",
    "check_fsdp2_compiled_blocks",
]
FOUR = BOTH + ["check_fsdp2_and_tensor_parallel_on_2d_mesh", "check_dcp_reshard_from_two_ranks"]


def ids(checks):
    return [c[len("check_") :] for c in checks]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("dist_training"))


@pytest.fixture(scope="module")
def two_ranks(workdir):
    return run_suite("dist_training", TWO, 2, workdir)


@pytest.fixture(scope="module")
def four_ranks(workdir, two_ranks):
    # two_ranks first: its checkpoint is the one the four ranks reshard.
    return run_suite("dist_training", FOUR, 4, workdir)


@pytest.mark.parametrize("check", TWO, ids=ids(TWO))
def test_two_ranks(two_ranks, check):
    assert not two_ranks[check], "\n".join(two_ranks[check])


@pytest.mark.parametrize("check", FOUR, ids=ids(FOUR))
def test_four_ranks(four_ranks, check):
    assert not four_ranks[check], "\n".join(four_ranks[check])
