"""TorchTitan, unchanged, trains its llama3 debug model on 2 NeuronCores: FSDP2, its default
attention and activation checkpointing, validation, and a DCP checkpoint that training resumes
from with the losses of the run that saved it (examples/torchtitan/run.sh)."""

import os
import re
import subprocess
import sys

import pytest

# The version too: without TorchTitan installed, examples/torchtitan (on pytest's pythonpath)
# imports as an empty namespace package, with no __version__.
pytest.importorskip("torchtitan", minversion="0.3")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(ROOT, "examples", "torchtitan", "run.sh")
# Few short steps: process start-up and the first step's compiles are most of the time.
FLAGS = (
    "--training.steps=4",
    "--training.seq-len=64",
    "--training.local-batch-size=2",
    "--checkpoint.interval=2",
    "--metrics.disable-color-printing",
)
TRAIN_STEP = re.compile(r"\bstep:\s+(\d+)\s+loss:\s+([0-9.]+)")
VALIDATION_STEP = re.compile(r"validate step:\s+(\d+)\s+loss:\s+([0-9.]+)")


def train(workdir, *flags):
    """Runs run.sh; returns {step: loss} of the steps it trained, and its output."""
    env = dict(
        os.environ,
        PYTHON=sys.executable,
        WORKDIR=str(workdir),
        GLOO_SOCKET_IFNAME="lo",
        HF_DATASETS_CACHE=str(workdir / "hf-datasets"),
    )
    done = subprocess.run(
        ["bash", RUN, *FLAGS, *flags], capture_output=True, text=True, env=env, timeout=600
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    losses = {int(step): float(loss) for step, loss in TRAIN_STEP.findall(done.stdout)}
    return losses, output


@pytest.mark.slow
def test_fsdp2_trains_validates_and_resumes_from_checkpoint(tmp_path):
    losses, output = train(tmp_path)
    assert sorted(losses) == [1, 2, 3, 4], output[-6000:]
    assert losses[4] < losses[1] - 0.5, losses
    assert "dp_shard=2" in output and "Applied FSDP to the model" in output
    assert "Applied SelectiveAC activation checkpointing" in output
    assert VALIDATION_STEP.search(output), output[-6000:]
    checkpoints = tmp_path / "outputs" / "checkpoint"
    assert sorted(os.listdir(checkpoints)) == ["step-2", "step-4"]
    assert (checkpoints / "step-2" / ".metadata").is_file()  # a DCP checkpoint

    resumed, output = train(tmp_path, "--checkpoint.load-step=2")
    assert f"Loading the checkpoint from {checkpoints / 'step-2'}" in output, output[-6000:]
    # Model, optimizer, learning-rate schedule and data loader all come back from step 2.
    assert resumed == {3: losses[3], 4: losses[4]}
