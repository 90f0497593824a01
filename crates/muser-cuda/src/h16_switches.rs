//! The f16 matmul chains' compile-time switches (`H16Switches`: `MUSER_CUDA_H16_*_S`,
//! `MUSER_CUDA_MVH_*`), read once per registry: the chain counts S (part of the numbers, used by
//! the launch plans in crate::plan_h16) and the decode kernels' load schedule (the same bits),
//! which reach matvec_h16.cu and probes_h16.cu as `-D`s. Each field says its measured figure.

use crate::error::CudaError;
use crate::registry::env_choice;

/// The f16 matmul chains' compile-time switches (`MUSER_CUDA_H16_*_S`, `MUSER_CUDA_MVH_*`;
/// docs/cuda.md's switch table): the chain counts S, part of every output's numbers and shared
/// by decode and prefill, and the decode kernels' load schedule, which keeps the same bits.
/// Read once per registry; the schedule reaches matvec_h16.cu and probes_h16.cu as `-D`s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct H16Switches {
    /// The chain count S of the f16 route's matrices with at least 1024 row groups (FFN gate /
    /// up, the output projection): 2 (route id `mv=mvh-s2`; the default since 2026-12-02, H200:
    /// tg128 110.81 vs 109.49 tok/s, FFN gate / up one token 28.75 vs 30.49 µs), or 4
    /// (`MUSER_CUDA_H16_WIDE_S=4`, `mv=mvh`). Every kernel of the route takes S from
    /// `h16_chains`, so decode and prefill keep the same bits — but S is part of the numbers.
    pub h16_wide_s: u32,
    /// The chain count S of the f16 route's matrices with 400 to 1023 row groups (the attention
    /// output, FFN down): 4 (default) or 8 (`MUSER_CUDA_H16_MID_S`), and with 128 to 399 (Q,
    /// the attention gate): 8 (default), 4 or 16 (`MUSER_CUDA_H16_NARROW_S`; 4 added in session
    /// 42 — Muse Glimmer's Q and gate then run one wave beside K and V, 6.5 pieces per chain
    /// instead of the S = 8 chains' 4, 4, 3, 3, 3, 3, 3, 3 — and measured slower: tg128 148.31 /
    /// 148.15 vs 149.44 / 149.36). Part of the numbers
    /// as `h16_wide_s`; A/B switches for the decode matmuls' chain length (the prototype's
    /// figures at 98 registers: docs/receipts/cuda-hmma-prototype.txt).
    pub h16_mid_s: u32,
    pub h16_narrow_s: u32,
    /// Stages of the f16 decode matmuls' bulk-copy weight ring (`-DMVH_BULK`,
    /// `MUSER_CUDA_MVH_BULK=0|2|3|4`; 0 = the next piece in registers, matvec_h16.cu). The same
    /// pieces in the same order, so the same bits.
    pub mvh_bulk: u32,
    /// The f16 matmuls (`mvh_*`, `mmh_*`) request their first weight piece before the PDL wait
    /// (`-DMVH_EARLY`, `MUSER_CUDA_MVH_EARLY=0|1`, default 1: H200, full forge, session 27, f16
    /// tg128 126.47 vs 125.70 / 125.84 off, with the fused FFN launch 127.88 vs 127.32); N > 1
    /// (2, 3, 4, 6, 8) also prefetches each chain's next N − 1 pieces into L2 before the wait:
    /// not kept (12-layer full-width forge, session 27, tg128 431.40 / 432.87 / 421.04 at
    /// N = 2 / 4 / 8 vs 436.57 at 1). The same loads, so the same bits. Session 42: 0 still
    /// slower (tg128 147.02 / 147.49 vs 149.76 / 149.73).
    pub mvh_early: u32,
    /// With `MVH_EARLY=1`, the one-token chains on `MVH_PP`'s two register sets also request
    /// their second piece before the PDL wait (`-DMVH_EARLY_PP`, `MUSER_CUDA_MVH_EARLY_PP=0|1`,
    /// default 0; mvh_chain.cuh): two pieces in flight during the previous kernel's tail. Why:
    /// session 41's PC sampling — the Q4H S = 4 / 8 launches wait on their pieces' first bytes.
    /// The same loads and MMAs in the same order: the same bits. Session 42, full forge: tg128
    /// 145.27 / 146.43 vs 149.65 / 150.85 without (−2.9%; `mvh_q4h_s4` 1077 vs 946 µs per token
    /// in the graph) — off. Refused without `MVH_EARLY=1` and `MVH_PP`, or with
    /// `MVH_PP_SETS=3` or `MVH_AHEAD=2`.
    pub mvh_early_pp: bool,
    /// Weight pieces each f16 matmul chain (`mvh_*`, `mmh_*`, the fused FFN launch) holds
    /// ahead in registers (`-DMVH_AHEAD`, `MUSER_CUDA_MVH_AHEAD=1|2`, default 1). The same loads
    /// in the same order, so the same bits. 2 not kept (H200, full forge, session 28: tg128
    /// 128.03 / 128.77 vs 128.26 / 127.84; `mvh_persist` graph 103.30 vs 102.99 µs per layer).
    pub mvh_ahead: u32,
    /// The f16 matmul chains prefetch the next piece's activations into L1 (`-DMVH_XPF`,
    /// `MUSER_CUDA_MVH_XPF=0|1`, default 0). A hint: the same bits. Not kept (H200, session 28,
    /// `mvh_persist` graph 128.27 vs 102.89 µs per layer).
    pub mvh_xpf: u32,
    /// L1 cache hints of the f16 matmul chains' global loads (`-DMVH_WHINT`,
    /// `MUSER_CUDA_MVH_WHINT=0|1|2`, default 2; formats_h16.cuh): 1 the weights
    /// `L1::no_allocate`, 2 also the activations and sums `L1::evict_last`. The same values,
    /// so the same bits. 2 kept (H200, full forge, session 29: tg128 132.63 / 132.56 vs 128.34
    /// / 128.71 without hints; `mvh_persist` graph 100.40 (1: 100.28) vs 102.96 µs per layer).
    pub mvh_whint: u32,
    /// One-token f16 matmul chains stage each piece's activations and sums in shared memory
    /// one piece ahead by `cp.async` (`-DMVH_XSTAGE`, `MUSER_CUDA_MVH_XSTAGE=0|1`, default 0;
    /// not with `MUSER_CUDA_MVH_BULK`; [`Registry::mvh_xstage_smem`] bytes per launch). The
    /// same values into the same MMAs, so the same bits. Not kept (H200, full forge, session
    /// 29: tg128 113.65 / 114.21 vs 128.34 / 128.71; `mvh_persist` graph 123.18 vs 102.96 µs
    /// per layer).
    pub mvh_xstage: bool,
    /// A register ceiling for the one-token f16 kernels (`-DMVH_MAXREG`,
    /// `MUSER_CUDA_MVH_MAXREG=0|80|96`, default 0 = none; matvec_h16.cu): more warps per SM for
    /// the schedulers to switch between, what does not fit spilled (96: Q6H from 16 warps per SM
    /// to 20; 80: Q4H and Q6H to 24). Register allocation only: the same bits. Measured in
    /// session 30 and not kept: tg128 119.8 (96) and 97.4 (80) vs 132.1 tok/s.
    pub mvh_maxreg: u32,
    /// One-token f16 chains alternate two register sets instead of copying the next piece's
    /// registers at the end of every piece (`-DMVH_PP`, `MUSER_CUDA_MVH_PP=0|1|2|3`, default 2;
    /// matvec_h16.cu): the copy waits on the next piece's loads, so the piece after it is
    /// requested only once they land (static SASS of `mvh_q4h_s2`: 26 moves per piece at the
    /// loop's end; with it 96 registers, no spills). The same pieces in the same order: the same
    /// bits. Not with `MUSER_CUDA_MVH_AHEAD=2`, `_XSTAGE=1` or `_BULK` (refused). Measured in
    /// session 30 and not kept: tg128 129.2 / 128.9 vs 132.1 / 132.1 tok/s (with the
    /// warps-per-SM launch bounds, which alone cost ~50 instructions per piece: see
    /// `mvh_wbounds`). 2, the default since session 38: only in the kernels whose warps per SM
    /// its registers do not lower (all but Q4H's of S ≤ 4, which keep 0's SASS), with the plain
    /// bounds — static SASS `mvh_q4h_s8` 295 instructions per piece against 322, the Q6H
    /// kernels 380 against 418. Measured in session 38 (full forge, same call,
    /// `docs/receipts/cuda-session38.txt`; `kernels_h16` passed, tiny logits unchanged at chunk
    /// 512 and 1): tg128 145.11 / 145.14 vs 142.90 / 143.67, at depth 0 / 2048 / 8192 / 32768
    /// 146.31 / 142.23 / 141.31 / 136.68 vs 144.47 / 140.02 / 138.68 / 134.21 (+1.3 to +1.9%),
    /// pp512 level. Its conflicts below name `MUSER_CUDA_MVH_PP=0` for the switches that need
    /// the plain schedule. 3, the default since session 39: also Q4H's S = 4 kernels, whose
    /// Muse Glimmer grids hold at most 16 warps per SM anyway (`mvh_pp_sets` has the why);
    /// static SASS `mvh_q4h_s4` 226 instructions per piece at 99 registers against 274 at 96,
    /// the other kernels' SASS as under 2. Measured in session 39 (full forge, same call,
    /// `docs/receipts/cuda-session39.txt`; `kernels_h16` passed, tiny logits unchanged at chunk
    /// 512 and 1, `cuda_route` f16 passed): tg128 145.63 / 145.23 vs 144.73 / 144.17; at depth
    /// 0 / 2048 / 8192 / 32768 148.62 / 143.99 / 142.78 / 138.32 vs 146.68 / 142.41 / 141.57 /
    /// 136.70 (+0.9 to +1.3%), pp512 level; the in-graph account of `mvh_q4h_s4` 946 µs per
    /// token against 1090 (3.2 TB/s against 2.8).
    pub mvh_pp: u32,
    /// One-token f16 kernels of S chains run on S/2 warps, each chaining two of them into two
    /// accumulators with the pieces' MMAs interleaved (`-DMVH_PAIR`, `MUSER_CUDA_MVH_PAIR=0|1`,
    /// default 0; matvec_h16.cu `mvh_chain_pair`): two independent MMA chains per warp where
    /// session 29's ncu found each warp issuing one instruction every 6–14 cycles. The same
    /// chains and fold as S warps: the same bits as without it at the same S — so its A/B runs
    /// with the chain counts doubled (`MUSER_CUDA_H16_WIDE_S=4`, `_MID_S=8`, `_NARROW_S=16`:
    /// the warps per row group of the defaults, a numbers change shared with prefill). Static
    /// SASS: Q4H 170 registers (96 without), Q6H 249–255 (124). Only with the plain schedule
    /// (refused with `MUSER_CUDA_MVH_EARLY` > 1, `_AHEAD=2`, `_BULK`, `_XSTAGE`, `_PP`, `_XPF`).
    /// Measured slower at the same S (session 31, `mvh_persist` S = 4: graph 111.7 vs 100.4 µs
    /// per layer; `kernels_h16` passed with it), so 0; with the chain counts doubled also
    /// slower (session 37, full forge tg128: 121.0 / 121.4 vs 144.2; the doubled counts alone
    /// 126.2 / 126.4, `_WIDE_S=4` with it 134.5 / 133.7).
    pub mvh_pair: bool,
    /// One-token launches of the f16 decode kernels stage the token's whole activation row and
    /// sums in dynamic shared memory once, after the PDL wait, and their chains read them there
    /// (`-DMVH_XSMEM`, `MUSER_CUDA_MVH_XSMEM=0|1`, default 0; matvec_h16.cu `XsmemWait`;
    /// [`Registry::mvh_xsmem_smem`] bytes: 2K + K/64 or K/32, 40.6 KB at K = 19968). Why: the
    /// activation reads cost ~7 µs of `mvh_persist`'s ~100 µs per layer (session 29: stream
    /// 74.2 → 81.7 with them) and each piece's first MMA waits on its own (session 31's SASS);
    /// `MVH_XSTAGE` staged per piece and lost to its synchronisation. The same values into the
    /// same MMAs: the same bits. Static SASS: Q4H 96 registers at S = 2 and 4 (its bounds keep
    /// the warps per SM), Q6H 128. Not with `_BULK`, `_XSTAGE`, `_PP`, `_XPF` or `_PAIR`
    /// (refused). Measured in session 32 and not kept: `mvh_persist` graph 104.84 vs 100.15 µs
    /// per layer, full forge tg128 126.64 / 126.23 vs 131.78 / 129.77.
    pub mvh_xsmem: bool,
    /// Fewer instructions per piece in the f16 matmul kernels (`-DMVH_LEAN`,
    /// `MUSER_CUDA_MVH_LEAN=0|1|2`, default 1 since session 33; matvec_h16.cu, formats_h16.cuh): 1 writes the
    /// scale pairs' broadcasts so that ptxas folds them into the `HFMA2` operands (`.H0_H0` /
    /// `.H1_H1`) instead of a `PRMT` each — in the decode kernels and the prefill tiles (the
    /// registry passes the define to `mmt_*` / `mmw_*` too); 2 also lets the decode kernels'
    /// activation and sum loads of the MMA's unused token columns (lanes past the launch's
    /// tokens) read the last token's instead of being zeroed and predicated off — those
    /// columns' outputs are never stored, and an MMA's output column depends on its own B
    /// column only. The same values into the valid columns: the same bits. Static SASS (2):
    /// `mvh_q4h_s4` 496 → 448 instructions (Q4H 96 → 102 registers), `mvh_glu_q4h_s2` 768 → 712,
    /// `mmt_q4h_s4`'s super-block step 526 → 494. Measured in session 32 (2, full forge, same
    /// call; `kernels_h16` passed, tiny logits unchanged): tg128 129.84 vs 132.69, 2% slower at
    /// every depth, pp512 level (4420.9 vs 4410.1) — not kept. Session 33 (1, full forge, same
    /// call, `docs/receipts/cuda-session33.txt`): tg128 136.43 vs 132.83 (+2.7%), at depth
    /// 2048 / 8192 / 32768 128.55 / 126.85 / 118.80 vs 125.77 / 124.64 / 116.50, pp512 4404.4
    /// vs 4388.8; tiny logits unchanged at chunk 512 and 1 — so 1 is the default. Per piece
    /// (the chain loop's static SASS, `mvh_q4h_s4`): 0 303 instructions, 1 274, 2 251 at 102
    /// registers — and 2 capped at 96 registers (`MVH_MAXREG=96`, which keeps 20 warps per SM)
    /// 283, the compiler rematerialising the activation addresses: 2's loss was its registers.
    /// 3 (session 39; mvh_chain.cuh `mvh_lean_loads`): 2's loads only in Q4H's one-token
    /// kernels of S ≥ 4, which under `MUSER_CUDA_MVH_PP=3` run two register sets at 16 warps
    /// per SM anyway — static SASS per two pieces `mvh_q4h_s4` 415 instructions at 96
    /// registers (1: 452 at 99), `mvh_q4h_s8` / `_s16` 510 at 124 (589 at 98; the same 16 warps
    /// per SM at 256 / 512 threads); every other kernel's SASS is 1's (FFN gate / up would take
    /// 102 registers under 2, the Q6H loops grow). Measured in session 39 and **the default
    /// since** (full forge, `docs/receipts/cuda-session39.txt`; `kernels_h16` passed, tiny
    /// logits unchanged at chunk 512 and 1): tg128 alternating 147.75 / 148.30 and 148.79 /
    /// 149.24 vs 145.51 / 146.56 and 147.35 / 148.07 (+0.8 to +1.5%), at depth 8192 143.11 /
    /// 143.62 vs 142.17 / 142.24; one four-depth pass level (148.27 / 144.12 / 142.12 /
    /// 137.80 vs 147.42 / 144.17 / 142.37 / 137.59). A small gain: fewer instructions per piece
    /// on the launches that were furthest from the copy bandwidth.
    pub mvh_lean: u32,
    /// One-token f16 chains touch the next piece's activation sectors (one 4-byte load per
    /// lane, lanes 0..15, its value read a piece later) while they work on the current piece
    /// (`-DMVH_XTOUCH`, `MUSER_CUDA_MVH_XTOUCH=0|1`, default 0; mvh_chain.cuh): the piece's
    /// first MMA then finds its activations in L1 instead of waiting on the SM's first read of
    /// them (session 30's PC sampling: 43.5% of `mvh_glu_q4h_s2`'s stall samples on that MMA;
    /// `MUSER_CUDA_MVH_XPF`'s `prefetch.global.L1` is a `CCTL` in the SASS and lost). The same
    /// values into the same MMAs: the same bits. Static SASS: Q4H 96 registers, 3–6 more
    /// instructions per piece. The register schedules only, plain or `_PP` (refused with
    /// `_BULK`, `_XSTAGE`, `_PAIR`, `_XSMEM`). Measured in session 38 and not kept: tg128 139.84
    /// / 140.10 vs 142.90 / 143.67.
    pub mvh_xtouch: bool,
    /// The launch bounds of the one-token f16 kernels under `MUSER_CUDA_MVH_XSTAGE=1`, `_PP=1`
    /// or `_XSMEM=1` (`-DMVH_WBOUNDS`, `MUSER_CUDA_MVH_WBOUNDS=0|1`, default 1; mvh_chain.cuh):
    /// 1 the blocks per SM of the build without them (what their measured A/Bs ran), 0 the plain
    /// bounds. Why: static SASS (session 37) shows those bounds alone lengthen `mvh_q4h_s4`'s
    /// chain loop from 274 to 324 instructions at the same 96 registers; with 0, `XSMEM`'s
    /// shared-memory loop is 250 instructions at 100 registers (16 warps per SM instead of 20)
    /// against 276 at 96 with them, and `PP` runs 226 instructions per piece at 99 registers
    /// (the default: 274 at 96; `PP` with the bounds 298). Register allocation only: the same
    /// bits. 0 is refused without one of the three or with `_MAXREG` (it would change nothing).
    /// Measured in session 38 and not kept: `_PP=1` with 0 tg128 139.04 / 138.75, `_XSMEM=1`
    /// with 0 140.86 / 141.10, vs 142.90 / 143.67 (16 warps per SM lose to 20 on Q4H S ≤ 4).
    pub mvh_wbounds: bool,
    /// The register sets `MUSER_CUDA_MVH_PP=3` rotates in Q4H's one-token kernels of S ≥ 4
    /// (`-DMVH_PP_SETS`, `MUSER_CUDA_MVH_PP_SETS=2|3`, default 2; mvh_chain.cuh): 3 keeps two
    /// pieces in flight per warp, those kernels bounded to 16 warps per SM (128 registers — their
    /// Muse Glimmer grids hold at most 16). Why: session 38's in-graph account puts those
    /// launches (the attention output, FFN down in the Q4_K layers, Q and the gate) at ~2.8 TB/s
    /// against ~3.8 for FFN gate / up and the Q6H FFN down, whose 3.5 KB pieces on the same grid
    /// keep ~40% more bytes in flight per warp. The same pieces in the same order: the same
    /// bits. Static SASS: `mvh_q4h_s4` 276 instructions per piece (PP=3 alone: 226), `mvh_q4h_s8`
    /// 276 (295), 128 registers with an 8-byte spill; the other kernels' SASS unchanged. Only
    /// with `_PP=3` (the default), not with `_XTOUCH` (refused). Built in session 38; measured
    /// in session 39 and not kept (full forge, same call, tiny logits unchanged): tg128
    /// 144.06 / 142.26 against `_PP=3` alone 145.63 / 145.23 — the spill and the longer piece
    /// cost more than the second piece in flight buys.
    pub mvh_pp_sets: u32,
    /// How Q4H matrices store their sub-block factors (`-DQ4H_U8`,
    /// `MUSER_CUDA_Q4H_SCALES=auto|f16|u8`; muser_cuda::q4h::Scales, formats_h16.cuh): u8 keeps
    /// the 6-bit scales and mins as bytes with one f16 pair per row and super-block — 7.5% fewer
    /// bytes per Q4H matrix — and rebuilds the f16 layout's factors exactly (the repack checks
    /// every block: the same bits). `auto` (the default) is u8 here; the engine resolves it per
    /// model (f16 where a matrix cannot take u8) and builds its registry with that
    /// ([`crate::Registry::build_modules_with`]). Session 41, H200, full forge, same calls: tg128
    /// 151.06 / 151.56 vs 149.98 / 149.44 tok/s, at depth 2048 / 8192 / 32768 148.22 / 146.66 /
    /// 141.52 vs 145.72 / 144.65 / 139.03; pp512 there 3987.5 / 3785.7 / 2996.7 vs 4078.7 /
    /// 3799.9 / 3012.4 (the tiles' extra unpacking); FFN gate / up 2109 vs 2280 µs per token.
    pub q4h_scales: crate::q4h::Scales,
    /// How Q6H matrices store their sub-block scales (`-DQ6H_U8`,
    /// `MUSER_CUDA_Q6H_SCALES=auto|f16|u8`, auto = f16; muser_cuda::q6h, formats_h16.cuh): u8
    /// keeps Q6_K's signed 8-bit scales as bytes (biased by 128) with one f16 d' per row and
    /// super-block — 6.25% fewer bytes per Q6H matrix (the Q6_K FFN down, V, the output head) —
    /// and rebuilds the f16 layout's `dsc` exactly (repack-checked: the same bits). Static SASS:
    /// `mvh_q6h_s4` 121 registers and 1144 instructions against 126 and 984 (the same 16 warps
    /// per SM). Session 41, H200, full forge, alternating twice: tg128 148.42 / 149.68 with u8
    /// against 149.30 / 150.01 (the Q6H kernels' extra unpacking costs more than the bytes save;
    /// tiny logits the same) — so f16.
    pub q6h_scales: crate::q6h::Scales,
    /// The one-token matmuls of S = 8 / 16 chains as thread-block clusters of 2 / 4 blocks of 4
    /// warps (`MUSER_CUDA_MVH_CLUSTER=0|1`, default 0; matvec_h16.cu `mvh_cluster_body`,
    /// `Registry::mvh_cluster_plan`): the same chains, loads and fold order — the same bits —
    /// on 128-thread blocks (static SASS: `mvh_q4h_s8_c2`'s loop 538 instructions against
    /// `mvh_q4h_s8`'s 585, both 126 registers), and a block whose chains end early leaves
    /// early. Only with the register schedule (not `MVH_BULK`, `MVH_XSTAGE`, `MVH_XSMEM`,
    /// `MVH_PAIR`: refused). Session 42 (H200, full forge; tiny logits the same bits at chunk 512
    /// and 1): tg128 146.94 / 149.17 / 147.47 / 148.98 against 150.66 / 149.96 / 150.33 /
    /// 150.41 (−1.4%), `mvh_q4h_s8_c2` 643 µs per token in the graph against 583 — off.
    /// `MUSER_CUDA_MVH_CLUSTER=16` (session 44, not yet run): the S = 16 launches only (Muse
    /// Glimmer's K and V, 16 row groups: one 16-warp block per row group, at ~126 registers a
    /// whole SM each, beside Q's and the gate's 8-warp blocks in the parallel branches) — the
    /// S = 8 twins were what lost in session 42; 4-warp blocks pack beside Q / gate's.
    pub mvh_cluster: bool,
    /// The smallest chain count the clusters take: 8 with `MUSER_CUDA_MVH_CLUSTER=1`, 16 with
    /// `=16`.
    pub mvh_cluster_min_s: u32,
    /// An experiment, not a route: each piece's MMAs of the kernels built on `mvh_piece` into
    /// two accumulators, the even k-steps and the odd ones, added at the piece's end (`-DMVH_ACC2`,
    /// `MUSER_CUDA_MVH_ACC2=0|1|2|3`, default 0: 1 every format, 2 Q4H's kernels only; mvh_chain.cuh,
    /// and probes_h16.cu's `mvh_noact`; since session 45 also the prefill tiles' modules, the
    /// same order: formats_h16.cuh): ~9 dependent MMAs per piece instead of 17. It changes the
    /// numbers, and that every kernel still agrees is unchecked on the device, so the engine
    /// refuses it unless `MUSER_CUDA_MVH_ACC2_TIMING=1` asks for a timing run; `mvh_persist`
    /// and `mvh_bench` time it (docs/decode-budget.md item 3). Static SASS
    /// (session 44): `mvh_q4h_s4` 126 registers (106), `_s8` 128 (126), `mvh_glu_q4h_s2` 96
    /// (96), `mvh_q6h_s4` 128 (126) — the same warps per SM. Not with `MVH_PAIR` (refused).
    /// Session 45 (`scripts/device/acc2-experiment.sh`, two rounds): `mvh_persist`'s graph
    /// 94.68 → 78.75 µs per layer; `mvh_bench --decode`, one copy: Q4H FFN down 26.8 → 22.2 µs,
    /// the attention output 7.95 → 7.15, Q / gate 8.8 → 8.55, FFN gate / up 23.2 → 22.55 —
    /// but Q6H FFN down 34.1 → 38.8 and the output head's quarter 91.6 → 98.3 (hence `=2`).
    /// `=3` (session 47): Q4H at S = 4 chains only — the two that gained most, Muse Glimmer's
    /// attention output and Q4_K FFN down (the S of a matrix is part of its numbers, so every
    /// kernel of it agrees) — leaving FFN gate / up's warpgroup tiles at 3 warpgroups. Under
    /// any `=N` the warpgroup tiles it splits run at 2 (`Registry::mmw_wg_of`: at 3 ptxas
    /// serializes their wgmma, session 46).
    pub mvh_acc2: u32,
}

impl H16Switches {
    /// The environment variables `from_env` reads (the engine refuses them on other routes).
    pub const ENV: [&'static str; 22] = [
        "MUSER_CUDA_H16_WIDE_S",
        "MUSER_CUDA_H16_MID_S",
        "MUSER_CUDA_H16_NARROW_S",
        "MUSER_CUDA_MVH_BULK",
        "MUSER_CUDA_MVH_EARLY",
        "MUSER_CUDA_MVH_AHEAD",
        "MUSER_CUDA_MVH_XPF",
        "MUSER_CUDA_MVH_WHINT",
        "MUSER_CUDA_MVH_XSTAGE",
        "MUSER_CUDA_MVH_MAXREG",
        "MUSER_CUDA_MVH_PP",
        "MUSER_CUDA_MVH_PP_SETS",
        "MUSER_CUDA_MVH_PAIR",
        "MUSER_CUDA_MVH_XSMEM",
        "MUSER_CUDA_MVH_LEAN",
        "MUSER_CUDA_MVH_XTOUCH",
        "MUSER_CUDA_MVH_WBOUNDS",
        "MUSER_CUDA_Q4H_SCALES",
        "MUSER_CUDA_Q6H_SCALES",
        "MUSER_CUDA_MVH_EARLY_PP",
        "MUSER_CUDA_MVH_CLUSTER",
        "MUSER_CUDA_MVH_ACC2",
    ];

    pub(crate) fn from_env() -> Result<H16Switches, CudaError> {
        let h16_wide_s = env_choice("MUSER_CUDA_H16_WIDE_S", 2, &[2, 4])?;
        let mvh_bulk = env_choice("MUSER_CUDA_MVH_BULK", 0, &[0, 2, 3, 4])?;
        let mvh_early = env_choice("MUSER_CUDA_MVH_EARLY", 1, &[0, 1, 2, 3, 4, 6, 8])?;
        let mvh_ahead = env_choice("MUSER_CUDA_MVH_AHEAD", 1, &[1, 2])?;
        let mvh_xpf = env_choice("MUSER_CUDA_MVH_XPF", 0, &[0, 1])?;
        let mvh_whint = env_choice("MUSER_CUDA_MVH_WHINT", 2, &[0, 1, 2])?;
        let mvh_xstage = env_choice("MUSER_CUDA_MVH_XSTAGE", 0, &[0, 1])? == 1;
        if mvh_xstage && mvh_bulk > 0 {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_MVH_XSTAGE=1 and MUSER_CUDA_MVH_BULK: both stage the one-token \
                 matmuls' operands in the same dynamic shared memory; set one"
                    .into(),
            ));
        }
        let h16_mid_s = env_choice("MUSER_CUDA_H16_MID_S", 4, &[4, 8])?;
        let h16_narrow_s = env_choice("MUSER_CUDA_H16_NARROW_S", 8, &[4, 8, 16])?;
        let mvh_maxreg = env_choice("MUSER_CUDA_MVH_MAXREG", 0, &[0, 80, 96])?;
        let mvh_pp = env_choice("MUSER_CUDA_MVH_PP", 3, &[0, 1, 2, 3])?;
        if mvh_pp > 0 && (mvh_ahead != 1 || mvh_xstage || mvh_bulk > 0) {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_MVH_PP=1|2|3 (3 the default) alternates the one-token chains' two \
                 register sets; it does not combine with MUSER_CUDA_MVH_AHEAD=2, \
                 MUSER_CUDA_MVH_XSTAGE=1 or MUSER_CUDA_MVH_BULK: set MUSER_CUDA_MVH_PP=0 with them"
                    .into(),
            ));
        }
        let mvh_pair = env_choice("MUSER_CUDA_MVH_PAIR", 0, &[0, 1])? == 1;
        if mvh_pair
            && (mvh_early > 1
                || mvh_ahead != 1
                || mvh_bulk > 0
                || mvh_xstage
                || mvh_pp > 0
                || mvh_xpf != 0)
        {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_MVH_PAIR=1 runs two chains per warp on the plain one-piece-ahead \
                 schedule; it does not combine with MUSER_CUDA_MVH_EARLY > 1, \
                 MUSER_CUDA_MVH_AHEAD=2, MUSER_CUDA_MVH_BULK, MUSER_CUDA_MVH_XSTAGE=1, \
                 MUSER_CUDA_MVH_PP=1|2|3 (3 the default: set MUSER_CUDA_MVH_PP=0) or \
                 MUSER_CUDA_MVH_XPF=1"
                    .into(),
            ));
        }
        let mvh_xsmem = env_choice("MUSER_CUDA_MVH_XSMEM", 0, &[0, 1])? == 1;
        if mvh_xsmem && (mvh_bulk > 0 || mvh_xstage || mvh_pp > 0 || mvh_xpf != 0 || mvh_pair) {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_MVH_XSMEM=1 stages the one-token activations for the plain register \
                 schedule; it does not combine with MUSER_CUDA_MVH_BULK, MUSER_CUDA_MVH_XSTAGE=1, \
                 MUSER_CUDA_MVH_PP=1|2|3 (3 the default: set MUSER_CUDA_MVH_PP=0), \
                 MUSER_CUDA_MVH_XPF=1 or MUSER_CUDA_MVH_PAIR=1"
                    .into(),
            ));
        }
        let mvh_lean = env_choice("MUSER_CUDA_MVH_LEAN", 3, &[0, 1, 2, 3])?;
        let mvh_xtouch = env_choice("MUSER_CUDA_MVH_XTOUCH", 0, &[0, 1])? == 1;
        if mvh_xtouch && (mvh_bulk > 0 || mvh_xstage || mvh_pair || mvh_xsmem) {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_MVH_XTOUCH=1 touches the next piece's activations in the register \
                 schedules (plain or MUSER_CUDA_MVH_PP=1); it does not combine with \
                 MUSER_CUDA_MVH_BULK, MUSER_CUDA_MVH_XSTAGE=1, MUSER_CUDA_MVH_PAIR=1 or \
                 MUSER_CUDA_MVH_XSMEM=1"
                    .into(),
            ));
        }
        let mvh_pp_sets = env_choice("MUSER_CUDA_MVH_PP_SETS", 2, &[2, 3])?;
        if mvh_pp_sets == 3 && (mvh_pp != 3 || mvh_xtouch) {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_MVH_PP_SETS=3 rotates the register sets of MUSER_CUDA_MVH_PP=3 (set \
                 it too); it does not combine with MUSER_CUDA_MVH_XTOUCH=1"
                    .into(),
            ));
        }
        let mvh_wbounds = env_choice("MUSER_CUDA_MVH_WBOUNDS", 1, &[0, 1])? == 1;
        if !mvh_wbounds && (mvh_maxreg > 0 || !(mvh_xstage || mvh_pp == 1 || mvh_xsmem)) {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_MVH_WBOUNDS=0 gives MUSER_CUDA_MVH_XSTAGE=1, MUSER_CUDA_MVH_PP=1 or \
                 MUSER_CUDA_MVH_XSMEM=1 the plain launch bounds; without one of them, or under \
                 MUSER_CUDA_MVH_MAXREG (whose bounds take precedence), it changes nothing"
                    .into(),
            ));
        }
        let mvh_early_pp = env_choice("MUSER_CUDA_MVH_EARLY_PP", 0, &[0, 1])? == 1;
        if mvh_early_pp && (mvh_early != 1 || mvh_pp == 0 || mvh_pp_sets == 3 || mvh_ahead != 1) {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_MVH_EARLY_PP=1 requests MUSER_CUDA_MVH_PP's second register set \
                 before the PDL wait: it needs MUSER_CUDA_MVH_EARLY=1 and MUSER_CUDA_MVH_PP=1|2|3 \
                 (3 the default), not MUSER_CUDA_MVH_PP_SETS=3 or MUSER_CUDA_MVH_AHEAD=2"
                    .into(),
            ));
        }
        let cluster = env_choice("MUSER_CUDA_MVH_CLUSTER", 0, &[0, 1, 16])?;
        let (mvh_cluster, mvh_cluster_min_s) = (cluster != 0, if cluster == 16 { 16 } else { 8 });
        if mvh_cluster && (mvh_bulk > 0 || mvh_xstage || mvh_xsmem || mvh_pair) {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_MVH_CLUSTER=1|16 runs the S = 8 / 16 chains on the register schedule; \
                 it does not combine with MUSER_CUDA_MVH_BULK, MUSER_CUDA_MVH_XSTAGE=1, \
                 MUSER_CUDA_MVH_XSMEM=1 or MUSER_CUDA_MVH_PAIR=1"
                    .into(),
            ));
        }
        let mvh_acc2 = env_choice("MUSER_CUDA_MVH_ACC2", 0, &[0, 1, 2, 3])?;
        if mvh_acc2 != 0 && mvh_pair {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_MVH_ACC2=1|2|3 splits the plain piece's accumulators; \
                 MUSER_CUDA_MVH_PAIR=1 runs its own pieces: set one"
                    .into(),
            ));
        }
        let q4h_scales = crate::q4h::scales_from_env()?.unwrap_or(crate::q4h::Scales::U8);
        let q6h_scales = crate::q6h::scales_from_env()?.unwrap_or(crate::q6h::Scales::F16);
        Ok(H16Switches {
            h16_wide_s,
            h16_mid_s,
            h16_narrow_s,
            mvh_bulk,
            mvh_early,
            mvh_early_pp,
            mvh_ahead,
            mvh_xpf,
            mvh_whint,
            mvh_xstage,
            mvh_maxreg,
            mvh_pp,
            mvh_pair,
            mvh_xsmem,
            mvh_lean,
            mvh_xtouch,
            mvh_wbounds,
            mvh_pp_sets,
            q4h_scales,
            q6h_scales,
            mvh_cluster,
            mvh_cluster_min_s,
            mvh_acc2,
        })
    }

    /// Whether `MUSER_CUDA_MVH_ACC2` splits the accumulators of format `w`'s f16 matmuls at `s`
    /// chains: the host's twin of formats_h16.cuh `mvh_acc2_on`, which every f16 matmul module
    /// compiles from the same `-DMVH_ACC2` (`Registry::mmw_wg_of` sizes the tiles by it).
    pub fn acc2_on(&self, w: crate::plan_h16::HWeights, s: u32) -> bool {
        use crate::plan_h16::HWeights::Q4H;
        match self.mvh_acc2 {
            1 => true,
            2 => w == Q4H,
            3 => w == Q4H && s == 4,
            _ => false,
        }
    }

    /// The route id's `mv=` label: `mvh` (`-sS` for the wide chain count), then a suffix for
    /// every switch away from its default — beside the defaults in `from_env`, so a default
    /// that moves keeps its label short.
    pub fn label(&self) -> String {
        let mut l = match self.h16_wide_s {
            4 => "mvh".to_string(),
            s => format!("mvh-s{s}"),
        };
        if (self.h16_mid_s, self.h16_narrow_s) != (4, 8) {
            l += &format!("-m{}n{}", self.h16_mid_s, self.h16_narrow_s);
        }
        l += &match (self.mvh_bulk, self.mvh_early) {
            (0, 0) => "-late".to_string(),
            (0, 1) => String::new(),
            (0, n) => format!("-early{n}"),
            (d, _) => format!("-bulk{d}"),
        };
        if self.mvh_early_pp {
            l += "-epp";
        }
        if self.mvh_cluster {
            l += if self.mvh_cluster_min_s == 16 {
                "-cl16"
            } else {
                "-cl"
            };
        }
        match self.mvh_acc2 {
            0 => {}
            1 => l += "-acc2",
            2 => l += "-acc2q4",
            _ => l += "-acc2q4s4",
        }
        if self.mvh_ahead != 1 {
            l += &format!("-ahead{}", self.mvh_ahead);
        }
        if self.mvh_xpf == 1 {
            l += "-xpf";
        }
        if self.mvh_whint != 2 {
            l += &format!("-whint{}", self.mvh_whint);
        }
        if self.mvh_xstage {
            l += "-xstage";
        }
        if self.mvh_maxreg != 0 {
            l += &format!("-maxreg{}", self.mvh_maxreg);
        }
        match self.mvh_pp {
            3 => {}
            1 => l += "-pp",
            n => l += &format!("-pp{n}"),
        }
        if self.mvh_pair {
            l += "-pair";
        }
        if self.mvh_xsmem {
            l += "-xsmem";
        }
        if self.mvh_lean != 3 {
            l += &format!("-lean{}", self.mvh_lean);
        }
        if self.mvh_xtouch {
            l += "-xtouch";
        }
        if !self.mvh_wbounds {
            l += "-wb0";
        }
        if self.mvh_pp_sets != 2 {
            l += &format!("-sets{}", self.mvh_pp_sets);
        }
        if self.q4h_scales == crate::q4h::Scales::F16 {
            l += "-q4f16";
        }
        if self.q6h_scales == crate::q6h::Scales::U8 {
            l += "-q6u8";
        }
        l
    }

    /// The `-D` options of matvec_h16.cu and probes_h16.cu (`MVH_LEAN` also reaches the
    /// prefill tiles' modules: `Registry::new`).
    pub(crate) fn defines(&self) -> Vec<String> {
        vec![
            format!("-DMVH_BULK={}", self.mvh_bulk),
            format!("-DMVH_EARLY={}", self.mvh_early),
            format!("-DMVH_EARLY_PP={}", u8::from(self.mvh_early_pp)),
            format!("-DMVH_AHEAD={}", self.mvh_ahead),
            format!("-DMVH_XPF={}", self.mvh_xpf),
            format!("-DMVH_WHINT={}", self.mvh_whint),
            format!("-DMVH_XSTAGE={}", u8::from(self.mvh_xstage)),
            format!("-DMVH_MAXREG={}", self.mvh_maxreg),
            format!("-DMVH_PP={}", self.mvh_pp),
            format!("-DMVH_PAIR={}", u8::from(self.mvh_pair)),
            format!("-DMVH_XSMEM={}", u8::from(self.mvh_xsmem)),
            format!("-DMVH_LEAN={}", self.mvh_lean),
            format!("-DMVH_XTOUCH={}", u8::from(self.mvh_xtouch)),
            format!("-DMVH_WBOUNDS={}", u8::from(self.mvh_wbounds)),
            format!("-DMVH_PP_SETS={}", self.mvh_pp_sets),
        ]
        .into_iter()
        .chain(self.scale_defines())
        // Only where on: the default modules' compile line (and so the route's kernel
        // identity) stays what the receipts measured.
        .chain((self.mvh_acc2 != 0).then(|| format!("-DMVH_ACC2={}", self.mvh_acc2)))
        .collect()
    }

    /// `-DQ4H_U8`, `-DQ6H_U8`: the decode kernels', the probes' and the prefill tiles' readers.
    pub(crate) fn scale_defines(&self) -> [String; 2] {
        use crate::scales::Scales::U8;
        [
            format!("-DQ4H_U8={}", u8::from(self.q4h_scales == U8)),
            format!("-DQ6H_U8={}", u8::from(self.q6h_scales == U8)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The switches at their defaults, or None (and a loud skip) where the environment sets
    /// one of them.
    fn defaults() -> Option<H16Switches> {
        for name in H16Switches::ENV {
            if std::env::var_os(name).is_some() {
                eprintln!("skipping: {name} is set in this environment");
                return None;
            }
        }
        Some(H16Switches::from_env().expect("defaults"))
    }

    /// The defaults (no `MUSER_CUDA_*` set, as in CI) label as the receipts' `mv=mvh-s2`, and
    /// each switch away from its default adds its suffix.
    #[test]
    fn switch_labels_name_what_moved_from_the_defaults() {
        let Some(d) = defaults() else { return };
        assert_eq!(d.label(), "mvh-s2");
        for define in [
            "-DMVH_WHINT=2",
            "-DMVH_PP=3",
            "-DMVH_PP_SETS=2",
            "-DMVH_LEAN=3",
            "-DMVH_PAIR=0",
            "-DMVH_XTOUCH=0",
            "-DMVH_WBOUNDS=1",
            "-DQ4H_U8=1",
            "-DQ6H_U8=0",
            "-DMVH_EARLY_PP=0",
        ] {
            assert!(
                d.defines().contains(&define.to_string()),
                "defaults: {define}"
            );
        }
        assert!(
            !d.defines().iter().any(|x| x.starts_with("-DMVH_ACC2")),
            "the experiment's define only where on"
        );
        // Each switch set away from the defaults: its label and a define it must pass.
        let cases = [
            (
                H16Switches {
                    mvh_whint: 0,
                    mvh_pp: 1,
                    mvh_maxreg: 96,
                    ..d
                },
                "mvh-s2-whint0-maxreg96-pp",
                "-DMVH_PP=1",
            ),
            (
                H16Switches {
                    q4h_scales: crate::q4h::Scales::F16,
                    ..d
                },
                "mvh-s2-q4f16",
                "-DQ4H_U8=0",
            ),
            (
                H16Switches {
                    mvh_early_pp: true,
                    ..d
                },
                "mvh-s2-epp",
                "-DMVH_EARLY_PP=1",
            ),
            (
                H16Switches { mvh_acc2: 1, ..d },
                "mvh-s2-acc2",
                "-DMVH_ACC2=1",
            ),
            (
                H16Switches { mvh_acc2: 2, ..d },
                "mvh-s2-acc2q4",
                "-DMVH_ACC2=2",
            ),
            (
                H16Switches { mvh_acc2: 3, ..d },
                "mvh-s2-acc2q4s4",
                "-DMVH_ACC2=3",
            ),
            (
                H16Switches {
                    q6h_scales: crate::q6h::Scales::U8,
                    ..d
                },
                "mvh-s2-q6u8",
                "-DQ6H_U8=1",
            ),
            (
                H16Switches {
                    mvh_pair: true,
                    mvh_pp: 0,
                    h16_wide_s: 4,
                    ..d
                },
                "mvh-pp0-pair",
                "-DMVH_PAIR=1",
            ),
            (
                H16Switches {
                    mvh_xsmem: true,
                    mvh_pp: 0,
                    ..d
                },
                "mvh-s2-pp0-xsmem",
                "-DMVH_XSMEM=1",
            ),
            (
                H16Switches { mvh_lean: 2, ..d },
                "mvh-s2-lean2",
                "-DMVH_LEAN=2",
            ),
            (
                H16Switches { mvh_lean: 1, ..d },
                "mvh-s2-lean1",
                "-DMVH_LEAN=1",
            ),
            (
                H16Switches { mvh_lean: 0, ..d },
                "mvh-s2-lean0",
                "-DMVH_LEAN=0",
            ),
            (
                H16Switches {
                    mvh_xtouch: true,
                    ..d
                },
                "mvh-s2-xtouch",
                "-DMVH_XTOUCH=1",
            ),
            (
                H16Switches {
                    mvh_xsmem: true,
                    mvh_pp: 0,
                    mvh_wbounds: false,
                    ..d
                },
                "mvh-s2-pp0-xsmem-wb0",
                "-DMVH_WBOUNDS=0",
            ),
            (H16Switches { mvh_pp: 0, ..d }, "mvh-s2-pp0", "-DMVH_PP=0"),
            (H16Switches { mvh_pp: 2, ..d }, "mvh-s2-pp2", "-DMVH_PP=2"),
            (
                H16Switches {
                    mvh_pp_sets: 3,
                    ..d
                },
                "mvh-s2-sets3",
                "-DMVH_PP_SETS=3",
            ),
        ];
        for (sw, label, define) in cases {
            assert_eq!(sw.label(), label);
            assert!(
                sw.defines().contains(&define.to_string()),
                "{label}: {define}"
            );
        }
        // Switches the launch plan reads, not the compiler: a label, the same defines.
        for (sw, label) in [
            (
                H16Switches {
                    mvh_cluster: true,
                    ..d
                },
                "mvh-s2-cl",
            ),
            (
                H16Switches {
                    mvh_cluster: true,
                    mvh_cluster_min_s: 16,
                    ..d
                },
                "mvh-s2-cl16",
            ),
            (
                H16Switches {
                    h16_narrow_s: 4,
                    ..d
                },
                "mvh-s2-m4n4",
            ),
        ] {
            assert_eq!(sw.label(), label);
            assert_eq!(sw.defines(), d.defines(), "{label}");
        }
    }

    /// The two-accumulator experiment's reach per (format, chains), as formats_h16.cuh's
    /// `mvh_acc2_on` has it: off by default; `=1` every matmul, `=2` Q4H's, `=3` Q4H's at S = 4
    /// (Muse Glimmer's attention output and Q4_K FFN down) and no other.
    #[test]
    fn acc2_reaches_the_formats_and_chain_counts_it_names() {
        use crate::plan_h16::HWeights::{Q4H, Q6H};
        let Some(d) = defaults() else { return };
        let on = |mode: u32| {
            let sw = H16Switches {
                mvh_acc2: mode,
                ..d
            };
            let mut v = Vec::new();
            for w in [Q4H, Q6H] {
                for s in [2, 4, 8, 16] {
                    if sw.acc2_on(w, s) {
                        v.push((w, s));
                    }
                }
            }
            v
        };
        assert!(on(0).is_empty());
        assert_eq!(on(1).len(), 8);
        assert_eq!(on(2), [(Q4H, 2), (Q4H, 4), (Q4H, 8), (Q4H, 16)]);
        assert_eq!(on(3), [(Q4H, 4)]);
    }
}
