"""Training checks: a small GPT trained for 5 steps on neuron ranks vs one CPU process.

The reference trains the same initial model on the whole batch of every step; data-parallel
ranks each take a slice of it, tensor-parallel and pipeline ranks see all of it.
"""

import functools
import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from gpt import GPT, batch, loss_fn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

STEPS, BATCH, LR = 5, 8, 0.1


@functools.cache
def reference(momentum=0.0):
    """State after STEPS of SGD on the full batch, in one CPU process."""
    model = fresh_model("cpu")
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=momentum)
    for step in range(STEPS):
        x, y = batch(step, BATCH)
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def fresh_model(device, seed=0):
    torch.manual_seed(seed)
    return GPT().to(device)


def full(t):
    return (t.full_tensor() if isinstance(t, DTensor) else t).detach().cpu()


def max_diff(model, expected):
    return max((full(v) - expected[k]).abs().max().item() for k, v in model.state_dict().items())


def train(ctx, model, opt, part=None):
    """STEPS of training; `part` = (index, count) takes that slice of every batch."""
    for step in range(STEPS):
        x, y = batch(step, BATCH)
        if part:
            index, count = part
            rows = slice(index * BATCH // count, (index + 1) * BATCH // count)
            x, y = x[rows], y[rows]
        opt.zero_grad()
        loss_fn(model(x.to(ctx.device)), y.to(ctx.device)).backward()
        opt.step()


def shard(model, mesh, **kwargs):
    """FSDP2 on every block, then on the root."""
    for block in model.blocks.values():
        fully_shard(block, mesh=mesh, **kwargs)
    return fully_shard(model, mesh=mesh, **kwargs)


def check_ddp(ctx):
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = fresh_model(ctx.device)
    ddp = DDP(model)
    train(ctx, ddp, torch.optim.SGD(ddp.parameters(), lr=LR), part=(ctx.rank, ctx.world))
    assert max_diff(model, reference()) <= 1e-6


def check_fsdp2(ctx):
    model = shard(fresh_model(ctx.device), init_device_mesh("neuron", (ctx.world,)))
    weight = model.head.weight
    assert isinstance(weight, DTensor) and weight.placements == (Shard(0),)
    assert weight.to_local().device == ctx.device
    assert weight.to_local().shape[0] == weight.shape[0] // ctx.world
    train(ctx, model, torch.optim.SGD(model.parameters(), lr=LR), part=(ctx.rank, ctx.world))
    assert max_diff(model, reference()) <= 1e-6


def check_fsdp2_compiled_blocks(ctx):
    """FSDP2 frees each block's unsharded parameters after its forward and gathers them anew
    for its backward, so compiled blocks must read saved parameters through their storage."""
    mesh = init_device_mesh("neuron", (ctx.world,))
    rows = slice(ctx.rank * BATCH // ctx.world, (ctx.rank + 1) * BATCH // ctx.world)
    runs = []
    for compiled in (False, True):
        model = shard(fresh_model(ctx.device), mesh)
        if compiled:
            for block in model.blocks.values():
                block.compile(backend="neuron", fullgraph=True)
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        losses, grads = [], []
        for step in range(10):
            x, y = batch(step, BATCH)
            opt.zero_grad()
            loss = loss_fn(model(x[rows].to(ctx.device)), y[rows].to(ctx.device))
            loss.backward()
            losses.append(loss.item())
            grads.append([full(p.grad) for p in model.parameters()])
            opt.step()
        runs.append((losses, grads))
    (eager_losses, eager_grads), (losses, grads) = runs
    assert max(abs(a - b) for a, b in zip(losses, eager_losses)) <= 1e-5, (losses, eager_losses)
    worst = max(
        (g - e).abs().max().item()
        for step, eager_step in zip(grads, eager_grads)
        for g, e in zip(step, eager_step)
    )
    assert worst <= 1e-5, f"gradients of compiled blocks differ from eager by {worst}"
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > 0


def check_fsdp2_mixed_precision(ctx):
    """bf16 compute with fp32 reduction, against the same FSDP2 run on CPU over gloo."""
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    mesh = init_device_mesh("neuron", (ctx.world,))
    neuron = shard(fresh_model(ctx.device), mesh, mp_policy=policy)
    cpu = shard(fresh_model("cpu"), DeviceMesh.from_group(ctx.gloo, "cpu"), mp_policy=policy)
    for module in cpu.modules():
        if hasattr(module, "set_force_sum_reduction_for_comms"):
            module.set_force_sum_reduction_for_comms(True)  # gloo has no AVG; same math for fp32
    dtypes = set()
    neuron.head.register_forward_hook(lambda module, args, out: dtypes.add(out.dtype))
    train(ctx, neuron, torch.optim.SGD(neuron.parameters(), lr=LR), part=(ctx.rank, ctx.world))
    assert dtypes == {torch.bfloat16}
    cpu_ctx = type(ctx)(ctx.rank, ctx.world, torch.device("cpu"), ctx.gloo, ctx.workdir)
    train(cpu_ctx, cpu, torch.optim.SGD(cpu.parameters(), lr=LR), part=(ctx.rank, ctx.world))
    expected = {k: full(v) for k, v in cpu.state_dict().items()}
    assert max_diff(neuron, expected) <= 1e-6
    assert max_diff(neuron, reference()) > 0, "bf16 compute should differ from fp32"


def check_fsdp2_cpu_offload(ctx):
    mesh = init_device_mesh("neuron", (ctx.world,))
    model = shard(fresh_model(ctx.device), mesh, offload_policy=CPUOffloadPolicy())
    assert model.head.weight.to_local().device.type == "cpu"
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    train(ctx, model, opt, part=(ctx.rank, ctx.world))
    assert all(s["momentum_buffer"].to_local().device.type == "cpu" for s in opt.state.values())
    assert max_diff(model, reference(momentum=0.9)) <= 1e-6


def tensor_parallel_plan(model, sequence_parallel):
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
    )

    seq = Shard(1)
    plan = {}
    for i in model.blocks:
        b = f"blocks.{i}"
        for name in ("attn.q", "attn.k", "attn.v", "mlp.up"):
            plan[f"{b}.{name}"] = ColwiseParallel()
        for name in ("attn.o", "mlp.down"):
            plan[f"{b}.{name}"] = (
                RowwiseParallel(output_layouts=seq, use_local_output=False)
                if sequence_parallel
                else RowwiseParallel()
            )
        if sequence_parallel:
            plan[b] = PrepareModuleInput(
                input_layouts=(Replicate(),), desired_input_layouts=(seq,), use_local_output=False
            )
            for name in ("norm1", "norm2"):
                plan[f"{b}.{name}"] = SequenceParallel()
            for name in ("attn", "mlp"):
                plan[f"{b}.{name}"] = PrepareModuleInput(
                    input_layouts=(seq,), desired_input_layouts=(Replicate(),)
                )
    return plan


def tensor_parallel(ctx, sequence_parallel):
    from torch.distributed.tensor.parallel import PrepareModuleOutput, parallelize_module

    mesh = init_device_mesh("neuron", (ctx.world,))
    model = fresh_model(ctx.device)
    parallelize_module(model, mesh, tensor_parallel_plan(model, sequence_parallel))
    if sequence_parallel:
        for block in model.blocks.values():
            parallelize_module(
                block,
                mesh,
                PrepareModuleOutput(
                    output_layouts=(Shard(1),), desired_output_layouts=(Replicate(),)
                ),
            )
    q = model.blocks["0"].attn.q.weight
    assert q.placements == (Shard(0),) and q.to_local().shape[0] == q.shape[0] // ctx.world
    # Plain and DTensor parameters cannot share one foreach kernel.
    train(ctx, model, torch.optim.SGD(model.parameters(), lr=LR, foreach=False))
    assert max_diff(model, reference()) <= 1e-5


def check_tensor_parallel(ctx):
    tensor_parallel(ctx, sequence_parallel=False)


def check_sequence_parallel(ctx):
    tensor_parallel(ctx, sequence_parallel=True)


def check_fsdp2_and_tensor_parallel_on_2d_mesh(ctx):
    from torch.distributed.tensor.parallel import parallelize_module

    mesh = init_device_mesh("neuron", (2, ctx.world // 2), mesh_dim_names=("dp", "tp"))
    model = fresh_model(ctx.device)
    parallelize_module(model, mesh["tp"], tensor_parallel_plan(model, sequence_parallel=False))
    shard(model, mesh["dp"])
    q = model.blocks["0"].attn.q.weight
    assert q.device_mesh.ndim == 2 and q.to_local().numel() == q.numel() // ctx.world
    opt = torch.optim.SGD(model.parameters(), lr=LR, foreach=False)
    train(ctx, model, opt, part=(mesh["dp"].get_local_rank(), 2))
    assert max_diff(model, reference()) <= 1e-5


def check_pipeline_two_stages(ctx):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    assert ctx.world == 2
    for schedule, microbatches in ((ScheduleGPipe, 2), (Schedule1F1B, 4)):
        model = fresh_model(ctx.device)
        if ctx.rank == 0:
            del model.blocks["1"]
            model.norm = model.head = None
        else:
            del model.blocks["0"]
            model.tok = model.pos = None
        stage = PipelineStage(model, ctx.rank, 2, ctx.device)
        pipe = schedule(stage, n_microbatches=microbatches, loss_fn=loss_fn)
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        for step in range(STEPS):
            x, y = batch(step, BATCH)
            opt.zero_grad()
            if ctx.rank == 0:
                pipe.step(x.to(ctx.device))
            else:
                losses = []
                pipe.step(target=y.to(ctx.device), losses=losses)
                assert len(losses) == microbatches
            opt.step()
        expected = reference()
        diff = max(
            (v.cpu() - expected[k]).abs().max().item() for k, v in model.state_dict().items()
        )
        assert diff <= 1e-5, (schedule.__name__, diff)


def all_equal_across_ranks(ctx, t):
    copies = [torch.zeros_like(t) for _ in range(ctx.world)]
    dist.all_gather(copies, t.contiguous(), group=ctx.gloo)
    return all(torch.equal(c, copies[0]) for c in copies)


def check_dtensor_random_ops(ctx):
    from torch.distributed.tensor import _random

    from torch_neuronx.distributed._rng import NeuronRNGTracker

    mesh = DeviceMesh("neuron", list(range(ctx.world)))

    def sharded_uniform():
        t = distribute_tensor(torch.empty(4 * ctx.world, 8, device=ctx.device), mesh, [Shard(0)])
        t.uniform_()
        return t

    torch.manual_seed(7)
    first = sharded_uniform()
    assert isinstance(_random._rng_tracker, NeuronRNGTracker)
    whole = full(first)
    assert all_equal_across_ranks(ctx, whole)
    shards = whole.chunk(ctx.world)
    assert all(not torch.equal(shards[0], s) for s in shards[1:]), "shards must differ"
    assert not torch.equal(full(sharded_uniform()), whole), "the generator must advance"

    replicated = distribute_tensor(torch.empty(16, device=ctx.device), mesh, [Replicate()])
    torch.nn.init.normal_(replicated)
    assert all_equal_across_ranks(ctx, replicated.to_local().cpu())
    after = torch.rand(4, device=ctx.device).cpu()
    assert all_equal_across_ranks(ctx, after), "generator states must stay in sync"

    torch.manual_seed(7)
    assert torch.equal(full(sharded_uniform()), whole), "the same seed must give the same tensor"


def dcp_model(ctx, seed):
    model = shard(fresh_model(ctx.device, seed), init_device_mesh("neuron", (ctx.world,)))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def full_state(model, opt):
    """Every rank's view of the whole model and optimizer state, on CPU."""
    msd, osd = get_state_dict(model, opt, options=StateDictOptions(full_state_dict=True))
    flat = {f"model.{k}": full(v) for k, v in msd.items()}
    for pid, state in osd["state"].items():
        flat.update({f"optim.{pid}.{k}": full(v) for k, v in state.items()})
    return flat


def load_checkpoint(ctx):
    model, opt = dcp_model(ctx, seed=1)
    msd, osd = get_state_dict(model, opt)
    state = {"model": msd, "optim": osd}
    dcp.load(state, checkpoint_id=os.path.join(ctx.workdir, "ckpt"))
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    expected = torch.load(os.path.join(ctx.workdir, "expected.pt"))
    got = full_state(model, opt)
    assert got.keys() == expected.keys()
    bad = [k for k in got if not torch.equal(got[k], expected[k])]
    assert not bad, bad


def check_dcp_save_and_round_trip(ctx):
    model, opt = dcp_model(ctx, seed=0)
    train(ctx, model, opt, part=(ctx.rank, ctx.world))
    msd, osd = get_state_dict(model, opt)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=os.path.join(ctx.workdir, "ckpt"))
    expected = full_state(model, opt)
    if ctx.rank == 0:
        torch.save(expected, os.path.join(ctx.workdir, "expected.pt"))
    dist.barrier()
    load_checkpoint(ctx)


def check_dcp_reshard_from_two_ranks(ctx):
    assert ctx.world != 2
    load_checkpoint(ctx)
