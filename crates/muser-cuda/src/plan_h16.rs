//! The f16 route's launch plans (`Registry::mvh_plan` / `mmh_plan` / `mmt_plan`,
//! `act_h16_dims`, `ewh_dims`) and the shapes they choose from: the chain count S of a matrix
//! (`Registry::h16_chains`, part of the numbers: every f16 matmul kernel of a matrix takes the
//! same S, so decode, packed rows and prefill give each output the same bits) and the prefill
//! tiles' placement on an SM (`MmtShape`, launch only); the switches they read are
//! crate::h16_switches (`H16Switches`, re-exported here). The kernels: matvec_h16.cu,
//! mmt_h16.cu.

use crate::error::CudaError;
pub use crate::h16_switches::H16Switches;
use crate::registry::{Kernel, Registry};

/// The prefill tiles of `mmt_*` (mmt_h16.cu): row groups and tokens per block and threads (the
/// .cu's MMT_GROUPS, MMT_TOK, MMT_THREADS). Q4H's shape is compiled in as -DMMT_WG / -DMMT_MINB /
/// -DMMT_STAGES from `MmtShape::params`.
const MMT_GROUPS: u32 = 8;
const MMT_TOK: u32 = 64;
const MMT_THREADS: u32 = 256;
/// The warpgroup tiles of `mmw_*` (mmw_h16.cu, `MmtShape::Wg`): tokens per block, stages and
/// bytes per stage (MMW_TOK, MMW_STAGES, MMW_STAGE); the warpgroups per block (64 rows each) are
/// `Registry::mmw_wg` (-DMMW_WG).
const MMW_TOK: u32 = 128;
const MMW_STAGES: usize = 3;
const MMW_STAGE: usize = 65536 + 4096;

/// How the f16 prefill tiles sit on an SM (`MUSER_CUDA_MMT`; the `mmt_*` shapes as -DMMT_WG /
/// -DMMT_MINB / -DMMT_STAGES) — the same bits in every shape. H200, pp512 of the full forge and
/// `mvh_bench` FFN gate / up at 512 tokens: `w8` 3537.7 tok/s, 549.3 µs; `w8b2` 3254.7, 622.4
/// (128 registers: spills, 2 stages); `w4b2` 3097.6, 646.3 (dd3d216); `wg` (the warpgroup tiles
/// from 1024 row groups, `mmt_*` as `w8` below) 3759.7 vs `w8` 3549.1 in the same call, FFN gate
/// / up 490.6 vs 547.1 µs (b4f3c72; docs/receipts/cuda-wgmma-mmw.txt) — the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmtShape {
    /// 8 warps of one row group, one block per SM, 3 stages, running totals in registers.
    W8,
    /// The same at two blocks per SM: 2 stages, running totals in the output.
    W8B2,
    /// 4 warps of two row groups (each activation fragment feeds both), two blocks per SM, 2
    /// stages, running totals in the output.
    W4B2,
    /// Not `mmt_*` but the warpgroup-MMA tiles `mmw_*` (mmw_h16.cu): 3 warpgroups × 64 rows ×
    /// 128 tokens per block, the activations in natural order (`h16_natural` first), 3 stages,
    /// running totals in the output. The same bits as every other shape.
    Wg,
}

/// The most static shared memory of a one-token f16 kernel (`mvh_*`, `mvh_glu_*`): the chains'
/// partial sums of up to 32 warps (`mvh_glu_*` at S = 16) and the bulk ring's barriers (16 warps
/// of 4 stages). What a dynamic allocation must leave room for.
pub(crate) const MVH_STATIC_SMEM: usize = 32 * 32 * 4 * 4 + 16 * 4 * 8;

/// Bytes of `MUSER_CUDA_MVH_XSMEM`'s stage of one token over `k` inputs in format `w`: the k
/// f16 activations, then the sums (`SUM_WORDS` words per super-block: Q4H 4, Q6H 8).
pub fn xsmem_bytes(w: HWeights, k: usize) -> usize {
    let sum_words = match w {
        HWeights::Q4H => 4,
        HWeights::Q6H => 8,
    };
    2 * k + k / 256 * sum_words * 4
}

/// The cluster twin of a one-token kernel of S = 8 / 16 chains (matvec_h16.cu
/// `MVH_CLUSTER_KERNEL`) and its blocks per cluster C: S / C = 4 warps per block.
fn mvh_cluster_twin(kernel: Kernel) -> Option<(Kernel, u32)> {
    use Kernel::*;
    match kernel {
        MvhQ4hS8 => Some((MvhQ4hS8C2, 2)),
        MvhQ6hS8 => Some((MvhQ6hS8C2, 2)),
        MvhQ4hS16 => Some((MvhQ4hS16C4, 4)),
        MvhQ6hS16 => Some((MvhQ6hS16C4, 4)),
        _ => None,
    }
}

/// `mvh_cluster_twin` for kernels of at least `min_s` chains (the twins are blocks of 4 warps:
/// S = 4 C).
fn cluster_twin_from(kernel: Kernel, min_s: u32) -> Option<(Kernel, u32)> {
    mvh_cluster_twin(kernel).filter(|&(_, c)| 4 * c >= min_s)
}

/// A one-token launch's dims as clusters of `c` blocks: each block of S warps becomes `c`
/// consecutive blocks along x of S / c warps.
fn cluster_dims(dims: crate::launch::Dims, c: u32) -> crate::launch::Dims {
    crate::launch::Dims {
        grid: (dims.grid.0 * c, dims.grid.1, dims.grid.2),
        block: dims.block / c,
        smem: dims.smem,
    }
}

impl MmtShape {
    pub(crate) fn from_env() -> Result<MmtShape, CudaError> {
        match std::env::var("MUSER_CUDA_MMT").as_deref() {
            Ok("w8") => Ok(MmtShape::W8),
            Ok("w8b2") => Ok(MmtShape::W8B2),
            Ok("w4b2") => Ok(MmtShape::W4B2),
            Err(_) | Ok("wg") => Ok(MmtShape::Wg),
            Ok(v) => Err(CudaError::Invalid(format!(
                "MUSER_CUDA_MMT={v}: expected w8, w8b2, w4b2 or wg"
            ))),
        }
    }
    /// The route-id label.
    pub fn label(self) -> &'static str {
        match self {
            MmtShape::W8 => "w8",
            MmtShape::W8B2 => "w8b2",
            MmtShape::W4B2 => "w4b2",
            MmtShape::Wg => "wg",
        }
    }
    /// Row groups per warp, blocks per SM, stages (`Wg`: the `mmt_*` kernels it does not launch
    /// are compiled as `W8`'s).
    pub(crate) fn params(self) -> (u32, u32, usize) {
        match self {
            MmtShape::W8 | MmtShape::Wg => (1, 1, 3),
            MmtShape::W8B2 => (1, 2, 2),
            MmtShape::W4B2 => (2, 2, 2),
        }
    }
    /// The shape a format's tiles take: Q4H this one, Q6H always `W8` (mmt_h16.cu's kernel
    /// list: two of its stage sets would not fit an SM).
    fn of(self, w: HWeights) -> MmtShape {
        match (self, w) {
            (MmtShape::Wg, _) | (_, HWeights::Q4H) => self,
            (_, HWeights::Q6H) => MmtShape::W8,
        }
    }
    /// Stages of a format's tiles.
    pub fn stages(self, w: HWeights) -> usize {
        match self.of(w) {
            MmtShape::Wg => MMW_STAGES,
            s => s.params().2,
        }
    }
    /// Blocks per SM a format's tiles ask for.
    pub fn blocks_per_sm(self, w: HWeights) -> usize {
        self.of(w).params().1 as usize
    }
    /// Dynamic shared memory of a format's tiles: `stages` stages of 8 pieces, 64 activation rows
    /// of MMT_XROW = 528 bytes and 64 tokens' sums — for the f16 scale layouts, whose pieces are
    /// the larger: an upper bound for the u8 ones (`MUSER_CUDA_Q4H_SCALES` / `_Q6H_SCALES`; the
    /// same blocks per SM either way, `every_tile_shape_fits_its_blocks_per_sm`).
    pub fn smem(self, w: HWeights) -> usize {
        if self == MmtShape::Wg {
            return MMW_STAGES * MMW_STAGE;
        }
        use crate::scales::Scales::F16;
        let (piece, sum_bytes) = match w {
            HWeights::Q4H => (crate::q4h::bytes(16, 256, F16), 16),
            HWeights::Q6H => (crate::q6h::bytes(16, 256, F16), 32),
        };
        self.stages(w) * (MMT_GROUPS as usize * piece + MMT_TOK as usize * (528 + sum_bytes))
    }
}

/// A launch of the split warpgroup tiles (`Registry::mmw_split_plan`): `kernel` over `dims` (grid
/// z = the chain) with the arguments of `mmt_*` and then the scratch `P`
/// [`chains`][n_tok][n_out] f32, then `mmw_fold` over `fold_dims` (arguments: P, chains, the
/// matrix's super-blocks, n_out, n_tok, XINV, w_inv, Y, ldy).
#[derive(Clone, Copy, Debug)]
pub struct MmwSplit {
    pub kernel: Kernel,
    pub dims: crate::launch::Dims,
    pub chains: u32,
    pub fold_dims: crate::launch::Dims,
    pub scratch_floats: usize,
}

impl MmwSplit {
    /// `mmw_fold`'s arguments: the scratch `p`, the matrix's `k` inputs and `n_out` rows, `n_tok`
    /// tokens, the activations' inverses `xinv`, the weights' `w_inv`, the output `y` (row
    /// stride `ldy` f32).
    #[allow(clippy::too_many_arguments)]
    pub fn fold_args(
        &self,
        p: u64,
        k: usize,
        n_out: usize,
        n_tok: usize,
        xinv: u64,
        w_inv: f32,
        y: u64,
        ldy: usize,
    ) -> crate::KArgs {
        crate::KArgs::new()
            .ptr(p)
            .int(self.chains as usize)
            .int(k / 256)
            .int(n_out)
            .int(n_tok)
            .ptr(xinv)
            .f32(w_inv)
            .ptr(y)
            .int(ldy)
    }
}

/// Threads per block of `act_h16` (matvec_h16.cu): one thread per 32-value unit.
pub const ACT_H16_THREADS: u32 = 128;
/// Threads per block of the fused `*_h16` element-wise kernels (elementwise.cu): one block per
/// token, one thread per 32-value unit.
const EWH_THREADS: u32 = 1024;

/// The weight layouts of the f16 route's matmuls (`muser_cuda::q4h`, `muser_cuda::q6h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HWeights {
    Q4H,
    Q6H,
}

impl Registry {
    /// The f16 route's matmul of `n_tok` tokens over a Q4H or Q6H matrix of `n_out` rows
    /// (`mvh_*_s*`, matvec_h16.cu): the kernel — its chain count S, which is part of the numbers (each output
    /// is S chains of super-blocks added in order) and so a function of the matrix alone — and
    /// the launch: S warps per 16-row group, one block row per 8 tokens. S from the prototype's
    /// measurements (docs/receipts/cuda-hmma-prototype.txt, one token): 4 where the matrix has
    /// at least 400 row groups (FFN 27.8 / 31.6 µs vs 33.3 / 34.0 with 8), 8 from 128 (Q: 8.6 vs
    /// 9.9 µs), 16 below (K/V: 5.2 vs 6.4 µs with 8); 2 from 1024 groups (FFN gate / up, the output
    /// projection: 28.75 vs 30.49 µs at S = 4 on the H200; `MUSER_CUDA_H16_WIDE_S=4` keeps 4).
    /// `k`: the matrix's inputs (the one-token activation stage's size, `mvh_xsmem_smem`).
    pub fn mvh_plan(
        &self,
        w: HWeights,
        n_out: usize,
        k: usize,
        n_tok: usize,
    ) -> (Kernel, crate::launch::Dims) {
        self.h16_plan(w, n_out, k, n_tok, false)
    }

    /// [`Registry::mvh_plan`] for prefill: the `mmh_*` kernels, 32 tokens per block row (4 groups
    /// of 8 per warp; the prototype's best), the same chain count S for the matrix — so the
    /// same bits per output as `mvh_*`.
    pub fn mmh_plan(
        &self,
        w: HWeights,
        n_out: usize,
        n_tok: usize,
    ) -> (Kernel, crate::launch::Dims) {
        self.h16_plan(w, n_out, 0, n_tok, true)
    }

    /// [`Registry::mvh_plan`] for prefill on shared-memory tiles: the `mmt_*` kernels
    /// (mmt_h16.cu), 128 rows × 64 tokens per block of 8 warps, the same chain count S — so the
    /// same bits per output as `mvh_*` — with `MmtShape::smem` bytes of dynamic shared memory;
    /// with `MmtShape::Wg` the `mmw_*` kernels (mmw_h16.cu), which read the activations in
    /// natural order ([`Registry::mmt_natural`]).
    pub fn mmt_plan(
        &self,
        w: HWeights,
        n_out: usize,
        n_tok: usize,
    ) -> (Kernel, crate::launch::Dims) {
        use Kernel::*;
        if self.mmt_natural(n_out) {
            let kernels = match w {
                HWeights::Q4H => [MmwQ4hS2, MmwQ4hS4, MmwQ4hS8, MmwQ4hS16],
                HWeights::Q6H => [MmwQ6hS2, MmwQ6hS4, MmwQ6hS8, MmwQ6hS16],
            };
            let (s, i) = self.h16_chains(n_out);
            return (kernels[i], self.mmw_dims(w, n_out, n_tok, s, false));
        }
        // `Wg` below its matrices' size: the `mmt_*` kernels as compiled, `W8`'s.
        let shape = match self.mmt {
            MmtShape::Wg => MmtShape::W8,
            s => s,
        };
        let kernels = match w {
            HWeights::Q4H => [MmtQ4hS2, MmtQ4hS4, MmtQ4hS8, MmtQ4hS16],
            HWeights::Q6H => [MmtQ6hS2, MmtQ6hS4, MmtQ6hS8, MmtQ6hS16],
        };
        let dims = crate::launch::Dims {
            grid: (
                ((n_out / 16) as u32).div_ceil(MMT_GROUPS),
                (n_tok as u32).div_ceil(MMT_TOK),
                1,
            ),
            block: MMT_THREADS / shape.of(w).params().0,
            smem: shape.smem(w) as u32,
        };
        (kernels[self.h16_chains(n_out).1], dims)
    }

    /// The chain count S of a matrix of `n_out` rows (part of its numbers) and its index in the
    /// kernel lists: `h16_wide_s` (2) from 1024 row groups, `h16_mid_s` (4) from 400,
    /// `h16_narrow_s` (8) from 128, 16 below.
    pub fn h16_chains(&self, n_out: usize) -> (u32, usize) {
        let s = match n_out / 16 {
            1024.. => self.h16.h16_wide_s,
            400.. => self.h16.h16_mid_s,
            128.. => self.h16.h16_narrow_s,
            _ => 16,
        };
        (s, s.trailing_zeros() as usize - 1)
    }

    /// Warps of a one-token f16 launch of `s` chains per matrix: `s`, or `s / 2` with
    /// `MUSER_CUDA_MVH_PAIR=1` (two chains per warp; every chain count is even).
    pub fn mvh_warps(&self, s: u32) -> u32 {
        if self.h16.mvh_pair {
            s / 2
        } else {
            s
        }
    }

    /// Dynamic shared memory of a one-token f16 launch of `warps` chains over `n_tok` tokens
    /// with `MUSER_CUDA_MVH_XSTAGE=1` (matvec_h16.cu's MVH_XSTAGE: per warp two stages of
    /// min(n_tok, 8) tokens × 544 bytes — a piece's 512 activation bytes and its sums); 0
    /// without it.
    pub fn mvh_xstage_smem(&self, warps: u32, n_tok: usize) -> usize {
        if !self.h16.mvh_xstage {
            return 0;
        }
        warps as usize * 2 * n_tok.min(8) * 544
    }

    /// Dynamic shared memory of a one-token f16 decode launch over `k` inputs with
    /// `MUSER_CUDA_MVH_XSMEM=1` (matvec_h16.cu `XsmemWait`: the token's k f16 activations, then
    /// its sums, `SUM_WORDS` words per super-block: Q4H 4, Q6H 8); 0 without it or for more
    /// than one token.
    pub fn mvh_xsmem_smem(&self, w: HWeights, k: usize, n_tok: usize) -> usize {
        if !self.h16.mvh_xsmem || n_tok != 1 {
            return 0;
        }
        xsmem_bytes(w, k)
    }

    /// Dynamic shared memory of a decode matmul block of `s` warps over format `w`: the bulk-copy
    /// ring, `s` warps × D' stages × the piece's bytes (matvec_h16.cu `mvh_bulk_stages`: D' =
    /// `mvh_bulk`, fewer where the block would pass 200 KiB, at least 2); 0 without the ring.
    pub fn mvh_bulk_smem(&self, w: HWeights, s: u32) -> usize {
        if self.h16.mvh_bulk == 0 {
            return 0;
        }
        let pb: usize = match w {
            HWeights::Q4H => crate::q4h::bytes(16, 256, self.h16.q4h_scales),
            HWeights::Q6H => crate::q6h::bytes(16, 256, self.h16.q6h_scales),
        };
        let s = s as usize;
        let cap = 200 * 1024 / (s * pb);
        let d = if (self.h16.mvh_bulk as usize) < cap {
            self.h16.mvh_bulk as usize
        } else {
            cap.max(2)
        };
        s * d * pb
    }

    fn h16_plan(
        &self,
        w: HWeights,
        n_out: usize,
        k: usize,
        n_tok: usize,
        prefill: bool,
    ) -> (Kernel, crate::launch::Dims) {
        use Kernel::*;
        let groups = (n_out / 16) as u32;
        let (s, i) = self.h16_chains(n_out);
        let kernels = match (w, prefill) {
            (HWeights::Q4H, false) => [MvhQ4hS2, MvhQ4hS4, MvhQ4hS8, MvhQ4hS16],
            (HWeights::Q6H, false) => [MvhQ6hS2, MvhQ6hS4, MvhQ6hS8, MvhQ6hS16],
            (HWeights::Q4H, true) => [MmhQ4hS2, MmhQ4hS4, MmhQ4hS8, MmhQ4hS16],
            (HWeights::Q6H, true) => [MmhQ6hS2, MmhQ6hS4, MmhQ6hS8, MmhQ6hS16],
        };
        let per_block = if prefill { 32 } else { 8 };
        let dims = crate::launch::Dims {
            grid: (groups, (n_tok as u32).div_ceil(per_block), 1),
            block: if prefill {
                32 * s
            } else {
                self.mvh_warps(s) * 32
            },
            smem: if prefill {
                0
            } else {
                (self.mvh_bulk_smem(w, s)
                    + self.mvh_xstage_smem(s, n_tok)
                    + self.mvh_xsmem_smem(w, k, n_tok)) as u32
            },
        };
        (kernels[i], dims)
    }

    /// [`Registry::mvh_plan`]'s launch as thread-block clusters where `MUSER_CUDA_MVH_CLUSTER=1`
    /// has a twin for its kernel (the one-token kernels of S = 8 / 16: matvec_h16.cu's
    /// `mvh_*_s8_c2` / `_s16_c4`, the same bits; `=16`: the S = 16 ones only): the twin, its
    /// dims (C blocks of S / C warps per row group along x) and the cluster size C. None
    /// without the switch or a twin.
    pub fn mvh_cluster_plan(
        &self,
        kernel: Kernel,
        dims: crate::launch::Dims,
    ) -> Option<(Kernel, crate::launch::Dims, u32)> {
        if !self.h16.mvh_cluster {
            return None;
        }
        let (twin, c) = cluster_twin_from(kernel, self.h16.mvh_cluster_min_s)?;
        Some((twin, cluster_dims(dims, c), c))
    }

    /// The split warpgroup tiles for `n_tok` tokens over a matrix of `n_out` rows, where they
    /// apply (`MUSER_CUDA_MMW_SPLIT=1` with `MmtShape::Wg`, from 128 row groups to below
    /// `mmw_min`); the caller runs the matrix alone, so the scratch is free.
    pub fn mmw_split_plan(&self, w: HWeights, n_out: usize, n_tok: usize) -> Option<MmwSplit> {
        use Kernel::*;
        let groups = n_out / 16;
        if !(self.mmw_split && self.mmt == MmtShape::Wg)
            || groups < 128
            || groups >= self.mmw_min as usize
        {
            return None;
        }
        // Below 1024 row groups S is 4, 8 or 16 (`h16_chains`).
        let s = self.h16_chains(n_out).0;
        let kernel = match (w, s) {
            (HWeights::Q4H, 4) => MmwsQ4hS4,
            (HWeights::Q4H, 8) => MmwsQ4hS8,
            (HWeights::Q4H, _) => MmwsQ4hS16,
            (HWeights::Q6H, 4) => MmwsQ6hS4,
            (HWeights::Q6H, 8) => MmwsQ6hS8,
            (HWeights::Q6H, _) => MmwsQ6hS16,
        };
        let outputs = n_tok * n_out;
        Some(MmwSplit {
            kernel,
            dims: self.mmw_dims(w, n_out, n_tok, s, true),
            chains: s,
            fold_dims: crate::launch::Dims {
                grid: ((outputs as u32).div_ceil(256), 1, 1),
                block: 256,
                smem: 0,
            },
            scratch_floats: s as usize * outputs,
        })
    }

    /// The launch of the warpgroup tiles (`mmw_*`, `mmws_*`) of `s` chains: 4 · WG row groups
    /// (WG from [`Registry::mmw_wg_of`]) × 128 tokens per block, `s` blocks along z when split
    /// (one chain each), the stages' shared memory.
    fn mmw_dims(
        &self,
        w: HWeights,
        n_out: usize,
        n_tok: usize,
        s: u32,
        split: bool,
    ) -> crate::launch::Dims {
        let wg = self.mmw_wg_of(w, s);
        crate::launch::Dims {
            grid: (
                ((n_out / 16) as u32).div_ceil(4 * wg),
                (n_tok as u32).div_ceil(MMW_TOK),
                if split { s } else { 1 },
            ),
            block: 128 * wg,
            smem: self.mmt.smem(w) as u32,
        }
    }

    /// Warpgroups per block of the warpgroup tile of format `w` at `s` chains (mmw_h16.cu's
    /// `mmw_wg_of`, compiled from the same switches): `mmw_wg`, but at most 2 where
    /// `MUSER_CUDA_MVH_ACC2` gives the tile's super-blocks a second 64-float accumulator
    /// (formats_h16.cuh `mvh_acc2_on`; at 3 ptxas serializes their wgmma: session 46).
    pub fn mmw_wg_of(&self, w: HWeights, s: u32) -> u32 {
        if self.h16.acc2_on(w, s) {
            self.mmw_wg.min(2)
        } else {
            self.mmw_wg
        }
    }

    /// Scratch f32 values the split tiles need for up to `n_tok` tokens over any of `n_outs`
    /// (0 when they do not apply).
    pub fn mmw_split_floats(&self, n_outs: impl Iterator<Item = usize>, n_tok: usize) -> usize {
        n_outs
            .filter_map(|n| self.mmw_split_plan(HWeights::Q4H, n, n_tok))
            .map(|p| p.scratch_floats)
            .max()
            .unwrap_or(0)
    }

    /// Whether the prefill tiles of a matrix of `n_out` rows ([`Registry::mmt_plan`]) are the
    /// warpgroup tiles, which read the activations in natural order:
    /// then `h16_natural` ([`Registry::h16_natural_dims`]) turns the f16 fragments XH into a
    /// buffer XN of the same size first, and the tile kernel takes XN where the others take XH.
    pub fn mmt_natural(&self, n_out: usize) -> bool {
        self.mmt == MmtShape::Wg && n_out / 16 >= self.mmw_min as usize
    }

    /// The launch of `h16_natural` (mmw_h16.cu) over `n_tok` rows of `k` f16 values: one thread
    /// per 64-value chunk.
    pub fn h16_natural_dims(n_tok: usize, k: usize) -> crate::launch::Dims {
        crate::launch::Dims {
            grid: (((n_tok * k / 64) as u32).div_ceil(256).max(1), 1, 1),
            block: 256,
            smem: 0,
        }
    }

    /// The launch of a fused element-wise f16 kernel (`*_h16`, elementwise.cu) over `n_tok`
    /// tokens: one block per token, one thread per 32-value unit.
    pub fn ewh_dims(n_tok: usize) -> crate::launch::Dims {
        crate::launch::Dims {
            grid: (1, n_tok as u32, 1),
            block: EWH_THREADS,
            smem: 0,
        }
    }

    /// The FFN's gate and up matmuls with their SwiGLU in one decode launch (`mvh_glu_*`,
    /// matvec_h16.cu) for `n_tok` tokens over two `w` matrices of `n_out` rows and `k` inputs: 2S warps per
    /// 16-row group (S from `h16_chains`, so the same bits as two `mvh_plan` launches and the
    /// swiglu kernel), one block row per 8 tokens (2S ≤ 32 warps: S ≤ 16). `None` for more
    /// than 8 tokens (prefill) or with the bulk-copy ring (`mvh_bulk`, which these kernels do
    /// not have). Arguments: Wg, Wu, n_out, K, XH, XSUM, XSUM16, XINV, gate's w_inv, up's
    /// w_inv, Y, ldy, n_tok, M (the row maxima cells).
    pub fn mvh_glu_plan(
        &self,
        w: HWeights,
        n_out: usize,
        k: usize,
        n_tok: usize,
    ) -> Option<(Kernel, crate::launch::Dims)> {
        use Kernel::*;
        if n_tok > 8 || self.h16.mvh_bulk != 0 {
            return None;
        }
        let s = self.h16_chains(n_out).0;
        let kernel = match (w, s) {
            (HWeights::Q4H, 2) => MvhGluQ4hS2,
            (HWeights::Q4H, 4) => MvhGluQ4hS4,
            (HWeights::Q4H, 8) => MvhGluQ4hS8,
            (HWeights::Q4H, _) => MvhGluQ4hS16,
            (HWeights::Q6H, 2) => MvhGluQ6hS2,
            (HWeights::Q6H, 4) => MvhGluQ6hS4,
            (HWeights::Q6H, 8) => MvhGluQ6hS8,
            (HWeights::Q6H, _) => MvhGluQ6hS16,
        };
        // The staged activations of 2S warps (MVH_XSTAGE) must fit beside the static parts
        // (at S = 16 and 8 tokens they would not: the two launches run instead).
        let smem = self.mvh_xstage_smem(2 * s, n_tok) + self.mvh_xsmem_smem(w, k, n_tok);
        if smem + MVH_STATIC_SMEM > crate::registry::SMEM_OPTIN_MAX {
            return None;
        }
        Some((
            kernel,
            crate::launch::Dims {
                grid: ((n_out / 16) as u32, (n_tok as u32).div_ceil(8), 1),
                block: 64 * self.mvh_warps(s),
                smem: smem as u32,
            },
        ))
    }

    /// The launch of `act_h16` over `n_tok` tokens of `k` values: one thread per 32-value unit,
    /// one block row per token.
    pub fn act_h16_dims(n_tok: usize, k: usize) -> crate::launch::Dims {
        crate::launch::Dims {
            grid: ((k as u32 / 32).div_ceil(ACT_H16_THREADS), n_tok as u32, 1),
            block: ACT_H16_THREADS,
            smem: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::SMEM_OPTIN_MAX;

    /// Shared memory of an H200 SM (sm_90: 228 KiB), of which the driver reserves 1 KiB per
    /// resident block.
    const SM_SMEM: usize = 228 * 1024;

    /// The one-token activation stage at Muse Glimmer's widest input (FFN down, 19968) leaves
    /// the decode kernels their blocks per SM: Q4H 5 blocks of 4 warps (S = 4, 96 registers),
    /// Q6H 4 (124), each with its static partial sums and the driver's 1 KiB.
    #[test]
    fn the_activation_stage_keeps_the_blocks_per_sm() {
        assert_eq!(xsmem_bytes(HWeights::Q4H, 19968), 2 * 19968 + 78 * 16);
        assert_eq!(xsmem_bytes(HWeights::Q6H, 6656), 2 * 6656 + 26 * 32);
        let part = 4 * 32 * 4 * 4; // mvh_finish's partial sums at S = 4
        for (w, blocks) in [(HWeights::Q4H, 5), (HWeights::Q6H, 4)] {
            let per_block = xsmem_bytes(w, 19968) + part + 1024;
            assert!(
                blocks * per_block <= SM_SMEM,
                "{w:?}: {blocks} x {per_block}"
            );
            assert!(xsmem_bytes(w, 19968) + MVH_STATIC_SMEM <= SMEM_OPTIN_MAX);
        }
    }

    /// Every cluster twin is its kernel's symbol with `_c{C}`, in the same module, at 4 warps
    /// per block; the other kernels have none; the dims keep the warps per row group.
    #[test]
    fn cluster_twins_split_a_row_group_into_four_warp_blocks() {
        let mut twins = 0;
        for &k in Kernel::ALL {
            let Some((twin, c)) = mvh_cluster_twin(k) else {
                continue;
            };
            twins += 1;
            assert_eq!(twin.symbol(), format!("{}_c{c}", k.symbol()));
            assert_eq!(twin.module(), k.module());
            let s: u32 = k
                .symbol()
                .rsplit("_s")
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap();
            assert_eq!(s / c, 4, "{}", k.symbol());
            let d = cluster_dims(
                crate::launch::Dims {
                    grid: (256, 2, 1),
                    block: 32 * s,
                    smem: 0,
                },
                c,
            );
            assert_eq!((d.grid, d.block * c), ((256 * c, 2, 1), 32 * s));
        }
        assert_eq!(twins, 4);
        // MUSER_CUDA_MVH_CLUSTER=16: the S = 16 twins only.
        assert_eq!(cluster_twin_from(Kernel::MvhQ4hS8, 8).map(|t| t.1), Some(2));
        assert!(cluster_twin_from(Kernel::MvhQ4hS8, 16).is_none());
        assert!(cluster_twin_from(Kernel::MvhQ6hS8, 16).is_none());
        assert_eq!(
            cluster_twin_from(Kernel::MvhQ4hS16, 16).map(|t| t.1),
            Some(4)
        );
        assert_eq!(
            cluster_twin_from(Kernel::MvhQ6hS16, 16).map(|t| t.1),
            Some(4)
        );
        assert!(mvh_cluster_twin(Kernel::MvhQ4hS4).is_none());
        assert!(mvh_cluster_twin(Kernel::MmhQ4hS8).is_none());
    }

    #[test]
    fn every_tile_shape_fits_its_blocks_per_sm() {
        for shape in [MmtShape::W8, MmtShape::W8B2, MmtShape::W4B2, MmtShape::Wg] {
            for w in [HWeights::Q4H, HWeights::Q6H] {
                let (smem, blocks) = (shape.smem(w), shape.blocks_per_sm(w));
                assert!(
                    smem <= SMEM_OPTIN_MAX,
                    "{shape:?} {w:?}: {smem} bytes per block"
                );
                assert!(
                    blocks * (smem + 1024) <= SM_SMEM,
                    "{shape:?} {w:?}: {blocks} blocks of {smem} bytes do not fit an SM"
                );
            }
        }
        // The measured default: Q4H 3 stages of 55 KiB, Q6H 3 of 63 KiB.
        assert_eq!(MmtShape::W8.smem(HWeights::Q4H), 3 * (8 * 2560 + 64 * 544));
        assert_eq!(
            MmtShape::W4B2.smem(HWeights::Q6H),
            MmtShape::W8.smem(HWeights::Q6H)
        );
    }
}
