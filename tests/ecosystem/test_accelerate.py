"""accelerate on neuron: `accelerate launch` with DDP works unchanged; device_map="auto" and
mixed_precision="fp16" need the workarounds in docs/ecosystem.md. Each limitation is asserted
as it is today, so that this test fails, and the document gets updated, once accelerate lifts it.
"""

import json
import os
import subprocess
import sys

import accelerate_ddp_job
import pytest
import torch
from dist_harness import free_port
from hf_tiny import causal_lm
from pyrun import SUPPORT

accelerate = pytest.importorskip("accelerate")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny two-layer Llama saved with save_pretrained, and its CPU logits for some tokens."""
    path = tmp_path_factory.mktemp("llama")
    model = causal_lm("llama", layers=2).eval()
    model.save_pretrained(path)
    ids = torch.arange(3, 11)[None]
    with torch.no_grad():
        return path, ids, model(ids).logits


def devices_of(model):
    return {str(p.device) for p in model.parameters()}


def test_automatic_device_maps_fall_back_to_cpu_and_device_map_neuron_works(checkpoint):
    path, ids, cpu_logits = checkpoint
    # accelerate's memory probe asks torch.cuda (and npu, xpu, ...), never torch.neuron, so it
    # finds only the CPU, and the automatic maps silently put every weight there.
    assert list(accelerate.utils.get_max_memory()) == ["cpu"]
    for automatic in ("auto", "balanced", "sequential"):
        model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map=automatic)
        assert devices_of(model) == {"cpu"}, automatic

    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="neuron")
    assert devices_of(model) == {"neuron:0"}
    with torch.no_grad():
        logits = model(ids.to("neuron")).logits
    torch.testing.assert_close(logits.cpu(), cpu_logits, rtol=0, atol=0)


def test_device_map_naming_cores_splits_the_model(checkpoint):
    path, ids, cpu_logits = checkpoint
    first, second = "neuron:0", "neuron:1"
    device_map = {
        "model.embed_tokens": first,
        "model.rotary_emb": first,
        "model.layers.0": first,
        "model.layers.1": second,
        "model.norm": second,
        "lm_head": second,
    }
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map=device_map)
    assert model.model.layers[0].mlp.up_proj.weight.device == torch.device(first)
    assert model.lm_head.weight.device == torch.device(second)
    with torch.no_grad():
        logits = model(ids.to(first)).logits
    torch.testing.assert_close(logits.cpu(), cpu_logits, rtol=0, atol=0)


def test_dispatch_model_ignores_a_core_index_and_a_device_name_works(checkpoint):
    path, ids, cpu_logits = checkpoint
    # dispatch_model's one-device branch turns the index 0 into "neuron:0" and then skips
    # model.to() (as for npu, mlu, musa and sdaa): the model silently stays on the CPU.
    model = transformers.AutoModelForCausalLM.from_pretrained(path)
    assert devices_of(accelerate.dispatch_model(model, {"": 0})) == {"cpu"}

    model = accelerate.dispatch_model(model, {"": "neuron:1"})
    assert devices_of(model) == {"neuron:1"}
    with torch.no_grad():
        logits = model(ids.to("neuron:1")).logits
    torch.testing.assert_close(logits.cpu(), cpu_logits, rtol=0, atol=0)
    # transformers resolves an index itself: from_pretrained(device_map=0) works.
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map={"": 1})
    assert devices_of(model) == {"neuron:1"}


def train_with_accelerator(cpu, mixed_precision):
    """Three steps of a small MLP under Accelerator; returns the losses, the dtype the first layer
    computed in, and the weights."""
    accelerator = accelerate.Accelerator(cpu=cpu, mixed_precision=mixed_precision)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    inner_dtypes = []
    net[0].register_forward_hook(lambda mod, args, out: inner_dtypes.append(out.dtype))
    net, optimizer = accelerator.prepare(net, optimizer)
    generator = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(3):
        x = torch.randn(16, 8, generator=generator).to(accelerator.device)
        y = torch.randint(0, 4, (16,), generator=generator).to(accelerator.device)
        loss = torch.nn.functional.cross_entropy(net(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return accelerator, losses, inner_dtypes[0], [p.detach().cpu() for p in net.parameters()]


def forget_accelerate_state():
    # Accelerator keeps its device and mixed precision in a process-wide singleton.
    accelerate.state.AcceleratorState._reset_state(reset_partial_state=True)


def test_accelerate_refuses_fp16(tmp_path):
    with pytest.raises(ValueError, match=r"fp16 mixed precision requires a device in .*'neuron'"):
        accelerate.Accelerator(mixed_precision="fp16")
    forget_accelerate_state()
    # Trainer(fp16=True) builds the same Accelerator.
    args = transformers.TrainingArguments(output_dir=str(tmp_path), fp16=True, report_to=[])
    with pytest.raises(ValueError, match=r"fp16 mixed precision requires a device in .*'neuron'"):
        transformers.Trainer(model=causal_lm("llama"), args=args)


def test_accelerate_bf16_matches_cpu():
    accelerator, losses, dtype, weights = train_with_accelerator(cpu=False, mixed_precision="bf16")
    assert accelerator.device.type == "neuron" and dtype == torch.bfloat16
    forget_accelerate_state()
    _, cpu_losses, cpu_dtype, cpu_weights = train_with_accelerator(cpu=True, mixed_precision="bf16")
    assert cpu_dtype == torch.bfloat16
    # Autocast on neuron follows CUDA's op policy, on the CPU the CPU's: bfloat16 apart.
    torch.testing.assert_close(losses, cpu_losses, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(weights, cpu_weights, rtol=1e-2, atol=1e-2)


def train_fp16_with_grad_scaler(device):
    """Three steps under torch.autocast(float16) with a GradScaler: what accelerate's fp16 would
    do, written out. Returns the losses, the first layer's dtype, the scale and the weights."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    net.to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device)
    generator = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(3):
        x = torch.randn(16, 8, generator=generator).to(device)
        y = torch.randint(0, 4, (16,), generator=generator).to(device)
        with torch.autocast(device, dtype=torch.float16):
            hidden = net[0](x)
            loss = torch.nn.functional.cross_entropy(net[2](net[1](hidden)), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, hidden.dtype, scaler.get_scale(), [p.detach().cpu() for p in net.parameters()]


def test_fp16_autocast_with_grad_scaler_matches_cpu():
    losses, dtype, scale, weights = train_fp16_with_grad_scaler("neuron")
    cpu_losses, cpu_dtype, cpu_scale, cpu_weights = train_fp16_with_grad_scaler("cpu")
    assert dtype == cpu_dtype == torch.float16 and scale == cpu_scale
    # Autocast on neuron follows CUDA's op policy, on the CPU the CPU's: float16 apart.
    torch.testing.assert_close(losses, cpu_losses, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(weights, cpu_weights, rtol=1e-3, atol=1e-3)


def accelerate_launch(script, processes, home, **env_vars):
    """`accelerate launch` of `script` on `processes` processes of this machine."""
    command = [
        *(sys.executable, "-m", "accelerate.commands.launch"),
        *("--num_processes", str(processes), "--num_machines", "1", "--multi_gpu"),
        *("--mixed_precision", "no", "--dynamo_backend", "no"),
        *("--main_process_ip", "127.0.0.1", "--main_process_port", str(free_port())),
        script,
    ]
    # A private HF_HOME: no accelerate config file of this machine's user applies.
    env = dict(os.environ, HF_HOME=str(home), GLOO_SOCKET_IFNAME="lo", **env_vars)
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
def test_accelerate_launch_ddp_synchronizes_gradients(tmp_path):
    script = os.path.join(SUPPORT, "accelerate_ddp_job.py")
    done = accelerate_launch(script, 2, tmp_path, REPORT_DIR=str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    reports = []
    for rank in range(2):
        with open(tmp_path / f"rank{rank}.json") as f:
            reports.append(json.load(f))
    assert [r["rank"] for r in reports] == [0, 1], done.stdout + done.stderr
    grads, weights = accelerate_ddp_job.cpu_reference(world=2)
    for rank, report in enumerate(reports):
        assert report["world"] == 2 and report["distributed_type"] == "MULTI_NEURON"
        assert report["device"] == f"neuron:{rank}"
        assert report["weight_devices"] == [f"neuron:{rank}"]
        assert report["wrapper"] == "DistributedDataParallel"
        # Each process saw half the batch; the averaged gradients are the whole batch's.
        torch.testing.assert_close(report["grads"], grads, rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(report["weights"], weights, rtol=1e-6, atol=1e-7)
    assert reports[0]["grads"] == reports[1]["grads"]
    assert reports[0]["weights"] == reports[1]["weights"]
