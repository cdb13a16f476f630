"""Checks of every collective of the neuron backend against gloo on CPU tensors.

Each check runs on all ranks of one neuron process group (dist_harness.suite). The usual
pattern: run a collective on neuron copies of some per-rank inputs through the neuron
backend, run it on CPU copies through a pure-gloo group, and require bit-identical tensors,
and that the collective made no copy between device and host (it works on device memory in
place, as the README says).
"""

import contextlib
import datetime
import time
from functools import partial

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

R = dist.ReduceOp


def inputs(ctx, shape, dtype=torch.float32, salt=0):
    """Per-rank data: different on every rank, the same on every run."""
    g = torch.Generator().manual_seed(1000 * ctx.rank + salt)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-1000, 1000, shape, generator=g, dtype=dtype)


def move(tree, device):
    """Copies of the tensors in a (nested) list on `device`; None stays None."""
    if isinstance(tree, (list, tuple)):
        return [move(t, device) for t in tree]
    return None if tree is None else tree.clone().to(device)


def assert_same(neuron, cpu, device):
    if isinstance(neuron, list):
        assert len(neuron) == len(cpu)
        for n, c in zip(neuron, cpu):
            assert_same(n, c, device)
    elif neuron is not None:
        assert neuron.device == device, neuron.device
        assert torch.equal(neuron.cpu(), cpu), (neuron.cpu(), cpu)


def host_copies():
    """The device-to-host and host-to-device copies this process has made so far."""
    counters = dict(zip(*torch.ops.neuron.counters()))
    return {name: counters.get(name, 0) for name in ("DeviceToHostCopies", "HostToDeviceCopies")}


@contextlib.contextmanager
def no_host_copies(what):
    """Fails if the block copies between device and host: a backend that stages through host
    tensors and copies back would keep the tensors' addresses, and their values, too."""
    before = host_copies()
    yield
    after = host_copies()
    assert after == before, f"{what} copied between device and host: {before} -> {after}"


def versus_gloo(ctx, collective, *args, reference=None, rank=None):
    """collective(*args, group) on neuron (neuron group) vs `reference` or itself on CPU (gloo),
    compared on every rank, or only on `rank` where the result is defined only there."""
    on_neuron, on_cpu = move(list(args), ctx.device), move(list(args), "cpu")
    with no_host_copies(collective):
        collective(*on_neuron, group=dist.group.WORLD)
    (reference or collective)(*on_cpu, group=ctx.gloo)
    if rank in (None, ctx.rank):
        assert_same(on_neuron, on_cpu, ctx.device)


def sum_then_divide(collective):
    """Gloo has no AVG: the reference sums, then divides the output (the first argument)."""

    def reference(out, *rest, group):
        collective(out, *rest, op=R.SUM, group=group)
        if out.is_floating_point():
            out.div_(group.size())
        else:
            out.div_(group.size(), rounding_mode="trunc")

    return reference


# The ReduceOps gloo has, by the dtypes they apply to; AVG and PREMUL_SUM need a reference.
FLOAT_OPS = (R.SUM, R.PRODUCT, R.MIN, R.MAX)
INTEGER_OPS = (R.SUM, R.BAND, R.BOR, R.BXOR)


def premul_sum_reference(collective, factor):
    """PREMUL_SUM as gloo can do it: scale the input, then sum. The input is the last argument:
    a list, whose tensors the caller keeps unscaled, or the tensor reduced in place."""

    def reference(*args, group):
        if isinstance(args[-1], list):
            args = (*args[:-1], [t * factor for t in args[-1]])
        else:
            args[-1].mul_(factor)
        collective(*args, op=R.SUM, group=group)

    return reference


def versus_gloo_with_every_op(ctx, collective, make_args, rank=None):
    """collective(*args, op=, group=) with every ReduceOp against gloo on CPU tensors."""
    for dtype, ops in ((torch.float32, FLOAT_OPS), (torch.int64, INTEGER_OPS)):
        for op in ops:
            versus_gloo(ctx, partial(collective, op=op), *make_args(dtype), rank=rank)
        versus_gloo(
            ctx,
            partial(collective, op=R.AVG),
            *make_args(dtype),
            reference=sum_then_divide(collective),
            rank=rank,
        )
    versus_gloo(
        ctx,
        partial(collective, op=dist._make_nccl_premul_sum(0.25)),
        *make_args(torch.float32),
        reference=premul_sum_reference(collective, 0.25),
        rank=rank,
    )


def check_all_reduce(ctx):
    def reduce(op):
        return lambda t, group: dist.all_reduce(t, op, group)

    for dtype in (torch.float32, torch.bfloat16):
        for op in FLOAT_OPS:
            versus_gloo(ctx, reduce(op), inputs(ctx, (33, 7), dtype))
    for op in INTEGER_OPS:
        versus_gloo(ctx, reduce(op), inputs(ctx, (65,), torch.int64))


def check_all_reduce_avg(ctx):
    for dtype in (torch.float32, torch.int64):
        versus_gloo(
            ctx,
            lambda t, group: dist.all_reduce(t, R.AVG, group),
            inputs(ctx, (40, 3), dtype),
            reference=sum_then_divide(lambda t, op, group: dist.all_reduce(t, op, group)),
        )


def check_all_reduce_premul_sum(ctx):
    def reference(t, group):
        t.mul_(0.25)
        dist.all_reduce(t, R.SUM, group)

    versus_gloo(
        ctx,
        lambda t, group: dist.all_reduce(t, dist._make_nccl_premul_sum(0.25), group),
        inputs(ctx, (40, 3)),
        reference=reference,
    )
    factor = torch.tensor(0.25, device=ctx.device)
    versus_gloo(
        ctx,
        lambda t, group: dist.all_reduce(t, dist._make_nccl_premul_sum(factor), group),
        inputs(ctx, (40, 3)),
        reference=reference,
    )


def check_all_reduce_coalesced(ctx):
    tensors = [inputs(ctx, (5, 3)), inputs(ctx, (11,), salt=1), inputs(ctx, (2, 2, 2), salt=2)]

    def coalesced(op):
        def run(*ts, group):
            with dist._coalescing_manager(group=group):
                for t in ts:
                    dist.all_reduce(t, op, group)

        return run

    def avg_reference(*ts, group):
        coalesced(R.SUM)(*ts, group=group)  # the same summation order as the neuron run
        for t in ts:
            t.div_(group.size())

    versus_gloo(ctx, coalesced(R.SUM), *tensors)
    versus_gloo(ctx, coalesced(R.MAX), *tensors)
    versus_gloo(ctx, coalesced(R.AVG), *tensors, reference=avg_reference)


def check_all_gather(ctx):
    versus_gloo(
        ctx,
        lambda out, t, group: dist.all_gather(out, t, group),
        [torch.zeros(5, 3) for _ in range(ctx.world)],
        inputs(ctx, (5, 3)),
    )


def check_all_gather_into_tensor(ctx):
    gather = lambda out, t, group: dist.all_gather_into_tensor(out, t, group)  # noqa: E731
    versus_gloo(ctx, gather, torch.zeros(ctx.world * 5, 3), inputs(ctx, (5, 3)))
    ints = inputs(ctx, (5, 3), torch.int32)
    versus_gloo(ctx, gather, torch.zeros(ctx.world * 5, 3, dtype=torch.int32), ints)


def check_allgather_into_tensor_coalesced(ctx):
    def coalesced(out1, out2, in1, in2, group):
        with dist._coalescing_manager(group=group):
            dist.all_gather_into_tensor(out1, in1, group)
            dist.all_gather_into_tensor(out2, in2, group)

    versus_gloo(
        ctx,
        coalesced,
        torch.zeros(ctx.world * 4),
        torch.zeros(ctx.world * 3, 2),
        inputs(ctx, (4,)),
        inputs(ctx, (3, 2), salt=1),
    )


def check_whole_group_tensor_layouts(ctx):
    """all_gather_into_tensor's output and reduce_scatter_tensor's input may also be stacked
    (torch's docs) or flat (what accelerate passes), as on NCCL; gloo's concatenated layout on
    CPU tensors is the reference."""
    layouts = ((ctx.world, 4, 3), (ctx.world * 12,))
    part = inputs(ctx, (4, 3))
    gathered = torch.zeros(ctx.world * 4, 3)
    dist.all_gather_into_tensor(gathered, part, group=ctx.gloo)
    for shape in layouts:
        out = torch.zeros(shape, device=ctx.device)
        dist.all_gather_into_tensor(out, part.to(ctx.device))
        assert torch.equal(out.cpu().reshape(gathered.shape), gathered), shape
    whole = inputs(ctx, (ctx.world * 4, 3), salt=1)
    reduced = torch.zeros(4, 3)
    dist.reduce_scatter_tensor(reduced, whole, group=ctx.gloo)
    for shape in layouts:
        out = torch.zeros(4, 3, device=ctx.device)
        dist.reduce_scatter_tensor(out, whole.reshape(shape).to(ctx.device))
        assert torch.equal(out.cpu(), reduced), shape


def check_reduce_scatter(ctx):
    versus_gloo_with_every_op(
        ctx,
        dist.reduce_scatter,
        lambda dtype: (
            torch.zeros(6, 2, dtype=dtype),
            [inputs(ctx, (6, 2), dtype, salt=i) for i in range(ctx.world)],
        ),
    )


def check_reduce_scatter_tensor(ctx):
    def scatter(op):
        return lambda out, t, group: dist.reduce_scatter_tensor(out, t, op, group)

    def premul_reference(out, t, group):
        dist.reduce_scatter_tensor(out, t * 0.5, R.SUM, group)

    args = (torch.zeros(4, 3), inputs(ctx, (ctx.world * 4, 3)))
    versus_gloo(ctx, scatter(R.SUM), *args)
    versus_gloo(ctx, scatter(R.MIN), *args)
    versus_gloo(ctx, scatter(R.AVG), *args, reference=sum_then_divide(dist.reduce_scatter_tensor))
    versus_gloo(ctx, scatter(dist._make_nccl_premul_sum(0.5)), *args, reference=premul_reference)

    source = torch.ones(ctx.world * 4, 3, device=ctx.device)
    dist.reduce_scatter_tensor(
        torch.empty(4, 3, device=ctx.device), source, dist._make_nccl_premul_sum(0.5)
    )
    assert source.eq(1).all(), "PREMUL_SUM must not scale the caller's input"


def check_reduce_scatter_tensor_coalesced(ctx):
    def coalesced(op):
        def run(out1, out2, in1, in2, group):
            with dist._coalescing_manager(group=group):
                dist.reduce_scatter_tensor(out1, in1, op, group)
                dist.reduce_scatter_tensor(out2, in2, op, group)

        return run

    def avg_reference(out1, out2, in1, in2, group):
        for out, t in ((out1, in1), (out2, in2)):
            sum_then_divide(dist.reduce_scatter_tensor)(out, t, group=group)

    args = (
        torch.zeros(4),
        torch.zeros(2, 3),
        inputs(ctx, (ctx.world * 4,)),
        inputs(ctx, (ctx.world * 2, 3), salt=1),
    )
    versus_gloo(ctx, coalesced(R.SUM), *args)
    versus_gloo(ctx, coalesced(R.AVG), *args, reference=avg_reference)


def check_all_to_all(ctx):
    versus_gloo(
        ctx,
        lambda outs, ins, group: dist.all_to_all(outs, ins, group),
        [torch.zeros(3, 2) for _ in range(ctx.world)],
        [inputs(ctx, (3, 2), salt=i) for i in range(ctx.world)],
    )


def check_all_to_all_single(ctx):
    versus_gloo(
        ctx,
        lambda out, t, group: dist.all_to_all_single(out, t, group=group),
        torch.zeros(ctx.world * 2, 3),
        inputs(ctx, (ctx.world * 2, 3)),
    )
    # Uneven: rank r sends j + 1 rows to rank j, so it receives r + 1 rows from everyone.
    send = [j + 1 for j in range(ctx.world)]
    recv = [ctx.rank + 1] * ctx.world
    versus_gloo(
        ctx,
        lambda out, t, group: dist.all_to_all_single(out, t, recv, send, group=group),
        torch.zeros(sum(recv), 2),
        inputs(ctx, (sum(send), 2)),
    )


def check_broadcast(ctx):
    for src, dtype in ((0, torch.float32), (ctx.world - 1, torch.int64)):
        versus_gloo(ctx, lambda t, group: dist.broadcast(t, src, group), inputs(ctx, (7, 5), dtype))


def check_reduce(ctx):
    root = ctx.world - 1
    # Only the root's result is defined.
    versus_gloo_with_every_op(
        ctx,
        lambda t, op, group: dist.reduce(t, root, op, group),
        lambda dtype: (inputs(ctx, (9, 2), dtype),),
        rank=root,
    )


def check_gather(ctx):
    for dst in (0, ctx.world - 1):
        outs = [torch.zeros(4, 2) for _ in range(ctx.world)] if ctx.rank == dst else None
        gather = lambda t, outs, group: dist.gather(t, outs, dst, group)  # noqa: E731
        versus_gloo(ctx, gather, inputs(ctx, (4, 2)), outs)


def check_scatter(ctx):
    src = ctx.world - 1
    ins = [inputs(ctx, (4, 2), salt=i) for i in range(ctx.world)] if ctx.rank == src else None
    scatter = lambda out, ins, group: dist.scatter(out, ins, src, group)  # noqa: E731
    versus_gloo(ctx, scatter, torch.zeros(4, 2), ins)


def check_barrier(ctx):
    store = dist.distributed_c10d._get_default_store()
    if ctx.rank == 0:
        time.sleep(0.5)  # the others must wait for this rank's key
    store.set(f"barrier/{ctx.rank}", "here")
    dist.barrier()
    assert store.check([f"barrier/{r}" for r in range(ctx.world)])


def ring(send, recv, group):
    """Every rank sends to the next one and receives from the previous one."""
    rank, world = dist.get_rank(group), group.size()
    ops = [
        dist.P2POp(dist.isend, send, (rank + 1) % world, group),
        dist.P2POp(dist.irecv, recv, (rank - 1) % world, group),
    ]
    for work in dist.batch_isend_irecv(ops):
        work.wait()


def check_send_recv(ctx):
    versus_gloo(ctx, ring, inputs(ctx, (6, 6)), torch.zeros(6, 6))

    def blocking(t, group):
        if ctx.rank == 0:
            dist.send(t, 1, group)
        elif ctx.rank == 1:
            dist.recv(t, 0, group)

    versus_gloo(ctx, blocking, inputs(ctx, (3,), torch.int64))


def check_recv_any_source(ctx):
    received = []

    def gather_any(t, group):
        if ctx.rank != 0:
            dist.send(t, 0, group)
            return
        for _ in range(ctx.world - 1):
            buf = torch.zeros_like(t)
            received.append((dist.recv(buf, group=group), buf))

    versus_gloo(ctx, gather_any, torch.full((4,), float(ctx.rank)))
    # Checked after the collectives, whose copy counters must not see the check's own copies.
    for src, buf in received:
        assert torch.equal(buf.cpu(), torch.full((4,), float(src))), (src, buf)
    if ctx.rank == 0:
        senders = [src for src, _ in received]
        assert sorted(senders) == sorted(2 * list(range(1, ctx.world))), senders


def check_async_work_and_futures(ctx):
    t = torch.full((8,), float(ctx.rank + 1), device=ctx.device)
    work = dist.all_reduce(t, async_op=True)
    doubled = work.get_future().then(lambda fut: fut.value()[0] * 2)
    work.wait()
    total = ctx.world * (ctx.world + 1) / 2
    assert work.is_completed() and work.is_success()
    assert work.get_future().value()[0] is t, "the future must yield the caller's neuron tensor"
    assert work.result()[0] is t
    assert torch.equal(doubled.wait().cpu(), torch.full((8,), 2 * total))
    assert doubled.wait().device == ctx.device

    # Gloo gives reduce_scatter and send/recv no future: a waiting thread completes ours.
    out = torch.empty(2, device=ctx.device)
    ones = torch.ones(2 * ctx.world, device=ctx.device)
    work = dist.reduce_scatter_tensor(out, ones, async_op=True)
    assert work.get_future().wait()[0] is out
    assert torch.equal(out.cpu(), torch.full((2,), float(ctx.world)))
    deadline = time.monotonic() + 10
    while not work.is_completed():  # completes without anyone calling wait()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    peer = ctx.rank ^ 1
    if peer < ctx.world:
        buf = torch.zeros(3, device=ctx.device)
        works = [
            dist.isend(torch.full((3,), float(ctx.rank), device=ctx.device), peer),
            dist.irecv(buf, peer),
        ]
        assert works[1].get_future().wait()[0] is buf
        works[0].wait()
        assert torch.equal(buf.cpu(), torch.full((3,), float(peer)))


def check_wait_timeout_names_collective(ctx):
    store = dist.distributed_c10d._get_default_store()
    late = ctx.world - 1
    t = torch.ones(4, device=ctx.device)
    if ctx.rank == late:
        # Join only once every other rank has seen its wait() time out.
        store.wait([f"timed_out/{r}" for r in range(late)])
    work = dist.all_reduce(t, async_op=True)
    if ctx.rank != late:
        try:
            work.wait(timeout=datetime.timedelta(milliseconds=300))
            raise AssertionError("wait() returned before the late rank arrived")
        except dist.DistBackendError as e:
            text = str(e)
            assert "ALLREDUCE" in text and f"[Rank {ctx.rank}]" in text and "timed out" in text, e
        store.set(f"timed_out/{ctx.rank}", "1")
    work.wait()
    assert torch.equal(t.cpu(), torch.full((4,), float(ctx.world)))


def check_cpu_tensors_go_to_gloo(ctx):
    world = dist.group.WORLD
    assert set(d.type for d in world._device_types) == {"neuron", "cpu"}
    backend = world._get_backend(torch.device("cpu"))
    assert type(backend).__name__ == "NeuronBackend"
    assert backend is world._get_backend(torch.device("neuron"))
    versus_gloo(ctx, lambda t, group: dist.all_reduce(t, group=group), inputs(ctx, (10,)))
    cpu_out = [torch.zeros(3) for _ in range(ctx.world)]
    dist.all_gather(cpu_out, torch.full((3,), float(ctx.rank)))
    assert all(torch.equal(o, torch.full((3,), float(r))) for r, o in enumerate(cpu_out))
    objects = [None] * ctx.world
    dist.all_gather_object(objects, {"rank": ctx.rank})
    assert objects == [{"rank": r} for r in range(ctx.world)]


def check_zero_copy_in_place(ctx):
    base = torch.zeros(10, device=ctx.device)
    view = base[2:6]
    ptr = view.data_ptr()
    view.fill_(1.0)
    with no_host_copies("all_reduce of a view"):
        dist.all_reduce(view)
    assert view.data_ptr() == ptr
    expected = torch.zeros(10)
    expected[2:6] = ctx.world
    assert torch.equal(base.cpu(), expected)


def check_mixed_devices_rejected(ctx):
    try:
        outputs = [torch.zeros(2) for _ in range(ctx.world)]
        dist.all_gather(outputs, torch.ones(2, device=ctx.device))
        raise AssertionError("a neuron input with CPU outputs was accepted")
    except RuntimeError as e:
        assert "ALLGATHER" in str(e) and "one device" in str(e), e


def check_functional_collectives(ctx):
    group = dist.group.WORLD
    x = inputs(ctx, (4 * ctx.world, 3))
    on = x.to(ctx.device)

    reduced = x.clone()
    dist.all_reduce(reduced, group=ctx.gloo)
    assert torch.equal(funcol.all_reduce(on, "sum", group).cpu(), reduced)
    assert torch.equal(funcol.all_reduce(on, "avg", group).cpu(), reduced / ctx.world)

    gathered = torch.zeros(ctx.world * 4 * ctx.world, 3)
    dist.all_gather_into_tensor(gathered, x, ctx.gloo)
    assert torch.equal(funcol.all_gather_tensor(on, 0, group).cpu(), gathered)

    scattered = torch.zeros(4, 3)
    dist.reduce_scatter_tensor(scattered, x, group=ctx.gloo)
    assert torch.equal(funcol.reduce_scatter_tensor(on, "sum", 0, group).cpu(), scattered)

    exchanged = torch.zeros_like(x)
    dist.all_to_all_single(exchanged, x, group=ctx.gloo)
    assert torch.equal(funcol.all_to_all_single(on, None, None, group).cpu(), exchanged)

    sent = x.clone()
    dist.broadcast(sent, 0, ctx.gloo)
    assert torch.equal(funcol.broadcast(on, 0, group).cpu(), sent)

    pair = [x.clone(), x * 2]
    with dist._coalescing_manager(group=ctx.gloo):
        for t in pair:
            dist.all_reduce(t, group=ctx.gloo)
    both = funcol.all_reduce_coalesced([on, on * 2], "sum", group)
    assert torch.equal(both[0].cpu(), pair[0]) and torch.equal(both[1].cpu(), pair[1])
