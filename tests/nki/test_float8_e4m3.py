"""nl.float8_e4m3, the IEEE-style e4m3 (largest finite 240, +-inf, NaNs), against ml_dtypes'
float8_e4m3 as the reference: host arrays, engine and DMA conversions into and out of it, and
that it stays distinct from float8_e4m3fn (largest finite 448, no inf)."""

import ml_dtypes
import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl

E4M3 = np.dtype(ml_dtypes.float8_e4m3)
# Rounding edges: 240 is the largest finite value and 248 the midpoint to 256, which rounds to
# even and so overflows; 2**-9 is the smallest subnormal; the rest sit beyond e4m3 but within
# e4m3fn's range (where the two types part), or beyond both.
VALUES = np.array(
    [0.0, -0.0, 2.0**-9, 2.0**-10, 0.3, -1.7, 239.0, 240.0, 244.0, 247.9, 248.0, 250.0]
    + [-248.0, 300.0, 448.0, 500.0, -1e6, np.inf, -np.inf, np.nan],
    dtype=np.float32,
)


def assert_same_codes(actual, expected):
    """Equal e4m3 codes, NaNs compared as NaN (ml_dtypes and storage may pick other NaN codes)."""
    assert actual.dtype == E4M3
    as_float = actual.astype(np.float32), expected.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(as_float[0]), np.isnan(as_float[1]))
    finite = ~np.isnan(as_float[1])
    np.testing.assert_array_equal(actual.view(np.uint8)[finite], expected.view(np.uint8)[finite])


def test_host_arrays_use_ml_dtypes_e4m3():
    assert np.zeros(2, dtype=nl.float8_e4m3).dtype == E4M3
    assert nl.float8_e4m3 == E4M3 and nl.float8_e4m3 != np.dtype(ml_dtypes.float8_e4m3fn)
    assert nl.float8_e4m3fn == torch.float8_e4m3fn and nl.float8_e4m3 != torch.float8_e4m3fn


@nki.jit
def dma_convert(x, dtype):
    out = nl.ndarray(x.shape, dtype=dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    return out


@nki.jit
def engine_convert(x, dtype):
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    converted = nl.ndarray(x.shape, dtype=dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=converted, src=src)
    out = nl.ndarray(x.shape, dtype=dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=converted)
    return out


@pytest.mark.parametrize("convert", [dma_convert, engine_convert])
def test_float32_rounds_and_overflows_as_ml_dtypes(convert):
    out = nki.simulate(convert)(VALUES.reshape(1, -1), nl.float8_e4m3)
    assert_same_codes(out.reshape(-1), VALUES.astype(E4M3))


@pytest.mark.parametrize("convert", [dma_convert, engine_convert])
def test_e4m3_values_read_back_as_ml_dtypes_does(convert):
    every_code = np.arange(256, dtype=np.uint8).view(E4M3).reshape(2, 128)
    out = nki.simulate(convert)(every_code, nl.float32)
    np.testing.assert_array_equal(out, every_code.astype(np.float32))


def test_same_dtype_copies_keep_every_code():
    every_code = np.arange(256, dtype=np.uint8).view(E4M3).reshape(2, 128)
    out = nki.simulate(dma_convert)(every_code, nl.float8_e4m3)
    np.testing.assert_array_equal(out.view(np.uint8), every_code.view(np.uint8))


@nki.jit
def memset_e4m3(value):
    tile = nl.ndarray((1, 4), dtype=nl.float8_e4m3, buffer=nl.sbuf)
    nisa.memset(dst=tile, value=value)
    out = nl.ndarray((1, 4), dtype=nl.float8_e4m3, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


@pytest.mark.parametrize("value", [244.0, 300.0, -448.0, 0.3])
def test_memset_stores_constants_as_ml_dtypes_does(value):
    out = nki.simulate(memset_e4m3)(value)
    assert_same_codes(out.reshape(-1), np.full(4, value, dtype=np.float32).astype(E4M3))
