"""Runs test functions on spawned ranks: 127.0.0.1 only, every wait bounded in time."""

import datetime
import multiprocessing
import os
import pickle
import socket
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "distributed")
# Long enough for 4 ranks sharing 2 cores, short enough that a desynchronised rank fails fast.
PG_TIMEOUT = datetime.timedelta(seconds=30)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank, world, port):
    """The variables torchrun would set for `rank`, plus loopback-only gloo."""
    return {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world),
        "GLOO_SOCKET_IFNAME": "lo",
    }


def _entry(fn, rank, world, port, out, args):
    import torch

    os.environ.update(rank_env(rank, world, port))
    # One thread per rank, as torchrun sets it: spinning OpenMP workers of 4 ranks on 2 cores
    # would double the suite's run time.
    torch.set_num_threads(1)
    try:
        outcome = (fn(rank, world, *args), None)
    except BaseException:  # noqa: BLE001 - whatever a rank raises goes back to the test
        outcome = (None, traceback.format_exc())
    with open(out, "wb") as f:
        pickle.dump(outcome, f)


def spawn(fn, world, *args, timeout=120):
    """Runs fn(rank, world, *args) on `world` fresh processes; returns [(result, error)] per rank.

    A rank that crashes, or is still running at `timeout` seconds (it is then killed), reports
    an error string instead of a result. No rank is stopped because another one failed.
    """
    ctx = multiprocessing.get_context("spawn")
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        outs = [os.path.join(tmp, f"rank{r}.pkl") for r in range(world)]
        procs = [
            ctx.Process(target=_entry, args=(fn, r, world, port, outs[r], args))
            for r in range(world)
        ]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        outcomes = []
        for p, out in zip(procs, outs):
            if p.is_alive():
                p.kill()
                p.join()
                outcomes.append((None, f"still running after {timeout} s; killed"))
            elif os.path.exists(out):
                with open(out, "rb") as f:
                    outcomes.append(pickle.load(f))
            else:
                outcomes.append((None, f"exited with code {p.exitcode} and no result"))
        return outcomes


def suite(rank, world, module, names, workdir):
    """Runs the checks `names` of `module` in one neuron process group; {name: error or None}.

    Each check gets a Context. Sharing one group keeps process start-up, the slowest part of
    a distributed test on two cores, out of every single check.
    """
    import importlib

    import torch
    import torch.distributed as dist

    import torch_neuronx.distributed  # noqa: F401  (explicit, as in TorchNeuron's guide)

    dist.init_process_group("neuron", timeout=PG_TIMEOUT)
    gloo = dist.new_group(backend="gloo")
    ctx = Context(rank, world, torch.device("neuron", rank), gloo, workdir)
    checks = importlib.import_module(module)
    results = {}
    for name in names:
        try:
            getattr(checks, name)(ctx)
            results[name] = None
        except BaseException:  # noqa: BLE001 - each check reports its own failure
            results[name] = traceback.format_exc()
    dist.destroy_process_group()
    return results


class Context:
    """What a check needs: its rank, the world size, its NeuronCore, a pure-gloo group and a
    directory shared by all ranks (and by the suites of one test module)."""

    def __init__(self, rank, world, device, gloo, workdir):
        self.rank, self.world, self.device = rank, world, device
        self.gloo, self.workdir = gloo, workdir


def run_suite(module, names, world, workdir=None, timeout=180):
    """Runs suite() on `world` ranks; returns {name: [error of each rank that failed]}."""
    outcomes = spawn(suite, world, module, names, workdir, timeout=timeout)
    failures = {name: [] for name in names}
    for rank, (results, error) in enumerate(outcomes):
        for name in names:
            err = error if results is None else results.get(name)
            if err:
                failures[name].append(f"rank {rank}:\n{err}")
    return failures
