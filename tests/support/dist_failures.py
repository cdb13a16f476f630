"""Rank functions for the failure tests: a rank that dies, a rank that never shows up."""

import datetime
import os
import time

import torch
import torch.distributed as dist

import torch_neuronx.distributed  # noqa: F401


def attempt(op):
    """(error type, message, seconds until the error) of op(); ("", "", seconds) on success."""
    start = time.monotonic()
    try:
        op()
        return "", "", time.monotonic() - start
    except Exception as e:  # noqa: BLE001 - the error is the measurement
        return type(e).__name__, str(e), time.monotonic() - start


def dead_peer(rank, world, timeout):
    """The last rank exits abruptly; the others' next all_reduce must fail, not hang."""
    dist.init_process_group("neuron", timeout=datetime.timedelta(seconds=timeout))
    t = torch.ones(1024, device="neuron")
    dist.all_reduce(t)
    if rank == world - 1:
        os._exit(1)
    result = attempt(lambda: dist.all_reduce(t))
    dist.destroy_process_group()
    return result


def missing_peer(rank, world, timeout):
    """The last rank stays alive but skips an all_reduce and a send the others wait for."""
    limit = datetime.timedelta(seconds=timeout)
    dist.init_process_group("neuron", timeout=limit)
    # A timeout closes the group's connections, so the send is awaited in a group of its own.
    p2p = dist.new_group(timeout=limit)
    store = dist.distributed_c10d._get_default_store()
    t = torch.ones(1024, device="neuron")
    dist.all_reduce(t)
    if rank == world - 1:
        # Stay alive until the others have given up on this rank.
        store.wait([f"gave_up/{r}" for r in range(world - 1)], datetime.timedelta(seconds=60))
        return None
    results = [
        attempt(lambda: dist.all_reduce(t)),
        attempt(lambda: dist.recv(t, src=world - 1, group=p2p)),
    ]
    store.set(f"gave_up/{rank}", "1")
    return results
