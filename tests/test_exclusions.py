"""Features TorchNeuron deliberately leaves out fail clearly, naming the feature and the way out."""

import warnings

import pytest
import torch
import torch.autograd.forward_ad as fwAD

import torch_neuronx
from torch_neuronx import _exclusions as exclusions

LIMITS = "docs/limitations.md"


def _raises(fn, match):
    with pytest.raises(NotImplementedError) as info:
        fn()
    assert match in str(info.value) and "TorchNeuron leaves" in str(info.value)
    assert LIMITS in str(info.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(3, 3).to_sparse().to("neuron"),
        lambda: torch.sparse_coo_tensor(
            torch.tensor([[0]]), torch.tensor([1.0]), (2,), device="neuron"
        ),
        lambda: torch.randn(3, 3, device="neuron").to_sparse(),
        lambda: torch.randn(3, 3, device="neuron").to_sparse_csr(),
    ],
)
def test_sparse_layouts(make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _raises(make, "Sparse tensors")


@pytest.mark.parametrize("layout", ["csr", "csc", "bsr"])
def test_compressed_sparse_moved_to_neuron_fails_at_first_use(layout):
    # Moving only wraps the index and value tensors; the first op on the result refuses it.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dense = torch.randn(4, 4)
        sparse = {
            "csr": dense.to_sparse_csr,
            "csc": dense.to_sparse_csc,
            "bsr": lambda: dense.to_sparse_bsr((2, 2)),
        }[layout]().to("neuron")
        _raises(lambda: sparse.to_dense(), "Sparse tensors")


def test_nested_tensors():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nt = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], device="neuron")
        _raises(lambda: nt + 1, "Nested tensors")


def test_quantized_tensors():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _raises(
            lambda: torch.quantize_per_tensor(torch.randn(3), 0.1, 0, torch.qint8).to("neuron"),
            "Quantized tensors",
        )
        _raises(
            lambda: torch.quantize_per_tensor(torch.randn(3, device="neuron"), 0.1, 0, torch.qint8),
            "Quantized tensors",
        )


def _make_dual(x):
    return fwAD.make_dual(x, torch.ones_like(x))


@pytest.mark.parametrize(
    "run",
    [
        _make_dual,
        lambda x: torch.func.jvp(torch.sin, (x,), (torch.ones_like(x),)),
        lambda x: torch.func.jacfwd(torch.sin)(x),
    ],
)
def test_forward_mode_ad(run):
    x = torch.randn(3, device="neuron")

    def attempt():
        with fwAD.dual_level():
            return run(x)

    _raises(
        attempt if run is _make_dual else lambda: run(x), "Forward-mode automatic differentiation"
    )
    assert torch.func.jacrev(torch.sin)(x).shape == (3, 3)


def test_fp8_storage_works_and_compute_is_refused():
    x = torch.randn(8)
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        f8 = x.to(dtype).to("neuron")
        assert f8.dtype == dtype
        assert torch.equal(f8.cpu().float(), x.to(dtype).float())
        assert torch.equal(f8.to(torch.bfloat16).cpu(), x.to(dtype).to(torch.bfloat16))
        assert torch.equal(torch.cat([f8, f8]).cpu().float(), torch.cat([x, x]).to(dtype).float())
        with pytest.raises(RuntimeError, match="FP8 compute on Trainium needs NKI kernels"):
            f8 * f8


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize(
    "move",
    [
        lambda t: t.index_select(0, torch.tensor([3, 0, 3, 7], device=t.device)),
        lambda t: t.clone().fill_(1.5),
        lambda t: t.clone().fill_(torch.tensor(-2.25)),
        lambda t: t.clone().zero_(),
        lambda t: torch.full((3,), -2.25, dtype=t.dtype, device=t.device),
        lambda t: torch.stack([t, t]),
        lambda t: t[::2].contiguous(),
    ],
    ids=["index_select", "fill_scalar", "fill_tensor", "zero", "full", "stack", "contiguous"],
)
def test_fp8_data_movement_matches_cpu(dtype, move):
    x = torch.randn(8).to(dtype)
    out = move(x.to("neuron"))
    assert out.device.type == "neuron" and out.dtype == dtype
    assert torch.equal(out.cpu().view(torch.uint8), move(x).view(torch.uint8))


@pytest.mark.parametrize(
    "convert",
    [
        lambda x: x.to("neuron", memory_format=torch.channels_last),
        lambda x: x.to("neuron").contiguous(memory_format=torch.channels_last),
        lambda x: torch.empty(1, 3, 4, 4, device="neuron", memory_format=torch.channels_last),
        lambda x: torch.empty(1, 2, 3, 4, 4, device="neuron", memory_format=torch.channels_last_3d),
    ],
)
def test_channels_last_is_refused(convert):
    with pytest.raises(
        RuntimeError, match="Neuron tensors only support contiguous or preserve memory format"
    ):
        convert(torch.randn(1, 3, 4, 4))


def test_cpu_tensor_moves_with_its_strides():
    # Only an explicit channels_last request is refused; a move preserves the layout, as CPU
    # and CUDA do, because strides decide the order (and so the bits) of later reductions.
    x = torch.randn(2, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    for n in (x.to("neuron"), x.to("neuron", memory_format=torch.preserve_format)):
        assert n.stride() == x.stride() and torch.equal(n.cpu(), x)
    t = torch.randn(3, 4, 5).transpose(0, -1).contiguous().transpose(0, -1)
    assert t.to("neuron").stride() == t.stride()


def test_fp8_scaled_matmul_takes_the_cpu_fallback_tier():
    torch_neuronx.clear_op_tracking()
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(16, 32, generator=gen).to(torch.float8_e4m3fn)
    b = torch.randn(16, 32, generator=gen).to(torch.float8_e4m3fn).t()
    scale = torch.tensor(0.5)
    expected = torch._scaled_mm(a, b, scale, scale, out_dtype=torch.bfloat16)
    n = [t.to("neuron") for t in (a, b, scale)]
    out = torch._scaled_mm(n[0], n[1], n[2], n[2], out_dtype=torch.bfloat16)
    assert out.device.type == "neuron" and torch.equal(out.cpu(), expected)
    assert torch_neuronx.get_fallback_ops() == ["aten::_scaled_mm"]


def _limitations_rows():
    """The cells of docs/limitations.md's table, backquotes dropped, a list per row."""
    with open(LIMITS) as f:
        lines = [line for line in f if line.startswith("| ") and not line.startswith("| Feature")]
    return [[cell.strip().replace("`", "") for cell in line.split("|")[1:-1]] for line in lines]


def test_every_exclusion_is_documented_with_its_message_and_way_out():
    # One table (csrc/aten/Exclusions.cpp): the docs row of each entry quotes its error and
    # offers its way out.
    rows = _limitations_rows()
    table = exclusions.table()
    assert len(table) >= 10
    undocumented = [
        row.id
        for row in table
        if not any(row.message in message and row.way_out in way for *_, message, way in rows)
    ]
    assert undocumented == []


@pytest.mark.parametrize(
    "make, row_id",
    [
        (lambda: torch.randn(3, 3, device="neuron").to_sparse(), "sparse"),
        (
            lambda: torch.empty(1, 2, 3, 4, device="neuron", memory_format=torch.channels_last),
            "channels_last",
        ),
        (lambda: torch.ones(2, device="neuron").to(torch.float8_e4m3fn) * 2, "fp8_compute"),
        (lambda: torch.tensor([2**40], device="neuron"), "int64_range"),
    ],
)
def test_errors_come_from_the_table(make, row_id):
    # The error carries the row's message and way out, and is recognised as that row.
    row = exclusions.get(row_id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises((RuntimeError, NotImplementedError)) as info:
            make()
    assert row.message in str(info.value) and f"{row.way_out}; see {LIMITS}" in str(info.value)
    assert exclusions.raised_by(info.value) == row
