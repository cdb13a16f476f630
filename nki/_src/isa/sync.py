"""Cross-core instructions of a Logical NeuronCore (LNC=2): core_barrier and sendrecv.

The two physical cores of a logical core are the two programs of a ``kernel[2]`` launch
(``nl.program_id(0)`` is the core).  Both instructions wait for the peer core through the
launch's World (see ``spmd``), so a peer that never arrives is reported as a deadlock.
"""

import operator
from collections.abc import Sequence

from .. import buffers, checks, runtime
from ..enums import dma_engine as DmaEngine
from ..enums import engine as E
from ..errors import require
from ..tensor import NkiTensor
from ..tiles import write
from ..trace import contiguous_run, issue

LNC_CORES = 2
GPSIMD_DMA_PARTITION_BYTES = {1: 256, 2: 512, 4: 1024}


def _core(where):
    """(context, this core's number) of an instruction that needs LNC=2 on NeuronCore-v3+."""
    ctx = runtime.current()
    require(
        ctx.target.generation >= 3,
        where,
        f"requires NeuronCore-v3 or newer; target {ctx.target.name} is "
        f"NeuronCore-v{ctx.target.generation}",
    )
    require(
        ctx.world is not None and len(ctx.grid) == 1 and ctx.grid[0] == LNC_CORES,
        where,
        f"needs a Logical NeuronCore of {LNC_CORES} cores: launch the kernel as kernel[2] "
        f"(launch grid is {ctx.grid or '()'})",
    )
    return ctx, ctx.program_index[0]


def core_barrier(
    data: NkiTensor, cores: Sequence[int], engine: E = E.gpsimd, name: str | None = None
) -> None:
    """Wait until every core in ``cores`` (only ``(0, 1)``) reaches its matching barrier."""
    where = "core_barrier"
    ctx, core = _core(where)
    # The docs ask for the shared-HBM tensor being synchronized on; AWS's own kernels also
    # anchor barriers on SBUF tiles, so any tensor is accepted as the dependency.
    checks.tensor(where, "data", data)
    require(
        tuple(cores) == (0, 1),
        where,
        f"cores must be (0, 1) (the two cores of the logical NeuronCore), got {cores!r}",
    )
    checks.engine(where, engine, E.gpsimd, E.vector, E.scalar, E.tensor, E.sync)
    counts = ctx.world.board.setdefault(("barrier", ctx.rank), {})
    mine = counts.get(core, 0) + 1
    counts[core] = mine
    ctx.world.wait(
        ctx.instance,
        lambda: all(counts.get(c, 0) >= mine for c in cores),
        f"core_barrier #{mine} of cores {tuple(cores)}",
        where,
    )
    issue(where, engine.name if engine is not E.unknown else "gpsimd", [], [data], free=1)


def sendrecv(
    src: NkiTensor,
    dst: NkiTensor,
    send_to_rank: int,
    recv_from_rank: int,
    pipe_id: int,
    dma_engine: DmaEngine = DmaEngine.dma,
    name: str | None = None,
) -> None:
    """Send ``src`` to core ``send_to_rank``'s ``dst`` while receiving core ``recv_from_rank``'s
    ``src`` into this core's ``dst``; operations sharing a ``pipe_id`` complete together."""
    where = "sendrecv"
    ctx, core = _core(where)
    for label, t in (("src", src), ("dst", dst)):
        checks.on_chip(where, label, t, buffers.sbuf)
    checks.same_dtype(where, "src", src, "dst", dst)
    require(
        src.shape == dst.shape,
        where,
        f"src shape {src.shape} must equal dst shape {dst.shape}",
    )
    send_to, recv_from = operator.index(send_to_rank), operator.index(recv_from_rank)
    for label, r in (("send_to_rank", send_to), ("recv_from_rank", recv_from)):
        require(0 <= r < LNC_CORES, where, f"{label} must be 0 or 1, got {r}")
    require(
        isinstance(dma_engine, DmaEngine),
        where,
        f"dma_engine must be an nki.isa.dma_engine member, got {dma_engine!r}",
    )
    if dma_engine is DmaEngine.gpsimd_dma:
        limit = GPSIMD_DMA_PARTITION_BYTES[src.itemsize]
        per_partition = src.free_size * src.itemsize
        require(
            per_partition <= limit,
            where,
            f"gpsimd_dma moves at most {limit} bytes per partition of {8 * src.itemsize}-bit "
            f"data, src has {per_partition}",
        )
    board = ctx.world.board.setdefault(("sendrecv", ctx.rank), {"sent": {}, "got": {}, "box": {}})
    out_key = (core, send_to, pipe_id)
    seq_out = board["sent"].get(out_key, 0)
    board["sent"][out_key] = seq_out + 1
    board["box"][out_key + (seq_out,)] = src.host.clone()
    in_key = (recv_from, core, pipe_id)
    seq_in = board["got"].get(in_key, 0)
    board["got"][in_key] = seq_in + 1
    message = in_key + (seq_in,)
    ctx.world.wait(
        ctx.instance,
        lambda: message in board["box"],
        f"sendrecv pipe {pipe_id} data from core {recv_from}",
        where,
    )
    write(dst, board["box"].pop(message))
    sent = out_key + (seq_out,)
    ctx.world.wait(
        ctx.instance,
        lambda: sent not in board["box"],
        f"core {send_to} to receive its sendrecv on pipe {pipe_id}",
        where,
    )
    issue(
        where,
        "dma",
        [dst],
        [src],
        nbytes=src.size * src.itemsize,
        chunk=contiguous_run(src),
    )
