"""One test per validation rule; each checks that the message names the rule and the sizes."""

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from nki import NkiValidationError


def sb(shape, dtype=nl.float32, buffer=nl.sbuf, fill=0.0):
    t = nl.full(shape, fill, dtype, buffer=buffer)
    return t


def hbm(shape, dtype=nl.float32):
    t = nl.ndarray(shape, dtype, buffer=nl.shared_hbm)
    t.host.zero_()
    return t


def raises(match):
    return pytest.raises(NkiValidationError, match=match)


def test_errors_are_assertion_errors():
    assert issubclass(NkiValidationError, AssertionError)
    assert nisa.NkiValidationError is NkiValidationError


# ---- partition dimension ------------------------------------------------------------------
def test_partition_dimension_of_an_allocation():
    with raises(r"ndarray: partition dimension 256 exceeds maximum 128"):
        nl.ndarray((256, 4), nl.float32, buffer=nl.sbuf)


def test_partition_dimension_of_nl_load():
    with raises(r"nl.load: partition dimension 256 exceeds maximum 128"):
        nl.load(hbm((256, 4)))


def test_partition_dimension_of_a_vector_transpose():
    with raises(r"nc_transpose: data partition dimension 64 exceeds maximum 32"):
        nisa.nc_transpose(dst=sb((8, 64)), data=sb((64, 8)), engine=nisa.vector_engine)


def test_partition_dimension_under_matmul_row_tiling():
    with raises(r"nc_matmul: stationary partition dimension 128 exceeds maximum 64"):
        nisa.nc_matmul(
            dst=sb((64, 64), buffer=nl.psum),
            stationary=sb((128, 64)),
            moving=sb((128, 64)),
            tile_position=(0, 0),
            tile_size=(64, 128),
        )


# ---- nc_matmul shape, buffer and dtype rules ----------------------------------------------
def test_matmul_contraction_mismatch():
    with raises(r"contraction \(partition\) dimension mismatch: stationary has 128, moving has 64"):
        nisa.nc_matmul(
            dst=sb((128, 64), buffer=nl.psum), stationary=sb((128, 128)), moving=sb((64, 64))
        )


def test_matmul_stationary_free_size():
    with raises(r"stationary free size 256 exceeds gemm_stationary_fmax 128"):
        nisa.nc_matmul(
            dst=sb((128, 64), buffer=nl.psum), stationary=sb((128, 256)), moving=sb((128, 64))
        )


def test_matmul_moving_free_size(target):
    target("trn2")
    with raises(r"moving free size 1024 exceeds gemm_moving_fmax 512 on trn2"):
        nisa.nc_matmul(
            dst=sb((128, 1024), buffer=nl.psum), stationary=sb((128, 128)), moving=sb((128, 1024))
        )


def test_matmul_moving_free_size_grows_on_trn3(target):
    target("trn3")
    dst = sb((128, 1024), buffer=nl.psum)
    nisa.nc_matmul(dst=dst, stationary=sb((128, 128)), moving=sb((128, 1024), fill=1.0))
    assert (dst.host == 0).all()


def test_matmul_dst_shape():
    with raises(r"dst partition dimension 64 must equal the stationary free size 128"):
        nisa.nc_matmul(
            dst=sb((64, 64), buffer=nl.psum), stationary=sb((128, 128)), moving=sb((128, 64))
        )


def test_matmul_dst_must_be_psum():
    with raises(r"nc_matmul: dst must be in PSUM, got sbuf"):
        nisa.nc_matmul(dst=sb((128, 64)), stationary=sb((128, 128)), moving=sb((128, 64)))


def test_matmul_inputs_must_be_sbuf():
    with raises(r"nc_matmul: moving must be in SBUF, got psum"):
        nisa.nc_matmul(
            dst=sb((128, 64), buffer=nl.psum),
            stationary=sb((128, 128)),
            moving=sb((128, 64), buffer=nl.psum),
        )


def test_matmul_input_dtypes():
    with raises(r"stationary dtype int8 is not supported"):
        nisa.nc_matmul(
            dst=sb((128, 64), buffer=nl.psum),
            stationary=sb((128, 128), nl.int8),
            moving=sb((128, 64)),
        )


def test_matmul_fp32_pairs_with_fp32():
    with raises(
        r"if one input is float32/tfloat32 the other must be too \(stationary float32, "
        r"moving bfloat16\)"
    ):
        nisa.nc_matmul(
            dst=sb((128, 64), buffer=nl.psum),
            stationary=sb((128, 128)),
            moving=sb((128, 64), nl.bfloat16),
        )


def test_matmul_dst_accumulates_in_fp32(target):
    target("trn2")
    with raises(
        r"dst must be float32 \(fp32 accumulation\) on NeuronCore-v3 \(trn2\), "
        r"got bfloat16"
    ):
        nisa.nc_matmul(
            dst=sb((128, 64), nl.bfloat16, buffer=nl.psum),
            stationary=sb((128, 128), nl.bfloat16),
            moving=sb((128, 64), nl.bfloat16),
        )


def test_matmul_accumulate_true_needs_written_psum():
    with raises(r"accumulate=True on PSUM that was never written"):
        nisa.nc_matmul(
            dst=nl.ndarray((128, 64), nl.float32, buffer=nl.psum),
            stationary=sb((128, 128)),
            moving=sb((128, 64)),
            accumulate=True,
        )


# ---- PSUM bank limits and capacity ----------------------------------------------------------
def test_matmul_result_must_stay_in_one_psum_bank(target):
    target("trn2")
    acc = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum)
    with raises(
        r"dst occupies bytes \[1024, 3072\) of each PSUM partition, crossing a "
        r"2048-byte bank"
    ):
        nisa.nc_matmul(dst=acc[:, 256:768], stationary=sb((128, 128)), moving=sb((128, 512)))


def test_psum_capacity_counts_live_banks(target):
    target("trn2")
    tiles = [nl.ndarray((128, 128), nl.float32, buffer=nl.psum) for _ in range(9)]
    with raises(
        r"PSUM capacity exceeded on trn2: live tiles need 9 banks \(18432 bytes per "
        r"partition\), 8 banks of 2048 bytes available"
    ):
        nisa.memset(dst=tiles[0], value=0.0)


def test_single_psum_tile_larger_than_psum():
    with raises(r"PSUM capacity exceeded on trn2: live tiles need 9 banks"):
        nl.ndarray((128, 4608), nl.float32, buffer=nl.psum)


# ---- SBUF capacity, per target -------------------------------------------------------------
def _big_tiles_kernel(kib):
    @nki.jit
    def kernel(x):
        tiles = [nl.ndarray((128, 4096), nl.float32, buffer=nl.sbuf) for _ in range(kib // 16)]
        for t in tiles:
            nisa.memset(dst=t, value=1.0)
        # Every tile stays in use until here, so all of them are live at once.
        for t in tiles[1:]:
            nisa.tensor_tensor(dst=tiles[0], data1=tiles[0], data2=t, op=nl.add)
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=tiles[0][0 : x.shape[0], 0 : x.shape[1]])
        return out

    return kernel


def test_sbuf_capacity_trn2_rejects_what_trn3_fits(target):
    kernel = _big_tiles_kernel(240)  # 15 tiles of 16 KiB per partition
    target("trn3")
    assert (kernel(np.zeros((2, 2), np.float32)) == 15).all()
    target("trn2")
    with raises(
        r"memset: SBUF capacity exceeded on trn2: live tiles need 245760 bytes per "
        r"partition, 229376 available"
    ):
        kernel(np.zeros((2, 2), np.float32))


def test_tiles_rebound_in_a_loop_are_released():
    @nki.jit
    def kernel(x):
        for _ in nl.affine_range(40):  # 40 x 64 KiB would never fit at once
            t = nl.ndarray((128, 16384), nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=t, value=0.0)

    kernel(np.zeros(1, np.float32))


# ---- reductions only along free axes -------------------------------------------------------
def test_tensor_reduce_rejects_partition_axis():
    with raises(r"tensor_reduce: cannot reduce along the partition axis 0"):
        nisa.tensor_reduce(dst=sb((1, 4)), op=nl.add, data=sb((8, 4)), axis=0)


def test_nl_reduction_rejects_partition_axis():
    with raises(r"nl.sum: cannot reduce along the partition axis 0"):
        nl.sum(sb((8, 4)), axis=0)


def test_tensor_reduce_axes_must_be_trailing():
    with raises(r"axis \(1,\) must be the last contiguous free axes \(2,\) of a 3-D tile"):
        nisa.tensor_reduce(dst=sb((8, 1, 4)), op=nl.add, data=sb((8, 3, 4)), axis=1)


def test_tensor_reduce_dst_size():
    with raises(r"dst has 4 elements per partition, the reduction produces 1"):
        nisa.tensor_reduce(dst=sb((8, 4)), op=nl.add, data=sb((8, 4)), axis=1)


# ---- buffer kinds per instruction ----------------------------------------------------------
def test_compute_operands_must_be_on_chip():
    with raises(r"tensor_tensor: data1 must be in SBUF or PSUM, got shared_hbm"):
        nisa.tensor_tensor(dst=sb((4, 4)), data1=hbm((4, 4)), data2=sb((4, 4)), op=nl.add)


def test_dma_cannot_touch_psum():
    with raises(r"dma_copy: src must be in SBUF or private_hbm or shared_hbm, got psum"):
        nisa.dma_copy(dst=hbm((4, 4)), src=sb((4, 4), buffer=nl.psum))


def test_two_psum_inputs_rejected():
    with raises(r"tensor_tensor: data1 and data2 cannot both be in PSUM"):
        nisa.tensor_tensor(
            dst=sb((4, 4)),
            data1=sb((4, 4), buffer=nl.psum),
            data2=sb((4, 4), buffer=nl.psum),
            op=nl.add,
        )


def test_gpsimd_cannot_access_psum():
    with raises(r"tensor_copy: the gpsimd engine cannot access PSUM"):
        nisa.tensor_copy(dst=sb((4, 4)), src=sb((4, 4), buffer=nl.psum), engine=nisa.gpsimd_engine)


def test_iota_writes_sbuf_only():
    with raises(r"iota: dst must be in SBUF, got psum"):
        nisa.iota(dst=sb((4, 4), nl.int32, buffer=nl.psum), pattern=[[1, 4]])


def test_tensor_engine_transpose_writes_psum():
    with raises(r"nc_transpose: dst must be in PSUM, got sbuf"):
        nisa.nc_transpose(dst=sb((64, 64)), data=sb((64, 64)), engine=nisa.tensor_engine)


def test_string_buffer_names_rejected():
    with raises(r"ndarray: buffer must be nl.sbuf, nl.psum or an HBM buffer, got 'sbuf'"):
        nl.ndarray((4, 4), nl.float32, buffer="sbuf")


# ---- shapes of operands ----------------------------------------------------------------------
def test_elementwise_shapes_must_match():
    with raises(
        r"tensor_tensor: free size mismatch: dst has 8 elements per partition, "
        r"data2 has 4"
    ):
        nisa.tensor_tensor(dst=sb((4, 8)), data1=sb((4, 8)), data2=sb((4, 4)), op=nl.add)


def test_partition_counts_must_match():
    with raises(r"tensor_copy: partition dimension mismatch: dst has 4, src has 8"):
        nisa.tensor_copy(dst=sb((4, 8)), src=sb((8, 4)))


def test_tensor_scalar_operand_is_scalar_or_column():
    with raises(r"tensor_scalar: operand0 must be a scalar or a \(8, 1\) tile, got \(8, 4\)"):
        nisa.tensor_scalar(dst=sb((8, 4)), data=sb((8, 4)), op0=nl.add, operand0=sb((8, 4)))


def test_dma_element_counts_must_match():
    with raises(r"dma_copy: element count mismatch: dst has 16, src has 32"):
        nisa.dma_copy(dst=sb((4, 4)), src=hbm((4, 8)))


def test_bn_stats_free_size():
    with raises(r"bn_stats: free size 1024 exceeds bn_stats_fmax 512"):
        nisa.bn_stats(dst=sb((4, 6)), data=sb((4, 1024)))


def test_transpose_size_on_tensor_engine():
    with raises(r"nc_transpose: data free size 256 exceeds maximum 128 \(tensor engine\)"):
        nisa.nc_transpose(
            dst=sb((128, 128), buffer=nl.psum), data=sb((128, 256)), engine=nisa.tensor_engine
        )


def test_iota_pattern_must_cover_dst():
    with raises(r"iota: pattern covers 6 elements per partition, dst has 8"):
        nisa.iota(dst=sb((4, 8), nl.int32), pattern=[[1, 2], [1, 3]])


# ---- indexing and views ----------------------------------------------------------------------
def test_index_out_of_bounds():
    with raises(r"index range \[0, 4095\] exceeds dimension size 4000 \(dim 1\)"):
        hbm((4, 4000))[:, 0:4096]


def test_reshape_keeps_element_count():
    with raises(r"reshape: cannot reshape \(128, 64\) \(8192 elements\) into \(128, 32\)"):
        sb((128, 64)).reshape((128, 32))


def test_ap_partition_stride_matches_storage():
    with raises(r"ap: partition stride 32 must equal the storage's free size 64"):
        sb((128, 64)).ap([[32, 128], [1, 32]])


def test_ap_stays_inside_storage():
    # An out-of-bounds pattern is refused when an instruction accesses it, not when built.
    view = sb((128, 64)).ap([[64, 128], [1, 65]])
    with raises(r"ap: access pattern covers elements \[0, 8192\], outside the storage of 8192"):
        nisa.memset(dst=view, value=0.0)


def test_views_cannot_move_the_partition_dim():
    with raises(r"permute: cannot change the partition dimension of an on-chip tensor"):
        sb((4, 8)).permute((1, 0))


# ---- API argument rules ----------------------------------------------------------------------
def test_raw_int_engine_rejected():
    with raises(r"tensor_copy: engine must be an nki.isa.engine member, got 1"):
        nisa.tensor_copy(dst=sb((4, 4)), src=sb((4, 4)), engine=1)


def test_activation_reduce_op_is_add():
    with raises(r"activation: reduce_op must be nl.add, got nl.max"):
        nisa.activation(
            dst=sb((4, 4)), op=nl.exp, data=sb((4, 4)), reduce_op=nl.max, reduce_res=sb((4, 1))
        )


def test_memset_value_matches_dtype():
    with raises(r"memset: value 1.5 does not match integer dtype int32"):
        nisa.memset(dst=sb((4, 4), nl.int32), value=1.5)


def test_exponential_needs_trn3(target):
    target("trn2")
    with raises(r"exponential: requires NeuronCore-v4 \(trn3\); target trn2 is NeuronCore-v3"):
        nisa.exponential(dst=sb((4, 4)), src=sb((4, 4)))


def test_dynamic_range_induction_variable_is_frozen():
    for i in nl.dynamic_range(2):
        with raises(r"register_move: cannot write the induction variable of a dynamic_range loop"):
            nisa.register_move(i, 5)


# ---- kernel outputs ------------------------------------------------------------------------
def test_outputs_must_be_shared_hbm():
    @nki.jit
    def kernel(x):
        return nl.load(x)

    with raises(r"kernel: output tensor \(4, 4\) must be in nl.shared_hbm, got sbuf"):
        kernel(np.zeros((4, 4), np.float32))


def test_outputs_must_be_written():
    @nki.jit
    def kernel(x):
        return nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)

    with raises(r"kernel: output tensor \(4, 4\) was never written"):
        kernel(torch.zeros(4, 4))
