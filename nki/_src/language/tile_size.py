"""Tile-size limits (``nl.tile_size``); memory sizes follow the current target."""

from .. import runtime


class _TileSize:
    """Tile size constants."""

    pmax = 128
    psum_fmax = 512
    psum_bank_fmax = 512
    psum_num_banks = 8
    gemm_stationary_fmax = 128
    # One fp32 PSUM bank; kept at 512 on every target so tiled kernels stay portable.
    gemm_moving_fmax = 512
    bn_stats_fmax = 512
    psum_min_align = 4
    sbuf_min_align = 1

    @property
    def sbuf_fmax_bytes(self):
        return runtime.current().target.sbuf_partition_bytes

    @property
    def sbuf_size_bytes(self):
        return 128 * self.sbuf_fmax_bytes

    # Deprecated in NKI 0.4: despite its name, the usable bytes per partition.
    total_available_sbuf_size = sbuf_fmax_bytes

    def __repr__(self):
        return "nl.tile_size"


tile_size = _TileSize()
