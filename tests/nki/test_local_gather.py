"""nisa.local_gather against a numpy transcription of the NKI reference semantics: each GpSimd
core (16 partitions) reads its index slice partition-first and gathers runs of
``num_elem_per_idx`` elements from each of its partitions."""

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl

CORE = 16


def tile(values, dtype=nl.float32):
    values = torch.as_tensor(values)
    t = nl.ndarray(tuple(values.shape), dtype=dtype, buffer=nl.sbuf)
    t.host.copy_(values)
    t._alloc.written = True
    return t


def gather_reference(src, index, num_elem, num_valid=None):
    """``[P, num_valid * num_elem]``; each core flattens its indices partition-first."""
    parts = src.shape[0]
    flat = src.reshape(parts, -1)
    valid = num_valid or CORE * index.shape[1]
    out = np.empty((parts, valid * num_elem), dtype=src.dtype)
    for start in range(0, parts, CORE):
        starts = index[start : start + CORE].flatten(order="F")[:valid].astype(np.int64)
        for j, s in enumerate(starts):
            out[start : start + CORE, j * num_elem : (j + 1) * num_elem] = flat[
                start : start + CORE, s : s + num_elem
            ]
    return out


def test_sdk_example_same_indices_on_every_core():
    """The NKI docs' example: (128, 512, 4) source, 16x4 indices replicated over 8 cores."""
    gen = np.random.default_rng(0)
    src = (gen.random((128, 512, 4)) * 100).astype(np.float32)
    index = np.tile(gen.integers(0, 512, size=(16, 4)), (8, 1)) * 4
    dst = nl.ndarray((128, 4, 16, 4), nl.float32)
    nisa.local_gather(
        dst=dst,
        src_buffer=tile(src),
        index=tile(index.astype(np.int32), nl.uint16),
        num_elem_per_idx=4,
        num_valid_indices=64,
    )
    expected = gather_reference(src, index, 4, 64).reshape(128, 4, 16, 4)
    assert np.array_equal(dst.host.numpy(), expected)


@pytest.mark.parametrize("num_elem,num_valid", [(1, None), (2, 40), (8, 7)])
def test_each_core_uses_its_own_indices_and_keeps_bits(num_elem, num_valid):
    gen = np.random.default_rng(num_elem)
    width = 96
    src = torch.randn(64, width).to(torch.bfloat16)
    index = gen.integers(0, width - num_elem + 1, size=(64, 5))
    valid = num_valid or CORE * 5
    dst = nl.ndarray((64, valid * num_elem), nl.bfloat16)
    nisa.local_gather(
        dst=dst,
        src_buffer=tile(src, nl.bfloat16),
        index=tile(index.astype(np.int32), nl.uint16),
        num_elem_per_idx=num_elem,
        num_valid_indices=num_valid,
    )
    bits = src.view(torch.int16).numpy()
    expected = gather_reference(bits, index, num_elem, num_valid)
    assert np.array_equal(dst.host.view(torch.int16).numpy(), expected)


def test_expert_affinity_gather_into_an_access_pattern_view():
    """nki-library's MoE pattern: transposed top-k indices on core 0, the rest zero, gathered
    into a ``.ap()`` view of a 3-D tile inside a kernel."""

    @nki.jit
    def kernel(affinities, indices):
        aff = nl.ndarray(affinities.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=aff, src=affinities)
        idx = nl.ndarray((128, CORE), nl.uint16, buffer=nl.sbuf)
        nisa.memset(dst=idx, value=0)
        nisa.dma_copy(dst=idx[0:CORE, 0:CORE], src=indices)
        got = nl.ndarray((128, CORE, CORE), nl.float32, buffer=nl.sbuf)
        nisa.local_gather(
            dst=got.ap([[CORE * CORE, 128], [1, CORE * CORE]]),
            src_buffer=aff,
            index=idx,
            num_elem_per_idx=1,
            num_valid_indices=CORE * CORE,
        )
        out = nl.ndarray((128, CORE, CORE), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=got)
        return out

    gen = np.random.default_rng(3)
    affinities = gen.random((128, 64)).astype(np.float32)
    top = gen.integers(0, 64, size=(CORE, 4))  # [token, k]
    indices = np.zeros((CORE, CORE), dtype=np.uint16)
    indices[:4, :] = top.T
    out = nki.simulate(kernel)(affinities, indices)
    full = np.zeros((128, CORE), dtype=np.int64)
    full[:CORE] = indices
    expected = gather_reference(affinities, full, 1).reshape(128, CORE, CORE)
    assert np.array_equal(out, expected)
    # Token t's k-th affinity sits at [t, t, k].
    tokens = np.arange(CORE)
    assert np.array_equal(out[tokens, tokens, :4], affinities[tokens[:, None], top])


def invalid_call(name):
    """Run the named invalid call; returns the raised validation message."""
    src = tile(torch.randn(32, 20))
    index = tile(torch.zeros(32, 2, dtype=torch.int32), nl.uint16)
    calls = {
        "partitions": lambda: nisa.local_gather(
            nl.ndarray((24, 32), nl.float32), tile(torch.randn(24, 20)), index[:24]
        ),
        "index dtype": lambda: nisa.local_gather(
            nl.ndarray((32, 32), nl.float32), src, tile(torch.zeros(32, 2), nl.float32)
        ),
        "cast": lambda: nisa.local_gather(nl.ndarray((32, 32), nl.bfloat16), src, index),
        "num_elem": lambda: nisa.local_gather(nl.ndarray((32, 96), nl.float32), src, index, 3),
        "num_valid": lambda: nisa.local_gather(
            nl.ndarray((32, 33), nl.float32), src, index, num_valid_indices=33
        ),
        "dst size": lambda: nisa.local_gather(nl.ndarray((32, 16), nl.float32), src, index),
        "out of bounds": lambda: nisa.local_gather(
            nl.ndarray((32, 64), nl.float32),
            src,
            tile(torch.full((32, 2), 19, dtype=torch.int32), nl.uint16),
            num_elem_per_idx=2,
        ),
        "psum": lambda: nisa.local_gather(
            nl.ndarray((32, 32), nl.float32, buffer=nl.psum), src, index
        ),
    }
    with pytest.raises(nki.NkiValidationError) as info:
        calls[name]()
    return str(info.value)


@pytest.mark.parametrize(
    "name,message",
    [
        ("partitions", "multiple of 16"),
        ("index dtype", "must be uint16"),
        ("cast", "does not cast"),
        ("num_elem", "must be one of (1, 2, 4, 8, 16, 32)"),
        ("num_valid", "num_valid_indices 33 must be in [1, 32]"),
        ("dst size", "it must hold num_valid_indices * num_elem_per_idx = 32"),
        ("out of bounds", "exceeds the 20 elements per partition"),
        ("psum", "dst"),
    ],
)
def test_local_gather_validation(name, message):
    assert message in invalid_call(name)
