"""Adaptive eager execution: queued, fused elementwise runs keep eager's exact bits.

Every op and dtype that op_policy.json calls fusable is checked here against the same ops run
one by one on neuron and on CPU, on tensors that span several chunks; so is every boundary.
"""

import contextlib
import json
import os
import sys

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyrun import run_python

from torch_neuronx import _op_policy as op_policy
from torch_neuronx import adaptive_eager, metrics

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
# One chunk is 1 MiB of each operand (262144 float32 values), and ops on one chunk or less run
# unqueued. The host threads take chunks in turn: these sizes (of float32; bfloat16 has twice
# the rows) give a chunk and a sliver, exactly two chunks per thread and more with a ragged end.
CHUNK = 262144
THREADS = torch.get_num_threads()
FLOAT32_SIZES = ((257, 1024), (512 * THREADS, 1024), (600 * THREADS, 1001))
# A float32 tensor just over a chunk, which is queued.
QUEUED = CHUNK + 512


def sizes(dtype):
    return [(rows * 4 // dtype.itemsize, cols) for rows, cols in FLOAT32_SIZES]


FUSABLE = list(zip(*op_policy.fusable_ops()))
LONG_RUN = int(os.environ.get("FUZZ_EXAMPLES", "0"))
# Masks (`condition` arguments) are the chain's first tensors as bool, x > 0: as an attention
# mask, an input of the run.
MASKS = 3
# Ops fused around the op under test, from the same dtype's list.
COMPANIONS = {"Float": ["mul.Tensor", "add.Scalar"], "BFloat16": ["relu", "exp"]}


@contextlib.contextmanager
def queue(on=True, **options):
    """Adaptive eager on (or off), counters cleared, the previous state restored after."""
    before = torch.ops.neuron.adaptive_eager()
    adaptive_eager.enable(**options) if on else adaptive_eager.disable()
    metrics.clear_counters()
    try:
        yield
    finally:
        torch.ops.neuron.set_adaptive_eager(*before)


def bits(t):
    """A tensor's values as integers, so that NaNs and signed zeros compare exactly."""
    t = t.detach().cpu()
    return t.view({4: torch.int32, 2: torch.int16}[t.element_size()])


def assert_same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(bits(got), bits(want)), (got, want)


def operands(shape, dtype, count, seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        t = torch.randn(shape, generator=g) * 3
        flat = t.view(-1)
        flat[::97] = float("nan")
        flat[::101] = 0.0
        flat[::103] = float("inf")
        flat[::107] = -0.0
        out.append(t.to(dtype))
    return out


# Scalar arguments by argument name; None where the schema allows it.
SCALARS = {
    "other": (2.5, -0.75),
    "alpha": (1, 0.5),
    "value": (0.3, -2),
    "weight": (0.1, 0.9),
    "exponent": (3, 2, 0.5, 1.7),
    "min": (-1.0, None),
    "max": (1.5,),
}


def call_args(op, pool, draw, broadcasts=0):
    """Arguments for one call of `op` drawn from the tensors in `pool` (indices) and SCALARS;
    with `broadcasts`, a third of the tensor arguments other than one full-shape one (`self`,
    when the op writes it) are drawn from that many tensors that broadcast to the shape, and
    masks likewise from the bool masks of the first MASKS tensors or of the broadcast ones."""
    args = []
    tensors = [a for a in op._schema.arguments if isinstance(a.type, torch.TensorType)]
    full = None
    if broadcasts:
        full = tensors[0] if op._schema.name.endswith("_") else tensors[draw(len(tensors))]
    for arg in op._schema.arguments:
        keyword = arg.name if arg.kwarg_only else None
        if isinstance(arg.type, torch.TensorType) and arg.name == "condition":
            if full is not None and arg is not full and draw(3) == 0:
                args.append((keyword, "broadcast mask", draw(broadcasts)))
            else:
                args.append((keyword, "mask", draw(MASKS)))
        elif isinstance(arg.type, torch.TensorType):
            if full is not None and arg is not full and draw(3) == 0:
                args.append((keyword, "broadcast", draw(broadcasts)))
            else:
                args.append((keyword, "tensor", draw(len(pool))))
        elif arg.name in SCALARS:
            choices = SCALARS[arg.name]
            args.append((keyword, "value", choices[draw(len(choices))]))
        else:
            raise AssertionError(f"no argument recipe for {op}: {arg}")
    return args


def aten_op(name):
    base, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def replay(chain, tensors, device, queued, broadcasts=()):
    """Runs `chain` (name, args) on copies of `tensors` and `broadcasts` on `device`; returns
    every full-shape tensor."""
    pool = [t.to(device, copy=True) for t in tensors]
    sources = {
        "tensor": pool,
        "broadcast": [t.to(device) for t in broadcasts],
        "mask": [(t > 0).to(device) for t in tensors[:MASKS]],
        "broadcast mask": [(t > 0).to(device) for t in broadcasts],
    }
    with queue(queued) if device != "cpu" else contextlib.nullcontext():
        for name, args in chain:
            values = [(key, sources[kind][v] if kind in sources else v) for key, kind, v in args]
            result = aten_op(name)(
                *[v for key, v in values if key is None],
                **{key: v for key, v in values if key is not None},
            )
            if not name.split(".")[0].endswith("_"):
                pool.append(result)
        out = [t.cpu() for t in pool]
    return out


def check_chain(chain, tensors, broadcasts=()):
    want = replay(chain, tensors, "cpu", False, broadcasts)
    unqueued = replay(chain, tensors, "neuron", False, broadcasts)
    metrics.clear_counters()
    queued = replay(chain, tensors, "neuron", True, broadcasts)
    for a, b, c in zip(queued, unqueued, want):
        assert_same_bits(b, c)
        assert_same_bits(a, c)


def draw_chain(draw_index, names, length, broadcasts=0):
    chain, pool_size = [], 3
    for _ in range(length):
        name = names[draw_index(len(names))]
        args = call_args(aten_op(name), range(pool_size), draw_index, broadcasts)
        chain.append((name, args))
        if not name.split(".")[0].endswith("_"):
            pool_size += 1
    return chain


@pytest.mark.parametrize("name,dtype", FUSABLE, ids=[f"{n}-{d}" for n, d in FUSABLE])
def test_each_fusable_op_is_bit_identical_in_a_fused_run(name, dtype):
    torch_dtype = getattr(torch, {"Float": "float32", "BFloat16": "bfloat16"}[dtype])
    for seed, shape in enumerate(sizes(torch_dtype)):
        tensors = operands(shape, torch_dtype, 3, seed)
        counter = iter(range(10**6))
        # The op twice, between ops that are fused with it, with its arguments varied.
        chain = []
        for _ in range(2):
            chain += draw_chain(lambda n: next(counter) % n, COMPANIONS[dtype], 1)
            chain += draw_chain(lambda n: next(counter) % n, [name], 1)
        check_chain(chain, tensors)
        stats = adaptive_eager.stats()
        assert stats["fused_ops"] == len(chain), stats


@pytest.mark.parametrize("name,dtype", FUSABLE, ids=[f"{n}-{d}" for n, d in FUSABLE])
def test_each_fusable_op_gives_the_same_bits_wherever_chunks_end(name, dtype):
    # What fusion relies on: splitting an op's work anywhere (SIMD tails, threads, chunks)
    # leaves every bit of the result as it is, on the host kernels the device runs.
    torch_dtype = getattr(torch, {"Float": "float32", "BFloat16": "bfloat16"}[dtype])
    op = aten_op(name)
    g = torch.Generator().manual_seed(0)
    for n in (1000003, 333333, 70001):
        tensors = [t.view(-1) for t in operands((n,), torch_dtype, 3, n)]
        counter = iter(range(10**6))
        args = call_args(op, range(3), lambda k: next(counter) % k)

        def run(lo, hi):
            pieces = {
                "tensor": lambda v: tensors[v][lo:hi].clone(),
                "mask": lambda v: tensors[v][lo:hi] > 0,
            }
            values = [(key, pieces[kind](v) if kind in pieces else v) for key, kind, v in args]
            result = op(
                *[v for key, v in values if key is None],
                **{key: v for key, v in values if key is not None},
            )
            return result

        whole = run(0, n)
        cuts = sorted(torch.randint(1, n, (40,), generator=g).tolist())
        pieces = [run(lo, hi) for lo, hi in zip([0, *cuts], [*cuts, n]) if hi > lo]
        assert_same_bits(torch.cat(pieces), whole)


@settings(
    max_examples=LONG_RUN or 40,
    deadline=None,
    derandomize=not LONG_RUN,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_random_fused_chains_match_unqueued_and_cpu(data):
    dtype = data.draw(st.sampled_from(sorted({d for _, d in FUSABLE})))
    names = [n for n, d in FUSABLE if d == dtype]
    torch_dtype = {"Float": torch.float32, "BFloat16": torch.bfloat16}[dtype]
    shape = data.draw(st.sampled_from(sizes(torch_dtype)))
    seed = data.draw(st.integers(0, 1000))
    tensors = operands(shape, torch_dtype, 3, seed)
    # A row, a row with a leading 1 (each read whole by every chunk) and a column (cut into
    # chunks with the rows it spans).
    broadcasts = [
        operands(s, torch_dtype, 1, seed + k)[0]
        for k, s in enumerate([shape[1:], (1, *shape[1:]), (shape[0], 1)])
    ]
    chain = draw_chain(
        lambda n: data.draw(st.integers(0, n - 1)),
        names,
        data.draw(st.integers(2, 8)),
        len(broadcasts),
    )
    check_chain(chain, tensors, broadcasts)


def test_operands_that_broadcast_join_a_run():
    # A bias row (read whole by every chunk), a per-row column (cut with the chunks' rows), and
    # an op whose self is the row: one fused kernel, with CPU's bits.
    x, col, row = (
        operands((600, 1001), torch.float32, 1, 5)[0],
        *operands((600, 1), torch.float32, 1, 6),
        *operands((1001,), torch.float32, 1, 7),
    )

    def program(x, col, row):
        y = (x * col + row).tanh()
        return [y, row * y, y.add_(col)]

    want = program(x, col, row)
    with queue():
        got = program(x.to("neuron"), col.to("neuron"), row.to("neuron"))
        for g, w in zip(got, want):
            assert_same_bits(g, w)
        stats = adaptive_eager.stats()
        assert stats["fused_kernels"] == 1 and stats["fused_ops"] == 5, stats


def queued_pair():
    """Two queued ops on a fresh tensor; returns (neuron result, CPU result)."""
    x = torch.arange(QUEUED, dtype=torch.float32).view(-1, 512)
    y = (x.to("neuron") * 2).add_(1)
    assert adaptive_eager.stats()["queued_ops"] == 2
    return y, (x * 2).add_(1)


def each_boundary():
    """(boundary, action on a queued result) for every boundary a user can reach."""
    s = torch.neuron.Stream()
    return {
        "read": [
            lambda y: y.cpu(),
            lambda y: y.tolist(),
            lambda y: y[0, 0].item(),
            lambda y: str(y),
            lambda y: y.numpy(force=True),
        ],
        "synchronize": [lambda y: torch.neuron.synchronize()],
        "stream": [lambda y: torch.neuron.set_stream(s) or torch.neuron.set_stream(s)],
        "event": [lambda y: torch.neuron.Event().record()],
        "memory_stats": [
            lambda y: torch.neuron.memory_allocated(),
            lambda y: torch.neuron.memory_stats(),
            lambda y: torch.neuron.reset_peak_memory_stats(),
        ],
        "host_access": [lambda y: torch.ops.neuron.as_cpu(y)],
        "op": [lambda y: y.sum(), lambda y: y @ y.T, lambda y: y > 3, lambda y: y.clone()],
        "shape": [lambda y: y.view(-1) * 2],
    }


@pytest.mark.parametrize(
    "boundary,index",
    [(b, i) for b, actions in each_boundary().items() for i in range(len(actions))],
)
def test_each_boundary_runs_the_queue(boundary, index):
    default_stream = torch.neuron.current_stream()
    with queue():
        y, want = queued_pair()
        each_boundary()[boundary][index](y)
        stats = adaptive_eager.stats()
        assert stats[f"runs.{boundary}"] == 1, stats
        assert stats["fused_kernels"] == 1
        assert torch.equal(torch.ops.neuron.as_cpu(y), want)
    torch.neuron.set_stream(default_stream)


def test_small_ops_run_where_they_are_issued():
    with queue():
        y = torch.ones(CHUNK, device="neuron") * 2
        assert adaptive_eager.stats()["queued_ops"] == 0
        assert torch.equal(y.cpu(), torch.full((CHUNK,), 2.0))


def test_a_cpu_scalar_is_read_when_the_op_is_issued():
    s = torch.tensor(1.0)
    with queue():
        y = torch.ones(QUEUED, device="neuron") + s
        s.fill_(5.0)
        assert adaptive_eager.stats()["queued_ops"] == 1
        assert torch.equal(y.cpu(), torch.full((QUEUED,), 2.0))


def test_resizing_a_queued_storage_runs_the_queue_first():
    # FSDP2 frees unsharded parameters this way.
    with queue():
        x = torch.ones(QUEUED, device="neuron")
        y = x * 2
        x.untyped_storage().resize_(0)
        assert adaptive_eager.stats()["runs.op"] == 1
        assert y.sum().item() == 2 * QUEUED


def test_a_full_queue_runs():
    with queue(limit=3):
        x = torch.ones(QUEUED, device="neuron")
        for _ in range(7):
            x = x * 2
        assert adaptive_eager.stats()["runs.size"] == 2
        assert torch.equal(x.cpu(), torch.full((QUEUED,), 128.0))


def test_an_op_that_never_fuses_stops_being_queued_and_is_tried_again():
    # x + 1 is always followed by sum(), which cannot join. A run starts after an op: the first
    # (x + 1) and the first one after a sum() are queued and run alone; then 16 run at once, one
    # is queued again, and 32 run at once.
    x = torch.randn(QUEUED, device="neuron")
    want = (x.cpu() + 1).sum()
    with queue():
        totals = [(x + 1).sum() for _ in range(2 + 16 + 1 + 32)]
        stats = adaptive_eager.stats()
        assert stats["queued_ops"] == 3 and stats["run_alone"] == 48, stats
        assert all(torch.equal(t.cpu(), want) for t in totals)


def test_a_start_that_fuses_keeps_fusing():
    x = torch.randn(QUEUED, device="neuron")
    with queue():
        for _ in range(20):
            y = (x + 1) * 2
            y.sum()
        stats = adaptive_eager.stats()
        assert stats["fused_kernels"] == 20 and stats["run_alone"] == 0, stats
        assert torch.equal(y.cpu(), (x.cpu() + 1) * 2)


def test_overlapping_views_written_in_a_run_split_it():
    base = torch.arange(QUEUED + 1, dtype=torch.float32)
    with queue():
        dev = base.to("neuron")
        a, b = dev[:QUEUED], dev[1:]
        a.mul_(2)
        c = b + 1
        assert adaptive_eager.stats()["runs.alias"] == 1
        want = base.clone()
        want[:QUEUED].mul_(2)
        assert torch.equal(c.cpu(), want[1:] + 1)


def test_disjoint_views_of_one_storage_share_a_run():
    with queue():
        qkv = torch.randn(3 * QUEUED)
        q, k, v = qkv.to("neuron").chunk(3)
        out = q * 2 + k * v
        cq, ck, cv = qkv.chunk(3)
        assert_same_bits(out, cq * 2 + ck * cv)
        assert adaptive_eager.stats()["fused_kernels"] == 1


def test_intermediates_keep_their_values_until_their_last_use():
    # Dropped intermediates share chunk buffers once nothing later in the run reads them: `t`
    # must survive three later ops, while `u` and `w` come and go.
    x = torch.randn(3 * CHUNK)

    def program(x):
        t = x * 2
        u = t + 1
        w = u * t
        return (w - t).tanh() * t

    with queue():
        got = program(x.to("neuron"))
        assert_same_bits(got, program(x))
        assert adaptive_eager.stats()["fused_ops"] == 6


def test_transposed_views_join_a_run_as_prologues():
    x = torch.randn(600, 500)
    want = x.t() * 2 + 1
    with queue(prologue=True):
        y = x.to("neuron").t() * 2 + 1
        assert adaptive_eager.stats()["queued_ops"] == 2
        assert y.stride() == want.stride()  # the layout eager gives, read from ATen itself
        assert_same_bits(y, want)
        assert adaptive_eager.stats()["fused_kernels"] == 1
    # Several chunks of a transposed layout, with a dropped intermediate in a chunk buffer.
    x = torch.randn(300, 2000 * THREADS)
    want = x.t() * 2 + 1
    with queue(prologue=True):
        y = x.to("neuron").t() * 2 + 1
        assert y.stride() == want.stride()
        assert_same_bits(y, want)
        assert adaptive_eager.stats()["fused_kernels"] == 1
    with queue(prologue=False):
        # Eager keeps the transposed layout, so neither op has contiguous operands to queue.
        y = x.to("neuron").t() * 2 + 1
        assert adaptive_eager.stats()["queued_ops"] == 0
        assert y.stride() == want.stride()
        assert_same_bits(y, want)


def test_deterministic_algorithms_turn_it_off():
    with queue():
        torch.use_deterministic_algorithms(True)
        try:
            y = torch.ones(QUEUED, device="neuron") * 2 + 1
            assert adaptive_eager.stats()["queued_ops"] == 0
        finally:
            torch.use_deterministic_algorithms(False)
        assert torch.equal(y.cpu(), torch.full((QUEUED,), 3.0))
        torch.set_deterministic_debug_mode("warn")
        try:
            y = torch.ones(QUEUED, device="neuron") * 2 + 1
            assert adaptive_eager.stats()["queued_ops"] == 0
        finally:
            torch.set_deterministic_debug_mode("default")
        y = torch.ones(QUEUED, device="neuron") * 2 + 1
        assert adaptive_eager.stats()["queued_ops"] == 2


def test_the_environment_variables_set_it_up():
    out = run_python(
        "import torch, torch_neuronx\nprint(torch.ops.neuron.adaptive_eager())",
        env={
            "TORCH_NEURONX_ENABLE_CONCATENATION": "1",
            "TORCH_NEURONX_ENABLE_PROLOGUE": "0",
            "TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT": "9",
        },
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(True, False, 9)"
    bad = run_python(
        "import torch, torch_neuronx",
        env={"TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT": "0"},
    )
    assert bad.returncode != 0
    assert "TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT=0" in bad.stderr


# One op run alone; two fused over a chunk and a sliver; two fused over three chunks, which two
# threads share.
@pytest.mark.parametrize("ops, elements", [(1, 3 << 20), (2, (1 << 20) + 64), (2, 3 << 20)])
def test_an_error_in_a_queued_op_names_the_line_that_issued_it(tmp_path, ops, elements):
    # Fusable ops are queued only with arguments they accept, so the failure is provoked with a
    # policy that wrongly calls sub fusable on bool tensors, which sub refuses when it runs.
    # Every op fails; the first one issued is named.
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"fusable": {"why": "test", "Bool": ["sub.Tensor"]}}))
    script = tmp_path / "user_code.py"
    script.write_text(
        "import torch, torch_neuronx\n"
        f"x = torch.ones({elements}, dtype=torch.bool, device='neuron')\n"
        "y = x - x\n" + "y = y - x\n" * (ops - 1) + "print('queued')\n"
        "torch.set_num_threads(2)\n"
        "torch.neuron.synchronize()\n"
    )
    out = run_python(
        f"import runpy; runpy.run_path({str(script)!r})",
        env={"TORCH_NEURONX_OP_POLICY": str(policy), "TORCH_NEURONX_ENABLE_CONCATENATION": "1"},
    )
    assert out.returncode != 0 and "queued" in out.stdout
    assert f"aten::sub.Tensor, issued at {script}:3" in out.stderr, out.stderr[-3000:]
    assert "Subtraction" in out.stderr and "TORCH_NEURONX_ENABLE_CONCATENATION=0" in out.stderr


def test_training_steps_are_bit_identical_to_unqueued_and_cpu():
    sys.path.insert(0, EXAMPLES)
    from tiny_gpt import train

    def adam(params):
        return torch.optim.Adam(params, lr=1e-3, foreach=False)

    # d=320: the MLP's weights, their gradients and Adam's state span more than a chunk.
    want_losses, want_model = train("cpu", 20, adam, d=320, layers=2)
    with queue(False):
        off_losses, off_model = train("neuron", 20, adam, d=320, layers=2)
    with queue(True):
        on_losses, on_model = train("neuron", 20, adam, d=320, layers=2)
        stats = adaptive_eager.stats()
    assert stats["fused_kernels"] > 0 and stats["queued_ops"] > stats["fused_kernels"]
    assert on_losses == off_losses == want_losses
    for (name, p), q, r in zip(
        on_model.named_parameters(), off_model.parameters(), want_model.parameters()
    ):
        assert_same_bits(q, r)
        assert_same_bits(p, r), name
