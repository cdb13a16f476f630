"""NKI dtypes (names, nki.dtype), nki.isa.constants, NKIObject initializers, ``.ap(dtype=)``
reinterpretation and tiles placed with ``nl.ndarray(address=...)``, against torch references."""

import dataclasses

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl


def test_dtypes_are_named_strings():
    assert str(nl.float32) == "float32" and str(nl.bool_) == "bool"
    assert nl.bfloat16 == torch.bfloat16 and nl.float32 == np.float32
    assert nl.float8_e4m3 != nl.float8_e4m3fn  # legacy e4m3 is its own type
    assert {nl.int8: 1}["int8"] == 1 and nl.float32 != None  # noqa: E711
    assert nki.dtype.bfloat16 is nl.bfloat16 and isinstance(nl.uint16, nki.dtype.DType)


def test_isa_constants_re_export_the_enums():
    from nki.isa.constants import dge_mode, oob_mode

    assert oob_mode is nisa.oob_mode and dge_mode.hwdge is nisa.dge_mode.hwdge
    assert nisa.constants.matmul_perf_mode is nisa.matmul_perf_mode


def test_nki_object_keyword_initializer():
    class Config(nl.NKIObject):
        tile = 128
        fuse = False

    cfg = Config(fuse=True, extra=3)
    assert (cfg.tile, cfg.fuse, cfg.extra) == (128, True, 3)

    @dataclasses.dataclass
    class Shape(nl.NKIObject):
        rows: int = 1

    assert Shape(rows=4).rows == 4
    assert isinstance(nl.ndarray((2, 2), nl.float32), nl.NKIObject)


def test_ap_dtype_reinterprets_bytes_in_new_units():
    values = torch.arange(16, dtype=torch.float32).reshape(2, 8)
    t = nl.ndarray((2, 8), nl.float32)
    t.host.copy_(values)
    halves = t.ap([[16, 2], [2, 4]], offset=1, dtype=nl.bfloat16)
    assert halves.dtype == nl.bfloat16
    assert torch.equal(halves.host, values.view(torch.bfloat16)[:, 1::2][:, :4])
    ints = t[:, 2:].ap([[8, 2], [1, 3]], dtype=nl.int32)
    assert torch.equal(ints.host, values[:, 2:5].view(torch.int32))


def test_ap_offset_composes_with_the_views_offset():
    t = nl.ndarray((4, 8), nl.float32)
    t.host.copy_(torch.arange(32.0).reshape(4, 8))
    view = t[:, 2:]
    assert torch.equal(view.ap([[8, 4], [1, 2]], offset=1).host, t.host[:, 3:5])


def test_nki_tensor_constructor_binds_storage():
    data = np.arange(12, dtype=np.float32)
    t = nl.NkiTensor((3, 4), nl.float32, data, buffer=nl.shared_hbm)
    assert t.shape == (3, 4) and torch.equal(t.host, torch.arange(12.0).reshape(3, 4))
    assert nl.NkiTensor((2, 2), nl.int32).buffer is nl.sbuf


def test_placed_tiles_share_memory():
    a = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf, address=(0, 1024))
    b = nl.ndarray((2, 4), nl.float32, buffer=nl.sbuf, address=(2, 1040))
    nisa.memset(dst=a, value=1.0)
    nisa.memset(dst=b, value=7.0)
    expected = torch.ones(4, 8)
    expected[2:4, 4:8] = 7.0
    assert torch.equal(a.host, expected)
    assert a.strides == (8, 1) and a.offset == 0 and a.is_contiguous()
    assert a[2:, 4:].partition_offset == 2
    assert torch.equal(a.ap([[8, 2], [1, 4]], offset=20).host, torch.full((2, 4), 7.0))


def test_shared_psum_banks_are_not_counted_twice():
    @nki.jit
    def rotate(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        tiles = []
        for i in range(12):  # 12 tiles on 4 banks: 8 banks would overflow if counted apart
            psum = nl.ndarray((128, 512), nl.float32, buffer=nl.psum, address=(0, (i % 4) * 2048))
            tiles.append(psum)
            nisa.memset(dst=psum, value=float(i))
        sb = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=tiles[-1])
        nisa.dma_copy(dst=out, src=sb)
        return out

    out = rotate(np.zeros((128, 512), np.float32))
    assert (out == 11).all()


def test_auto_psum_tiles_still_overflow():
    tiles = [nl.ndarray((128, 512), nl.float32, buffer=nl.psum) for _ in range(9)]
    with pytest.raises(nki.NkiValidationError, match="PSUM capacity exceeded"):
        nisa.memset(dst=tiles[0], value=0.0)


@pytest.mark.parametrize(
    "buffer,address,message",
    [
        (nl.psum, (126, 0), "address partition 126 with 4 partitions"),
        (nl.psum, (0, 16384 - 16), "exceed the 16384 bytes per partition"),
        (nl.psum, (0, 1024), "a PSUM tile must start at a bank boundary"),
        (nl.sbuf, (0, 2), "address byte 2 is not aligned to float32"),
    ],
)
def test_address_validation(buffer, address, message):
    with pytest.raises(nki.NkiValidationError, match=message):
        nl.ndarray((4, 8), nl.float32, buffer=buffer, address=address)


def test_matmul_into_placed_psum_checks_the_physical_bank():
    psum = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum, address=(0, 2048))
    stationary = nl.ndarray((128, 128), nl.bfloat16)
    moving = nl.ndarray((128, 512), nl.bfloat16)
    for t in (stationary, moving):
        nisa.memset(dst=t, value=1.0)
    nisa.nc_matmul(dst=psum[:, 512:], stationary=stationary, moving=moving)
    with pytest.raises(
        nki.NkiValidationError, match="bytes \\[3072, 5120\\).*crossing a 2048-byte"
    ):
        nisa.nc_matmul(dst=psum[:, 256:768], stationary=stationary, moving=moving)


def test_nki_object_fields_without_values_default_to_none():
    @dataclasses.dataclass
    class Dims(nl.NKIObject):
        rows: int
        cols: int = 8
        fused: int

    assert (Dims(rows=2).fused, Dims(rows=2, fused=3).fused, Dims(rows=1).cols) == (None, 3, 8)


def test_nki_dataclass_takes_keywords_for_its_plain_class_attributes():
    """nki-library's attention_cte builds ``@dataclass class SectionParams(nl.NKIObject)``,
    whose fields are plain ``name = None`` lines, from keywords."""

    @dataclasses.dataclass
    class Section(nl.NKIObject):
        index = None
        rows: int = 0

    s = Section(7, index=3)
    assert (s.index, s.rows, Section().index) == (3, 7, None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'missing'"):
        Section(missing=1)


def test_stride_zero_destination_keeps_the_last_write():
    t = nl.ndarray((4, 1), nl.float32)
    src = nl.ndarray((4, 3), nl.float32)
    src.host.copy_(torch.arange(12.0).reshape(4, 3))
    nisa.tensor_copy(dst=t.broadcast(1, 3), src=src)
    assert t.host.flatten().tolist() == [2.0, 5.0, 8.0, 11.0]


def test_dma_modes_accept_their_documented_values():
    assert (nisa.dge_mode.none.value, nisa.oob_mode.skip.value, nisa.engine.vector.value) == (
        3,
        1,
        5,
    )
    src = nl.ndarray((2, 4), nl.float32, buffer=nl.shared_hbm)
    src.host.copy_(torch.ones(2, 4))
    dst = nl.ndarray((2, 4), nl.float32)
    nisa.dma_copy(dst=dst, src=src, dge_mode=3)
    assert (dst.host == 1).all()
    with pytest.raises(nki.NkiValidationError, match="7 is not an nki.isa.dge_mode"):
        nisa.dma_copy(dst=dst, src=src, dge_mode=7)
    assert nisa.get_nc_version() >= nisa.nc_version.gen3


def test_shared_identity_matrix_lives_in_sbuf():
    eye = nl.shared_identity_matrix(8, dtype=nl.bfloat16)
    assert nl.is_sbuf(eye) and torch.equal(eye.host, torch.eye(8, dtype=torch.bfloat16))
    dst = nl.ndarray((4, 4), nl.float32)
    assert nl.shared_identity_matrix(4, dtype=nl.float32, dst=dst) is dst
    assert torch.equal(dst.host, torch.eye(4))


def test_empty_views_may_be_built_but_not_accessed():
    t = nl.ndarray((4, 8), nl.float32)
    empty = t[nl.ds(2, 0)]
    assert empty.shape == (0, 8)
    with pytest.raises(nki.NkiValidationError, match="empty slice \\[2:2\\] \\(dim 0\\) accessed"):
        nisa.memset(dst=empty, value=0.0)


def test_scalar_offset_scales_by_the_tensors_own_stride_and_oob_skips():
    @nki.jit
    def pick(table, which, skip):
        rows, cols = table.shape[1], table.shape[2]
        out = nl.ndarray((rows, cols), dtype=table.dtype, buffer=nl.shared_hbm)
        sb = nl.ndarray((rows, cols), dtype=table.dtype, buffer=nl.sbuf)
        nisa.memset(dst=sb, value=-1.0)
        reg = nisa.register_alloc(which)
        src = table.ap([[cols, rows], [1, cols]], scalar_offset=reg, indirect_dim=0)
        mode = nisa.oob_mode.skip if skip else nisa.oob_mode.error
        nisa.dma_copy(dst=sb, src=src, oob_mode=mode)
        nisa.dma_copy(dst=out, src=sb)
        return out

    table = np.arange(3 * 2 * 4, dtype=np.float32).reshape(3, 2, 4)
    np.testing.assert_array_equal(pick(table, 2, False), table[2])
    np.testing.assert_array_equal(pick(table, 5, True), np.full((2, 4), -1.0, np.float32))
    with pytest.raises(nki.NkiValidationError, match="out of bounds for 8 elements"):
        pick(table, 5, False)


def test_string_arrays_are_constant_arguments():
    @nki.jit
    def tag(x, label):
        assert str(label) == "rows"
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out

    x = np.ones((2, 2), np.float32)
    np.testing.assert_array_equal(tag(x, np.array("rows")), x)


def test_lnc2_kernels_can_return_their_arguments():
    @nki.jit
    def bump(x):
        core = nl.program_id(0)
        t = nl.load(x[core : core + 1])
        nl.store(x[core : core + 1], nl.add(t, 1.0))
        return x

    x = torch.zeros(2, 4)
    assert bump[2](x) is x and (x == 1).all()


def _psum_rotation(live):
    """Nine PSUM banks allocated up front; ``live`` of them in use at the same time."""

    @nki.jit
    def kernel(x):
        banks = [nl.ndarray((128, 512), nl.float32, buffer=nl.psum) for _ in range(9)]
        acc = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for start in range(0, 9, live):
            group = banks[start : start + live]
            for b in group:
                nisa.memset(dst=b, value=1.0)
            for b in group:
                nisa.tensor_tensor(dst=acc, data1=acc, data2=b, op=nl.add)
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=acc[0 : x.shape[0], 0 : x.shape[1]])
        return out

    return kernel


def test_psum_tiles_occupy_banks_from_first_to_last_use():
    # The compiler frees a tile after its last use, not when the Python name goes away.
    assert (_psum_rotation(3)(np.zeros((2, 2), np.float32)) == 9).all()
    with pytest.raises(
        nki.NkiValidationError, match="PSUM capacity exceeded on trn2: live tiles need 9"
    ):
        _psum_rotation(9)(np.zeros((2, 2), np.float32))


def test_shared_constant_loads_npy_files(tmp_path):
    path = tmp_path / "rot.npy"
    np.save(path, np.arange(6, dtype=np.int32).reshape(2, 3))
    t = nl.shared_constant(str(path))
    assert t.dtype == nl.int32 and nl.is_hbm(t)
    assert torch.equal(t.host, torch.arange(6, dtype=torch.int32).reshape(2, 3))
