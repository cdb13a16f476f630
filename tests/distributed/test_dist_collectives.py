"""Every collective of the neuron backend, on 2 and 4 ranks, against gloo on CPU tensors."""

import dist_collectives
import pytest
from dist_harness import run_suite

CHECKS = sorted(name for name in dir(dist_collectives) if name.startswith("check_"))


@pytest.fixture(scope="module", params=[2, 4], ids=lambda n: f"{n}ranks")
def failures(request):
    return run_suite("dist_collectives", CHECKS, request.param)


@pytest.mark.parametrize("check", CHECKS, ids=[c[len("check_") :] for c in CHECKS])
def test_collective(failures, check):
    assert not failures[check], "\n".join(failures[check])
