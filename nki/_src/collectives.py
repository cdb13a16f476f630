"""nki.collectives: communication between collective ranks (logical NeuronCores).

A launch runs on ``num_ranks`` ranks (``nki.simulate(kernel, num_ranks=n)``; one rank
otherwise), each with the launch's programs (the cores of an LNC=2 logical core).  A
collective call is a rendezvous: the k-th collective call on a replica group waits until every
core of every rank in the caller's rank list has made its k-th call on that group, then runs
once for each core number, moving data between the same core of the member ranks.
"""

import operator
from dataclasses import dataclass

import torch

from . import alu, buffers, checks, dtypes, runtime
from .errors import fail, require
from .isa.registers import VirtualRegister
from .objects import NKIObject
from .tiles import read, write
from .trace import issue

REDUCE_OPS = ("add", "minimum", "maximum")
MAX_CHANNELS = 4


@dataclass
class ReplicaGroup(NKIObject):
    """Groups of ranks that take part in a collective; the rank lists must not overlap."""

    groups: tuple = ()

    def __post_init__(self):
        groups = tuple(tuple(operator.index(r) for r in g) for g in self.groups)
        flat = [r for g in groups for r in g]
        require(groups and all(groups), "ReplicaGroup", "needs at least one non-empty rank list")
        require(len(flat) == len(set(flat)), "ReplicaGroup", f"rank lists {groups} overlap")
        self.groups = groups


def _members(where, ctx, replica_group):
    """The rank list of ``replica_group`` that holds the calling rank."""
    require(
        isinstance(replica_group, ReplicaGroup),
        where,
        f"replica_group must be an nki.collectives.ReplicaGroup, got {replica_group!r}",
    )
    for group in replica_group.groups:
        for r in group:
            require(
                r < ctx.num_ranks,
                where,
                f"replica group names rank {r} but the launch has {ctx.num_ranks} rank(s); "
                f"simulate with nki.simulate(kernel, num_ranks={_world_size(replica_group)})",
            )
        if ctx.rank in group:
            return group
    fail(where, f"rank {ctx.rank} is in none of the rank lists {replica_group.groups}")


def _world_size(replica_group):
    """Ranks a launch needs for ``replica_group``."""
    return max(max(g) for g in replica_group.groups) + 1


def _tensors(where, label, tensors, hbm_only=False, single=False):
    require(
        isinstance(tensors, (list, tuple)) and tensors,
        where,
        f"{label} must be a non-empty list of tensors",
    )
    for t in tensors:
        checks.tensor(where, label, t)
        if hbm_only:
            require(not t.buffer.on_chip, where, f"{label} must be in HBM, got {t.buffer.name}")
        else:
            checks.buffer(where, label, t, buffers.sbuf, buffers.private_hbm, buffers.shared_hbm)
    if single:
        require(len(tensors) == 1, where, f"{label} must hold exactly one tensor (no coalescing)")
    return list(tensors)


def _same_space(where, *lists, coalesced=True):
    """All tensors in HBM, or all in SBUF; several tensors per list (coalescing) only in HBM.
    Channel lists (``coalesced=False``) hold one tensor per channel, not a coalesced group."""
    flat = [t for lst in lists for t in lst]
    on_chip = {t.buffer.on_chip for t in flat}
    require(len(on_chip) == 1, where, "tensors must all be in HBM or all in SBUF, not mixed")
    if coalesced and True in on_chip:
        require(
            all(len(lst) == 1 for lst in lists),
            where,
            "coalesced collectives (several tensors) are only supported in HBM",
        )
    return True in on_chip


def _reduce_op(where, op):
    fn = alu.resolve(op, where, "binary")
    require(
        fn.name in REDUCE_OPS, where, f"op must be nl.add, nl.minimum or nl.maximum, got {fn!r}"
    )
    return fn


def _rendezvous(where, ctx, ranks, call):
    """Wait until every core of every rank in ``ranks`` made the matching collective call; the
    last one to arrive runs ``execute(calls)`` where ``calls[(rank, core)]`` is each call."""
    world = ctx.world
    group = tuple(ranks)
    cores = _programs(ctx)
    core = _core(ctx)
    counters = world.board.setdefault(("collective-seq", ctx.rank, core), {})
    seq = counters.get(group, 0)
    counters[group] = seq + 1
    slot = world.board.setdefault(("collective", group, seq), {"calls": {}, "done": False})
    kind = call[0]
    for (r, c), other in slot["calls"].items():
        require(
            other[0] == kind,
            where,
            f"rank {ctx.rank} core {core} calls {kind} where rank {r} core {c} called {other[0]} "
            f"(collective #{seq} of rank list {group})",
        )
    slot["calls"][(ctx.rank, core)] = call
    expected = len(group) * cores
    if len(slot["calls"]) == expected:
        for c in range(cores):
            call[1]({r: slot["calls"][(r, c)] for r in group})
        slot["done"] = True
    else:
        world.wait(
            ctx.instance,
            lambda: slot["done"],
            f"{kind} #{seq} on rank list {group}",
            where,
        )


def _programs(ctx):
    n = 1
    for g in ctx.grid:
        n *= g
    return n


def _core(ctx):
    """Flat number of this program within its rank."""
    index = 0
    for g, i in zip(ctx.grid, ctx.program_index):
        index = index * g + i
    return index


def _context(where):
    ctx = runtime.current()
    require(ctx.world is not None, where, "collectives run inside a launched kernel")
    return ctx


def _issue(where, dsts, srcs):
    nbytes = sum(t.size * t.itemsize for t in dsts)
    issue(where, "dma", list(dsts), list(srcs), nbytes=nbytes, chunk=max(1, nbytes))


def _values(t):
    """Raw (bit-exact) copy of a tensor's elements."""
    return t.host.clone()


def _check_like(where, label, a, b):
    require(
        a.dtype == b.dtype,
        where,
        f"{label}: dtype {dtypes.name(a.dtype)} differs from {dtypes.name(b.dtype)}",
    )


def all_reduce(srcs, dsts, replica_group, op, priority=None, name=None):
    """Every rank's ``dsts[i]`` = ``op``-reduction of all member ranks' ``srcs[i]``."""
    where = "all_reduce"
    ctx = _context(where)
    srcs, dsts = _tensors(where, "srcs", srcs), _tensors(where, "dsts", dsts)
    require(len(srcs) == len(dsts), where, f"{len(srcs)} srcs but {len(dsts)} dsts")
    _same_space(where, srcs, dsts)
    fn = _reduce_op(where, op)
    for s, d in zip(srcs, dsts):
        _check_like(where, "dst", d, s)
        require(s.size == d.size, where, f"src has {s.size} elements, dst has {d.size}")
    members = _members(where, ctx, replica_group)

    def execute(calls):
        for i in range(len(srcs)):
            total = None
            for r in members:
                v = read(calls[r][2][i])
                total = v if total is None else fn.binary(total, v)
            for r in members:
                write(calls[r][3][i], total)

    _rendezvous(where, ctx, members, ("all_reduce", execute, srcs, dsts))
    _issue(where, dsts, srcs)


def all_gather(srcs, dsts, replica_group, collective_dim, priority=None, name=None):
    """Every rank's ``dsts[i]`` = the member ranks' ``srcs[i]`` concatenated along
    ``collective_dim`` in rank-list order."""
    where = "all_gather"
    ctx = _context(where)
    srcs, dsts = _tensors(where, "srcs", srcs), _tensors(where, "dsts", dsts)
    require(len(srcs) == len(dsts), where, f"{len(srcs)} srcs but {len(dsts)} dsts")
    on_chip = _same_space(where, srcs, dsts)
    dim = operator.index(collective_dim)
    allowed = (0, 1) if on_chip else (0,)
    require(dim in allowed, where, f"collective_dim must be one of {allowed}, got {dim}")
    members = _members(where, ctx, replica_group)
    for s, d in zip(srcs, dsts):
        _check_like(where, "dst", d, s)
        if on_chip:
            require(s.ndim == 2 and d.ndim == 2, where, "SBUF collectives take 2-D tiles")
        expected = list(s.shape)
        expected[dim] *= len(members)
        require(
            list(d.shape) == expected,
            where,
            f"dst shape {d.shape} must be {tuple(expected)} ({len(members)} ranks along dim {dim})",
        )

    def execute(calls):
        for i in range(len(srcs)):
            gathered = torch.cat([_values(calls[r][2][i]) for r in members], dim=dim)
            for r in members:
                calls[r][3][i].host.copy_(gathered)

    _rendezvous(where, ctx, members, ("all_gather", execute, srcs, dsts))
    _issue(where, dsts, srcs)


def reduce_scatter(srcs, dsts, replica_group, collective_dim, op, priority=None, name=None):
    """Rank ``members[j]``'s ``dsts[i]`` = chunk ``j`` (along dim 0) of the reduction of all
    member ranks' ``srcs[i]``."""
    where = "reduce_scatter"
    ctx = _context(where)
    srcs, dsts = _tensors(where, "srcs", srcs), _tensors(where, "dsts", dsts)
    require(len(srcs) == len(dsts), where, f"{len(srcs)} srcs but {len(dsts)} dsts")
    _same_space(where, srcs, dsts)
    require(operator.index(collective_dim) == 0, where, "collective_dim must be 0")
    fn = _reduce_op(where, op)
    members = _members(where, ctx, replica_group)
    for s, d in zip(srcs, dsts):
        _check_like(where, "dst", d, s)
        require(
            s.shape[0] == d.shape[0] * len(members) and s.shape[1:] == d.shape[1:],
            where,
            f"src shape {s.shape} must be dst shape {d.shape} with dim 0 times {len(members)}",
        )

    def execute(calls):
        for i in range(len(srcs)):
            total = None
            for r in members:
                v = read(calls[r][2][i])
                total = v if total is None else fn.binary(total, v)
            for j, chunk in enumerate(total.chunk(len(members), dim=0)):
                write(calls[members[j]][3][i], chunk)

    _rendezvous(where, ctx, members, ("reduce_scatter", execute, srcs, dsts))
    _issue(where, dsts, srcs)


def all_to_all(srcs, dsts, replica_group, collective_dim, priority=None, name=None):
    """Chunk ``j`` (along dim 0) of rank ``members[i]``'s ``srcs`` becomes chunk ``i`` of rank
    ``members[j]``'s ``dsts``."""
    where = "all_to_all"
    ctx = _context(where)
    srcs = _tensors(where, "srcs", srcs, hbm_only=True)
    dsts = _tensors(where, "dsts", dsts, hbm_only=True)
    require(len(srcs) == len(dsts), where, f"{len(srcs)} srcs but {len(dsts)} dsts")
    require(operator.index(collective_dim) == 0, where, "collective_dim must be 0")
    members = _members(where, ctx, replica_group)
    n = len(members)
    for s, d in zip(srcs, dsts):
        _check_like(where, "dst", d, s)
        require(s.shape == d.shape, where, f"src shape {s.shape} must equal dst shape {d.shape}")
        require(s.shape[0] % n == 0, where, f"dim 0 ({s.shape[0]}) must split into {n} chunks")

    def execute(calls):
        for k in range(len(srcs)):
            chunks = {r: _values(calls[r][2][k]).chunk(n, dim=0) for r in members}
            for j, dst_rank in enumerate(members):
                pieces = [chunks[src_rank][j] for src_rank in members]
                calls[dst_rank][3][k].host.copy_(torch.cat(pieces, dim=0))

    _rendezvous(where, ctx, members, ("all_to_all", execute, srcs, dsts))
    _issue(where, dsts, srcs)


def _metadata(where, metadata_tensor, n, rows):
    checks.tensor(where, "metadata_tensor", metadata_tensor)
    require(
        metadata_tensor.dtype == dtypes.uint32,
        where,
        f"metadata_tensor must be uint32, got {dtypes.name(metadata_tensor.dtype)}",
    )
    require(
        metadata_tensor.size == rows * n,
        where,
        f"metadata_tensor must hold {rows} rows of {n} entries, has {metadata_tensor.size}",
    )
    return metadata_tensor


def _variable(
    where, kind, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls
):
    ctx = _context(where)
    srcs = _tensors(where, "srcs", srcs, hbm_only=True, single=True)
    dsts = _tensors(where, "dsts", dsts, hbm_only=True, single=True)
    require(not has_rdispls, where, "has_rdispls=True is not supported")
    members = _members(where, ctx, replica_group)
    n = len(members)
    meta = _metadata(where, metadata_tensor, n, 3)

    def execute(calls):
        table = {r: calls[r][4].host.reshape(3, n).to(torch.int64) for r in members}
        flat_src = {r: calls[r][2][0].host.reshape(-1) for r in members}
        for j, dst_rank in enumerate(members):
            dst = calls[dst_rank][3][0]
            flat = dst.host.reshape(-1)
            slot = dst.size // n
            received = []
            for i, src_rank in enumerate(members):
                column = 0 if kind == "all_gather_v" else j
                count = int(table[src_rank][0, column])
                displ = int(table[src_rank][1, column])
                require(
                    count <= slot and displ + count <= flat_src[src_rank].numel(),
                    where,
                    f"rank {src_rank} sends {count} elements at {displ}: outside src or the "
                    f"{slot}-element slot of each rank",
                )
                flat[i * slot : i * slot + count] = flat_src[src_rank][displ : displ + count]
                received.append(count)
            if not recv_counts_known:
                calls[dst_rank][4].host.reshape(3, n)[2].copy_(torch.tensor(received))

    _rendezvous(where, ctx, members, (kind, execute, srcs, dsts, meta))
    _issue(where, dsts, srcs)


def all_gather_v(
    srcs,
    dsts,
    replica_group,
    metadata_tensor,
    recv_counts_known=False,
    has_rdispls=False,
    priority=None,
    name=None,
):
    """Variable-length all-gather: rank ``s`` broadcasts ``src[send_displ : +send_count]``
    (metadata rows 0/1, first column) into slot ``s`` of every member's ``dst``."""
    _variable(
        "all_gather_v",
        "all_gather_v",
        srcs,
        dsts,
        replica_group,
        metadata_tensor,
        recv_counts_known,
        has_rdispls,
    )


def all_to_all_v(
    srcs,
    dsts,
    replica_group,
    metadata_tensor,
    recv_counts_known=False,
    has_rdispls=False,
    priority=None,
    name=None,
):
    """Variable-length all-to-all: rank ``s`` sends ``src[send_displs[r] : +send_counts[r]]``
    into slot ``s`` of rank ``r``'s ``dst`` (metadata rows 0/1, one column per rank)."""
    _variable(
        "all_to_all_v",
        "all_to_all_v",
        srcs,
        dsts,
        replica_group,
        metadata_tensor,
        recv_counts_known,
        has_rdispls,
    )


def collective_permute(srcs, dsts, source_target_pairs, priority=None, name=None):
    """For each ``(source, target)`` pair, rank ``target``'s dst receives rank ``source``'s src."""
    where = "collective_permute"
    ctx = _context(where)
    srcs = _tensors(where, "srcs", srcs, hbm_only=True, single=True)
    dsts = _tensors(where, "dsts", dsts, hbm_only=True, single=True)
    pairs = [tuple(operator.index(v) for v in p) for p in source_target_pairs]
    ranks = sorted({r for p in pairs for r in p})
    require(ctx.rank in ranks, where, f"rank {ctx.rank} is in no (source, target) pair {pairs}")
    for r in ranks:
        require(r < ctx.num_ranks, where, f"pair names rank {r}; the launch has {ctx.num_ranks}")
    _check_like(where, "dst", dsts[0], srcs[0])

    def execute(calls):
        sent = {s: _values(calls[s][2][0]) for s, _ in pairs}
        for s, t in pairs:
            calls[t][3][0].host.copy_(sent[s].reshape(calls[t][3][0].shape))

    _rendezvous(where, ctx, ranks, ("collective_permute", execute, srcs, dsts))
    _issue(where, dsts, srcs)


def _channels(where, by_channel, channel_ids, label):
    require(
        isinstance(by_channel, (list, tuple)) and by_channel,
        where,
        f"{label} must be a list with one tensor list per channel",
    )
    ids = [operator.index(c) for c in channel_ids]
    require(
        ids == list(range(len(ids))) and len(ids) == len(by_channel) and len(ids) <= MAX_CHANNELS,
        where,
        f"channel_ids {ids} must be 0, 1, ... (at most {MAX_CHANNELS}), one per channel of {label}",
    )
    return [_tensors(where, label, lst, single=True)[0] for lst in by_channel]


def _ring(where, ctx, replica_group, kind, srcs, dsts, combine):
    members = _members(where, ctx, replica_group)
    n = len(members)

    def execute(calls):
        for c in range(len(dsts)):
            sent = {r: combine(calls[r], c) for r in members}
            for i, r in enumerate(members):
                write(calls[r][3][c], sent[members[(i - 1) % n]])

    _rendezvous(where, ctx, members, (kind, execute, srcs, dsts))
    _issue(where, dsts, [t for lst in srcs for t in (lst if isinstance(lst, list) else [lst])])


def collective_permute_implicit(
    srcs_by_channel, dsts_by_channel, replica_group, channel_ids=(0,), priority=None, name=None
):
    """Ring shift: each member sends its channel-``c`` src to its successor in the rank list and
    receives its predecessor's into its channel-``c`` dst."""
    where = "collective_permute_implicit"
    ctx = _context(where)
    srcs = _channels(where, srcs_by_channel, channel_ids, "srcs_by_channel")
    dsts = _channels(where, dsts_by_channel, channel_ids, "dsts_by_channel")
    require(len(srcs) == len(dsts), where, "srcs_by_channel and dsts_by_channel differ in length")
    _same_space(where, srcs, dsts, coalesced=False)
    for s, d in zip(srcs, dsts):
        _check_like(where, "dst", d, s)
        require(s.size == d.size, where, f"src has {s.size} elements, dst has {d.size}")

    def combine(call, c):
        return _values(call[2][c])

    _ring(where, ctx, replica_group, "collective_permute_implicit", srcs, dsts, combine)


def collective_permute_implicit_reduce(
    srcs0_by_channel,
    srcs1_by_channel,
    dsts_by_channel,
    replica_group,
    op,
    channel_ids=(0,),
    priority=None,
    name=None,
):
    """Ring shift of ``op(srcs0[c], srcs1[c])``: each member receives its predecessor's."""
    where = "collective_permute_implicit_reduce"
    ctx = _context(where)
    srcs0 = _channels(where, srcs0_by_channel, channel_ids, "srcs0_by_channel")
    srcs1 = _channels(where, srcs1_by_channel, channel_ids, "srcs1_by_channel")
    dsts = _channels(where, dsts_by_channel, channel_ids, "dsts_by_channel")
    _same_space(where, srcs0, srcs1, dsts, coalesced=False)
    fn = _reduce_op(where, op)
    pairs = [[a, b] for a, b in zip(srcs0, srcs1)]

    def combine(call, c):
        a, b = call[2][c]
        return fn.binary(read(a), read(b))

    _ring(where, ctx, replica_group, "collective_permute_implicit_reduce", pairs, dsts, combine)


def collective_permute_implicit_current_processing_rank_id(
    iteration_id, replica_group, channel_id=0, name=None
):
    """Register holding the rank whose data a ring step ``iteration_id`` works on: the caller's
    own rank at step 0, then its predecessors in the rank list."""
    where = "collective_permute_implicit_current_processing_rank_id"
    ctx = _context(where)
    members = _members(where, ctx, replica_group)
    require(0 <= operator.index(channel_id) < MAX_CHANNELS, where, f"bad channel_id {channel_id}")
    i = members.index(ctx.rank)
    return VirtualRegister(members[(i - operator.index(iteration_id)) % len(members)])


def rank_id(name=None):
    """Register holding the calling rank's id."""
    return VirtualRegister(_context("rank_id").rank)
