"""Registration on `import torch`, the bare init_process_group(), and torchrun launches:
each process takes core LOCAL_RANK, and a rank beyond the emulated cores gets a clear error."""

import os
import re
import subprocess
import sys

import pytest
import torch
from dist_harness import EXAMPLES, free_port

from torch_neuronx.distributed import bind_local_core

REGISTERED_BY_IMPORT_TORCH = """
import datetime, torch, torch.distributed as dist
assert "neuron" in dist.Backend.backend_list, "import torch did not register the neuron backend"
assert dist.get_default_backend_for_device("neuron") == "neuron"
assert dist.Backend.default_device_backend_map["cpu"] == "gloo"
dist.init_process_group(init_method="tcp://127.0.0.1:{port}", rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=30))
assert type(dist.group.WORLD._get_backend(torch.device("neuron"))).__name__ == "NeuronBackend"
t = torch.ones(3, device="neuron")
dist.all_reduce(t, op=dist.ReduceOp.AVG)
assert t.device.type == "neuron" and t.cpu().eq(1).all()
dist.destroy_process_group()
print("ok")
"""

EXIT_WITH_COLLECTIVES_COMPLETING = """
import datetime, torch, torch.distributed as dist
dist.init_process_group("neuron", init_method="tcp://127.0.0.1:{port}", rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=30))
# The script lets go of these works and tensors at once, so some completions are still running
# on gloo's thread, holding the last references, as the interpreter shuts down.
for _ in range(200):
    dist.all_reduce(torch.ones(1024, device="neuron"), op=dist.ReduceOp.AVG, async_op=True)
print("ok")
"""


def launch(args, env=None, timeout=120):
    full_env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", **(env or {}))
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=full_env, timeout=timeout
    )


def torchrun(nprocs, script_args, env=None):
    return launch(
        [
            "-m",
            "torch.distributed.run",
            f"--nproc-per-node={nprocs}",
            "--master-addr=127.0.0.1",
            f"--master-port={free_port()}",
            *script_args,
        ],
        env,
    )


def test_import_torch_registers_backend_and_bare_init_picks_it():
    done = launch(["-c", REGISTERED_BY_IMPORT_TORCH.format(port=free_port())])
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr


def test_local_rank_selects_core(monkeypatch):
    monkeypatch.delenv("NEURON_RT_VISIBLE_CORES", raising=False)
    monkeypatch.setenv("LOCAL_RANK", "3")
    bind_local_core()
    assert torch.neuron.current_device() == 3
    monkeypatch.setenv("LOCAL_RANK", str(torch.neuron.device_count()))
    count = torch.neuron.device_count()
    with pytest.raises(RuntimeError, match=f"LOCAL_RANK={count} has no NeuronCore"):
        bind_local_core()


def test_visible_cores_leave_the_device_alone(monkeypatch):
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    bind_local_core()
    assert torch.neuron.current_device() == 0


def test_torchrun_fsdp2_example_matches_the_same_program_on_cpu():
    losses = {}
    for device in ("neuron", "cpu"):
        for flags in ((), ("--bf16",)):
            script = [os.path.join(EXAMPLES, "train_fsdp2.py"), "--steps", "3", *flags]
            done = torchrun(2, [*script, "--device", device])
            assert done.returncode == 0, done.stderr
            # Ranks share torchrun's stdout, so their lines may run into each other.
            found = re.findall(r"step \d+: loss ([0-9.]+)", done.stdout)
            assert len(found) == 3, done.stdout
            losses[device, flags] = found
            for rank in range(2):
                where = f"neuron:{rank}" if device == "neuron" else "cpu"
                assert f"rank {rank} of 2 trained on {where}" in done.stdout
    for flags in ((), ("--bf16",)):
        assert losses["neuron", flags] == losses["cpu", flags], flags
    # bf16 compute moves the losses.
    assert losses["neuron", ()] != losses["neuron", ("--bf16",)]


def test_torchrun_rank_beyond_emulated_cores():
    script = os.path.join(EXAMPLES, "train_fsdp2.py")
    done = torchrun(2, [script, "--steps", "1"], {"NEURON_RT_NUM_CORES": "1"})
    assert done.returncode != 0
    assert "LOCAL_RANK=1 has no NeuronCore" in done.stderr, done.stderr


def test_exit_while_collectives_complete_does_not_abort():
    # It used to abort ("terminate called without an active exception") about half the time.
    for _ in range(4):
        done = launch(["-c", EXIT_WITH_COLLECTIVES_COMPLETING.format(port=free_port())])
        assert done.returncode == 0 and "ok" in done.stdout, done.stderr
