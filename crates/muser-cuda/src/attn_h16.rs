//! The launch shape of the f16 route's tensor-core attention partials (`attn_h16_d64` /
//! `attn_h16_d128`, kernels/attn_h16.cu; `MUSER_CUDA_H16_ATTN=mma`). A shape is launch only: the
//! MMA's rows are independent, so which (token, head) rows share a warp or a block never changes
//! a row's bits — decode (one token per block, packed rows included) and prefill (`tokens`
//! consecutive tokens of one sequence per block) give every query the same partial, whatever
//! the number of tiles in flight or the warps that share a row block's output columns
//! (`with_cols`: the `_c4` kernels).

use crate::launch::Dims;
use crate::registry::Kernel;

/// Keys per tile (`AH_TILE` in attn_h16.cu).
const TILE: usize = 32;
/// Warps per block (each 16 rows of (token, head)): 4 warps over the real model's 16 heads per
/// KV head is 4 prefill tokens per block; a decode block's extra warps only share the copies.
const WARPS: usize = 4;
/// Tiles in flight: decode takes a default super-block's 4 tiles at once (69.6 KB of shared
/// memory at 128-value heads: opted in), prefill double-buffers (34.8 KB).
const DECODE_BUFS: usize = 4;
const PREFILL_BUFS: usize = 2;

/// One launch shape of `attn_h16_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttnH16Shape {
    pub kernel: Kernel,
    /// Warps per block (16 rows each).
    pub warps: usize,
    /// Query tokens per block (1 for decode and packed rows).
    pub tokens: usize,
    /// K / V tiles in flight (the ring's buffers, 1..=4).
    pub bufs: usize,
    /// Warps sharing each 16 rows, each a 1/cols share of the output columns (1, or 4 for the
    /// `_c4` kernels).
    pub cols: usize,
    hd: usize,
}

impl AttnH16Shape {
    /// The kernel for heads of `hd` keys and `hd_v` values: 64 or 128, equal (None otherwise).
    fn kernel(hd: usize, hd_v: usize) -> Option<Kernel> {
        match (hd, hd_v) {
            (64, 64) => Some(Kernel::AttnH16D64),
            (128, 128) => Some(Kernel::AttnH16D128),
            _ => None,
        }
    }

    /// The four-warps-per-16-rows kernel for these head sizes.
    fn kernel_c4(hd: usize, hd_v: usize) -> Option<Kernel> {
        match (hd, hd_v) {
            (64, 64) => Some(Kernel::AttnH16D64C4),
            (128, 128) => Some(Kernel::AttnH16D128C4),
            _ => None,
        }
    }

    /// Whether the kernels take these head sizes.
    pub fn supports(hd: usize, hd_v: usize) -> bool {
        Self::kernel(hd, hd_v).is_some()
    }

    /// One token per block.
    pub fn decode(gqa: usize, hd: usize, hd_v: usize) -> Option<AttnH16Shape> {
        Some(AttnH16Shape {
            kernel: Self::kernel(hd, hd_v)?,
            warps: WARPS.max(gqa.div_ceil(16)),
            tokens: 1,
            bufs: DECODE_BUFS,
            cols: 1,
            hd,
        })
    }

    /// As many tokens per block as the warps hold (at least one).
    pub fn prefill(gqa: usize, hd: usize, hd_v: usize) -> Option<AttnH16Shape> {
        let warps = WARPS.max(gqa.div_ceil(16));
        Some(AttnH16Shape {
            kernel: Self::kernel(hd, hd_v)?,
            warps,
            tokens: (16 * warps / gqa).max(1),
            bufs: PREFILL_BUFS,
            cols: 1,
            hd,
        })
    }

    /// The same block with `bufs` tiles in flight (1..=4; launch only).
    pub fn with_bufs(self, bufs: usize) -> AttnH16Shape {
        assert!(
            (1..=4).contains(&bufs),
            "attn_h16 takes 1..=4 tiles in flight"
        );
        AttnH16Shape { bufs, ..self }
    }

    /// The same block with 4 warps on each 16 rows, each a quarter of the output columns of P·V
    /// (the `_c4` kernels; launch only): None unless the warps come in fours and the block's
    /// rows (`tokens` × `gqa`) fit 16 per four warps. For decode of the real model (16 heads
    /// per KV head, 4 warps): the one tile chain a block's first warp ran alone, split four ways.
    pub fn with_cols(self, gqa: usize) -> Option<AttnH16Shape> {
        let fits = self.warps.is_multiple_of(4) && 16 * (self.warps / 4) >= self.tokens * gqa;
        // The kernels' heads have as many values as keys (`kernel`).
        let kernel = Self::kernel_c4(self.hd, self.hd)?;
        fits.then_some(AttnH16Shape {
            kernel,
            cols: 4,
            ..self
        })
    }

    /// The same warps with one token per block (decode's row placement on prefill's block).
    pub fn one_token_per_block(self) -> AttnH16Shape {
        AttnH16Shape { tokens: 1, ..self }
    }

    /// `bufs` K and `bufs` V tiles of `TILE` rows, each row padded by 8 values.
    pub fn smem(&self) -> usize {
        2 * self.bufs * TILE * (self.hd + 8) * 2
    }

    /// Grid `(n_super, n_head_kv, ⌈n_tok / tokens⌉)`.
    pub fn dims(&self, n_super: usize, n_head_kv: usize, n_tok: usize) -> Dims {
        let u = |v: usize| u32::try_from(v).expect("attention grid dimension overflows u32");
        Dims {
            grid: (u(n_super), u(n_head_kv), u(n_tok.div_ceil(self.tokens))),
            block: u(32 * self.warps),
            smem: u(self.smem()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_cover_every_head_of_a_token() {
        // The real model: 16 heads per KV head, one warp per decoded token, four tokens per
        // prefill block; a 4:1 model packs 4 tokens per warp; 32:1 needs two warps a token.
        let d = AttnH16Shape::decode(16, 128, 128).expect("128");
        assert_eq!((d.warps, d.tokens, d.smem()), (4, 1, 69632));
        let p = AttnH16Shape::prefill(16, 128, 128).expect("128");
        assert_eq!((p.warps, p.tokens, p.smem()), (4, 4, 34816));
        assert_eq!(AttnH16Shape::prefill(4, 64, 64).map(|s| s.tokens), Some(16));
        let wide = AttnH16Shape::prefill(32, 128, 128).expect("128");
        assert_eq!((wide.warps, wide.tokens), (4, 2));
        assert_eq!(AttnH16Shape::decode(32, 128, 128).map(|s| s.warps), Some(4));
        assert_eq!(AttnH16Shape::decode(128, 64, 64).map(|s| s.warps), Some(8));
        // Every row of a block's tokens has a warp row.
        for (s, gqa) in [(d, 16), (p, 16), (wide, 32)] {
            assert!(16 * s.warps >= s.tokens * gqa, "{s:?}");
        }
        assert!(AttnH16Shape::decode(16, 64, 96).is_none());
        assert!(AttnH16Shape::prefill(16, 256, 256).is_none());
        assert_eq!(p.dims(4, 2, 9).grid, (4, 2, 3));
        // Four warps per 16 rows: decode of the real model, not its prefill blocks (64 rows).
        let c = d.with_cols(16).expect("16 rows on 4 warps");
        assert_eq!(
            (c.kernel, c.cols, c.warps, c.smem()),
            (Kernel::AttnH16D128C4, 4, 4, 69632)
        );
        assert!(p.with_cols(16).is_none());
        assert_eq!(
            AttnH16Shape::decode(2, 64, 64)
                .and_then(|s| s.with_cols(2))
                .map(|s| s.kernel),
            Some(Kernel::AttnH16D64C4)
        );
        assert!(AttnH16Shape::decode(32, 128, 128)
            .and_then(|s| s.with_cols(32))
            .is_none());
    }
}
