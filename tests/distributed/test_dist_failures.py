"""When a rank dies or never arrives, the others fail within the timeout, naming the collective
and the rank, and every process exits: nothing hangs."""

import dist_failures
from dist_harness import spawn


def test_dead_rank_fails_the_others_fast():
    timeout = 20
    outcomes = spawn(dist_failures.dead_peer, 3, timeout, timeout=90)
    assert outcomes[2] == (None, "exited with code 1 and no result")
    for rank, (result, error) in enumerate(outcomes[:2]):
        assert error is None, error
        kind, message, seconds = result
        assert kind == "DistBackendError", (kind, message)
        assert f"[Rank {rank}] neuron ALLREDUCE" in message, message
        assert seconds < timeout, seconds


def test_missing_peer_times_out_naming_collective():
    timeout = 3
    outcomes = spawn(dist_failures.missing_peer, 2, timeout, timeout=90)
    assert all(error is None for _, error in outcomes), outcomes
    (collective, p2p), _ = outcomes[0]
    expected = ((collective, "ALLREDUCE"), (p2p, "RECV with peer rank 1"))
    for (kind, message, seconds), name in expected:
        assert kind == "DistBackendError", (kind, message)
        assert f"[Rank 0] neuron {name}" in message and "Timed out" in message, message
        assert timeout - 0.5 <= seconds < timeout + 5, seconds
