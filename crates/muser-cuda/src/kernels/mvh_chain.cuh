// mvh_chain.cuh — the f16 decode matmul's chain: one piece of a row group's super-blocks on the
// tensor cores (mvh_piece), a warp's chain of pieces in order (mvh_chain, and the two-chain
// MVH_PAIR form), the fold of a block's S chains in warp order (mvh_finish), and the compile-time
// switches of the chain's loads (MVH_EARLY, MVH_AHEAD, MVH_PP, MVH_PP_SETS, MVH_PAIR, MVH_XSMEM,
// MVH_XPF, MVH_XTOUCH, MVH_XSTAGE, MVH_MAXREG, MVH_WBOUNDS). Concatenated by compile.rs after formats_h16.cuh and before
// matvec_h16.cu (module MatvecH16) and probes_h16.cu (ProbesH16), which hold the kernels. The
// numbers each output gets are fixed here: its MMA sequence depends on (K, S) only.

// The pieces each decode chain requests before the PDL wait (-DMVH_EARLY, `MUSER_CUDA_MVH_EARLY`,
// 1 by default): 0 none, 1 its first piece into registers, N > 1 also its next N − 1 pieces into
// L2 (cp.async.bulk.prefetch, lane 0) — so a launch waiting on the previous kernel's tail keeps
// the memory busy with its own weights. The same loads, so the same bits. The bulk ring always
// requests its first D − 1 pieces early.
#ifndef MVH_EARLY
#define MVH_EARLY 1
#endif
// With MVH_EARLY = 1, one-token chains on MVH_PP's two register sets also request their second
// piece before the PDL wait, into the second set (-DMVH_EARLY_PP, `MUSER_CUDA_MVH_EARLY_PP=0|1`,
// default 0): two pieces in flight while the previous kernel finishes instead of one. Why
// (session 41, PC sampling): the Q4H S = 4 / 8 launches — ~3.25 pieces per warp at S = 8 —
// spend most of their stalls waiting on a piece's first bytes. The same pieces, loads and order
// of MMAs: the same bits. Q4H's kernels only (static SASS: `mvh_q4h_s4` 104 registers, 736
// instructions against 106 / 712; `_s8` 122 / 792 against 126 / 776; Q6H's would take 132
// registers). Not with MVH_PP_SETS=3 (its own loop; the host refuses it). Session 42 (full
// forge): slower — tg128 145.27 / 146.43 vs 149.65 / 150.85; mvh_q4h_s4 1077 µs per token in
// the graph against 946 — so 0.
#ifndef MVH_EARLY_PP
#define MVH_EARLY_PP 0
#endif

// The pieces each decode chain holds ahead in registers (-DMVH_AHEAD, `MUSER_CUDA_MVH_AHEAD`,
// 1 by default, or 2): more bytes in flight per warp, so the last warps of a launch still pull
// memory at a useful rate. The same loads in the same order, so the same bits. Measured neutral
// (session 28: tg128 128.03 / 128.77 vs 128.26 / 127.84), so 1.
#ifndef MVH_AHEAD
#define MVH_AHEAD 1
#endif

// One-token chains alternate two register sets instead of copying the next piece's registers
// into the current ones at the end of every piece (-DMVH_PP, `MUSER_CUDA_MVH_PP=0|1|2|3`; the
// host passes 3 by default since session 39 (2 in session 38), this file's fallback 0 is the
// plain schedule; with
// MVH_AHEAD = 1 and without MVH_XSTAGE). The copy (26 moves per Q4H piece in the SASS of
// mvh_q4h_s2) reads the registers the piece's loads write, so each piece ends waiting for the
// next piece's bytes and the piece after it is requested only then; alternating, it is requested
// as soon as the current piece's MMAs are issued. The same pieces in the same order, so the
// same bits. MVH_PP=2: only in the kernels whose warps per SM its registers do not lower — every
// kernel but Q4H's of S <= 4 (20 warps per SM at 96 registers; PP needs 99), which keep the
// plain schedule — always with the plain launch bounds (session 37's static SASS: PP then runs
// mvh_q4h_s8 at 295 instructions per piece against 322, mvh_q6h_s2 / _s4 at 380 against 418;
// session 38: tg128 +1.3 to +1.9% at every depth, the same logits).
#ifndef MVH_PP
#define MVH_PP 0
#endif
// MVH_PP=3 (session 38, from the in-graph account of the matmuls: the Q4H `s4` / `s8` launches
// of Muse Glimmer — the attention output, FFN down in the Q4_K layers, Q and the gate; 416 and
// 256 row groups — run at ~2.8 TB/s while FFN gate / up and the Q6H FFN down run at ~3.8): PP
// also in Q4H's S = 4 kernels, whose grids of 416 blocks of 4 warps put at most 4 blocks (16
// warps) on an SM anyway, so PP's 99 registers (16 warps per SM) cost them no warps; only the
// S = 2 kernels (FFN gate / up: 1248 row groups, two waves at 20 warps per SM) keep the plain
// schedule. Plain launch bounds, as 2. Session 39: tg128 +0.9 to +1.3% over 2 at every depth,
// the same logits; the default since.
// Whether a one-token chain of format F and S chains runs MVH_PP's register sets.
template <class F, int S>
__device__ constexpr bool mvh_pp_on() {
    return MVH_PP == 1 || (MVH_PP == 2 && !(F::SM_WARPS == 20 && S <= 4)) ||
           (MVH_PP == 3 && !(F::SM_WARPS == 20 && S <= 2));
}
// The register sets MVH_PP rotates (-DMVH_PP_SETS, `MUSER_CUDA_MVH_PP_SETS=2|3`, default 2): 3
// keeps two pieces in flight per warp instead of one — the next two pieces are requested into
// the sets the last two were computed from. Why: the mid-sized Q4H launches (above) hold at most
// ~13–16 warps per SM, each with one 2.5 KB piece in flight — ~40 KB per SM, which at the ~2.8
// TB/s they reach means ~1.9 µs per round trip, where the copy bandwidth would need ~60 KB —
// while the Q6H FFN down, whose pieces are 3.5 KB on the same grid, moves ~36% more bytes per µs. (MVH_AHEAD=2 meant the same but
// its register copies waited on the newest piece: one piece in flight, measured neutral.) The
// same pieces in the same order into the same accumulators: the same bits. Q4H's kernels only
// (the Q6H ones would need 166 registers: 12 warps per SM, two waves for FFN down's 416 blocks),
// bounded to 16 warps per SM (128 registers; unbounded, `mvh_q4h_s4` takes 130 — static SASS).
// Only with MVH_PP=3 and without MVH_XTOUCH (the host refuses otherwise). Session 39: slower
// than MVH_PP=3 alone (tg128 144.06 / 142.26 vs 145.63 / 145.23), so 2.
#ifndef MVH_PP_SETS
#define MVH_PP_SETS 2
#endif
#if MVH_PP_SETS == 3 && (MVH_PP != 3 || MVH_XTOUCH)
#error "MVH_PP_SETS=3 rotates MVH_PP=3's register sets, without MVH_XTOUCH"
#endif
// (MVH_EARLY_PP, above.)
#if MVH_EARLY_PP && (MVH_EARLY != 1 || MVH_PP == 0 || MVH_PP_SETS == 3 || MVH_AHEAD != 1)
#error "MVH_EARLY_PP takes MVH_EARLY=1 with MVH_PP's two register sets (MVH_AHEAD=1)"
#endif
template <class F, int S>
__device__ constexpr bool mvh_pp3_on() {
    return MVH_PP_SETS == 3 && F::SM_WARPS == 20 && mvh_pp_on<F, S>();
}
// MVH_LEAN=3 (session 39): MVH_LEAN=2's loads of the unused token columns (mvh_piece's `LN`:
// read the last token's values, not zeroed and predicated off) only in Q4H's one-token kernels
// of S >= 4 — which run MVH_PP's register sets at 16 warps per SM under MVH_PP=3 — and LEAN=1's
// everywhere else. Why: LEAN=2 lost in session 32 (−2%) when its six more registers took
// mvh_q4h_s4 from 20 warps per SM to 16; under MVH_PP=3 that kernel has 99 registers and 16
// warps anyway, and with LEAN=2's loads static SASS gives it 96 registers and 415 instructions
// per two pieces (452 without), mvh_q4h_s8 / _s16 124 registers (the same 16 warps per SM at
// 256 / 512 threads) and 510 (589) — while FFN gate / up (S = 2) would go from 96 registers to
// 102 (fewer warps) and the Q6H kernels' loops grow (mvh_q6h_s4 856 against 761). The same
// values into the valid columns: the same bits. Not a kernel of the prefill tiles (for their
// modules LEAN=3 is LEAN=1: formats_h16.cuh reads only whether MVH_LEAN is set).
template <class F, int S, int TG>
__device__ constexpr bool mvh_lean_loads() {
    return MVH_LEAN == 2 || (MVH_LEAN == 3 && TG == 1 && F::SM_WARPS == 20 && S >= 4);
}

// One-token kernels of S chains (their name's sN: their numbers) run on S/2 warps, warp w
// chaining both chain w and chain w + S/2 into two accumulators with the two pieces' MMAs
// interleaved, so each warp keeps two independent MMA chains in flight instead of one
// (-DMVH_PAIR, `MUSER_CUDA_MVH_PAIR=0|1`, default 0; mvh_chain_pair). The same chains, pieces,
// order and fold as S warps of one chain each: the same bits as without it. Only with the
// plain register schedule (MVH_EARLY <= 1, MVH_AHEAD = 1, no MVH_BULK / XSTAGE / PP / XPF).
#ifndef MVH_PAIR
#define MVH_PAIR 0
#endif
#if MVH_PAIR && (MVH_EARLY > 1 || MVH_AHEAD != 1 || MVH_BULK || MVH_XSTAGE || MVH_PP || MVH_XPF)
#error "MVH_PAIR takes the plain one-piece-ahead register schedule only"
#endif

// One-token launches (n_tok = 1) of the decode kernels (`mvh_*`, `mvh_glu_*`) copy the token's
// whole activation row and sums into dynamic shared memory once, after the PDL wait, and their
// chains read them there instead of from global memory at every piece (-DMVH_XSMEM,
// `MUSER_CUDA_MVH_XSMEM=0|1`, default 0): [K f16 activations][nsb · SUM_WORDS sum words], the
// host's `Registry::mvh_xsmem_smem` bytes (a launch given fewer traps). Launches of more tokens
// read global memory as without it. The same values into the same MMAs: the same bits. Not with
// MVH_BULK, MVH_XSTAGE, MVH_PP, MVH_XPF or MVH_PAIR.
#ifndef MVH_XSMEM
#define MVH_XSMEM 0
#endif
#if MVH_XSMEM && (MVH_BULK || MVH_XSTAGE || MVH_PP || MVH_XPF || MVH_PAIR)
#error "MVH_XSMEM takes the plain register schedule only"
#endif

// The next piece's activation fragments and sums prefetched into L1 when its weights are
// requested (-DMVH_XPF, `MUSER_CUDA_MVH_XPF=0|1`, default 0): the MMAs of a piece then wait on
// an L1 hit instead of an L2 round trip. A hint: the same loads, so the same bits. Measured
// slower (session 28, mvh_persist graph 128.3 vs 102.9 µs per layer), so 0.
#ifndef MVH_XPF
#define MVH_XPF 0
#endif

// One-token launches' chains touch the next piece's activations while they work on the current
// one (-DMVH_XTOUCH, `MUSER_CUDA_MVH_XTOUCH=0|1`, default 0): lanes 0..15 each load the first
// word of one 32-byte sector of the next piece's 512 activation bytes into one register that the
// chain folds (one XOR into a sink) only one piece later — so each piece's activation lines are
// already in L1 when its first MMA reads them, and nothing waits on the touch. (ptxas deletes a
// load whose value nothing reads, hence the sink: it reaches the accumulator only under
// `n_tok < 0`, which no launch has.) The sums (read once, late in the piece) are not touched.
// Why: session 30's PC sampling put 43.5% of `mvh_glu_q4h_s2`'s stall samples on a piece's first
// HMMA waiting on its activation load (the SM's first read of those lines), `MVH_XPF`'s
// `prefetch.global.L1` is a `CCTL.E.PF1` in the SASS and lost, and `MVH_XSMEM` paid a block
// barrier. The same values into the same MMAs: the same bits. One-token kernels' register
// schedules, plain or MVH_PP (not with MVH_BULK, MVH_XSTAGE, MVH_PAIR, MVH_XSMEM: the host
// refuses those). Plain launch bounds: the static SASS keeps Q4H at 96 registers with 3–6 more
// instructions per piece, where the warps-per-SM bounds of MVH_XSTAGE cost ~50 (ptxas then
// recomputes the activation addresses in the loop).
#ifndef MVH_XTOUCH
#define MVH_XTOUCH 0
#endif
// A 4-byte read with the activations' own hint (L1::evict_last).
__device__ __forceinline__ u32 touch_u32(const void* p) {
    u32 v;
    asm volatile("ld.global.nc.L1::evict_last.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

// One-token chains stage each piece's activations and sums in shared memory one piece ahead,
// by cp.async (-DMVH_XSTAGE, `MUSER_CUDA_MVH_XSTAGE=0|1`, default 0; not with MVH_BULK): the
// MMAs then read them from shared memory instead of waiting on a global round trip per load.
// Per warp [2 stages][min(n_tok, 8) tokens][XST_TOK bytes: the piece's 512 activation bytes,
// then its sums (16 or 32 bytes)] of dynamic shared memory (the host's
// `Registry::mvh_xstage_smem`). The same values into the same MMAs, so the same bits.
#ifndef MVH_XSTAGE
#define MVH_XSTAGE 0
#endif
#define XST_TOK 544
// Without MVH_MAXREG (below): with MVH_XSTAGE, MVH_PP or MVH_XSMEM the one-token kernels keep
// the warps per SM of their build without them (Q4H 20 at 96 registers, Q6H 16 at 124: the
// staging's address arithmetic or the second register set's live ranges would otherwise cost
// registers and blocks); without any of them the bounds are the plain ones (the production
// SASS). These bounds cost Q4H ~50 instructions per piece even at the same 96 registers
// (static SASS of mvh_q4h_s4's loop, session 37: 324 vs 274 — ptxas recomputes the activation
// addresses in the loop), so -DMVH_WBOUNDS=0 (`MUSER_CUDA_MVH_WBOUNDS=0`, default 1) gives those
// switches the plain bounds instead (XSMEM's shared-memory loop on mvh_q4h_s4: 250 instructions
// at 100 registers, 16 warps per SM, against 276 at 96 with the bounds; PP: 226 per piece at 99
// against 298, the default's 274). Register allocation only: the same bits.
#ifndef MVH_WBOUNDS
#define MVH_WBOUNDS 1
#endif
// A register ceiling for the one-token kernels (-DMVH_MAXREG, `MUSER_CUDA_MVH_MAXREG`, 0 = none,
// the default): the blocks per SM that leave each thread MVH_MAXREG registers, so a warp
// scheduler has more warps to switch between while each waits on its chain (96: Q6H from 124
// registers and 16 warps per SM to 20, Q4H unchanged; 80: both to 24). The compiler spills what
// does not fit (scripts/kernel-sass.py: 80 spills 60 bytes per thread on Q4H, 148 on Q6H).
// Register allocation only, so the same bits. Takes precedence over MVH_XSTAGE's bounds.
#ifndef MVH_MAXREG
#define MVH_MAXREG 0
#endif
#if MVH_MAXREG > 0
#define MVH_BOUNDS(THREADS, SM_WARPS) __launch_bounds__(THREADS, 65536 / (MVH_MAXREG * (THREADS)))
#elif (MVH_XSTAGE || MVH_PP == 1 || MVH_XSMEM) && MVH_WBOUNDS
#define MVH_BOUNDS(THREADS, SM_WARPS) \
    __launch_bounds__(THREADS, ((SM_WARPS) * 32 / (THREADS)) > 0 ? ((SM_WARPS) * 32 / (THREADS)) : 1)
#else
#define MVH_BOUNDS(THREADS, SM_WARPS) __launch_bounds__(THREADS)
#endif
// By tokens per warp (MVH_KERNEL's TG): one-token kernels as above, the prefill rows plain.
// MVH_PP_SETS=3 (with MVH_PP=3): the Q4H one-token kernels of 4 and more warps (mvh_pp3_on's) at
// 16 warps per SM, 128 registers; the others no minimum of blocks (0: the plain bounds' SASS,
// checked by static SASS — 1 would let ptxas give Q6H 142 registers) — not MVH_GLU_KERNEL's,
// which keep MVH_BOUNDS.
#if MVH_PP_SETS == 3 && MVH_MAXREG == 0
#define MVH_BOUNDS_1(THREADS, SM_WARPS) \
    __launch_bounds__(THREADS, ((SM_WARPS) == 20 && (THREADS) >= 128) ? 512 / (THREADS) : 0)
#else
#define MVH_BOUNDS_1(THREADS, SM_WARPS) MVH_BOUNDS(THREADS, SM_WARPS)
#endif
#define MVH_BOUNDS_4(THREADS, SM_WARPS) __launch_bounds__(THREADS)
// Threads of a kernel of S chains by TG: one-token kernels S warps, S / 2 with MVH_PAIR (its
// bound must say so, or the compiler caps the registers for twice the threads and spills).
#if MVH_PAIR
#define MVH_THREADS_1(S) (16 * (S))
#else
#define MVH_THREADS_1(S) (32 * (S))
#endif
#define MVH_THREADS_4(S) (32 * (S))


// MVH_ACC2 (the two accumulators per piece; defined with `mvh_acc2_on` in formats_h16.cuh, which
// the prefill tiles share). Not with MVH_PAIR (its own interleaved pieces; refused on the host).
#if MVH_PAIR && MVH_ACC2
#error "MVH_ACC2 splits mvh_piece's accumulators; MVH_PAIR runs its own pieces"
#endif

// A hint: piece `piece` of W's three sections into L2 (no kernel writes weights; 16-byte aligned
// sections of 16-byte multiples: FmtQ4H / FmtQ6H's S0, S1, S2).
template <class F>
__device__ __forceinline__ void prefetch_piece_l2(const u8* W, size_t pieces, size_t piece) {
    const u8 *p0, *p1, *p2;
    piece_at<F>(W, pieces, piece, p0, p1, p2);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p0), "n"(F::S0) : "memory");
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p1), "n"(F::S1) : "memory");
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p2), "n"(F::S2) : "memory");
}

// One piece (group G, super-block s) of the matmul of S chains on its registers `r`: the four
// loads' tiles, then the min MMA, into the TG token groups' accumulators (tokens tok0 + 8n + g
// per lane).
template <class F, int S, int TG, bool XS = false, bool XG = true, bool LN = (MVH_LEAN == 2)>
__device__ __forceinline__ void mvh_piece(const typename F::Regs& r, int s, int K, int nsb,
                                          const u16* __restrict__ XH, const u32* sums, int tok0,
                                          int n_tok, int g, int t4, float (&acc)[TG][4],
                                          const u8* xst = nullptr) {
    constexpr bool A2 = mvh_acc2_on<F, S>();
    float acc2[TG][4];  // the odd k-steps' sums (MVH_ACC2; unused without it)
#pragma unroll
    for (int n = 0; n < TG; ++n)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc2[n][q] = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        u32 a[4][4];
        F::frags(r, j, a);
#pragma unroll
        for (int n = 0; n < TG; ++n) {
            const int tok = tok0 + 8 * n + g;  // this lane's B column
            uint4 xa = make_uint4(0, 0, 0, 0), xb = xa;
            if (LN && !XS) {
                // An unused column (tok >= n_tok) reads the last token's values: its outputs are
                // never stored and the valid columns' do not depend on it.
                const int tc = max(0, min(tok, n_tok - 1));
                const uint4* xp = (const uint4*)(XH + (size_t)tc * K) + 2 * t4 + (size_t)(4 * s + j) * 8;
                xa = lda<XG>(xp);
                xb = lda<XG>(xp + 1);
            } else if (tok < n_tok) {
                if constexpr (XS) {  // the staged piece: token 8n + g's 512 bytes
                    const uint4* xp = (const uint4*)(xst + (8 * n + g) * XST_TOK) + 2 * t4 + j * 8;
                    xa = xp[0];
                    xb = xp[1];
                } else {
                    const uint4* xp = (const uint4*)(XH + (size_t)tok * K) + 2 * t4 + (size_t)(4 * s + j) * 8;
                    xa = lda<XG>(xp);  // XG false: MVH_XSMEM's copy in shared memory
                    xb = lda<XG>(xp + 1);
                }
            }
            const u32 xs[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                mma_h16((A2 && (i & 1)) ? acc2[n] : acc[n], a[i], xs[2 * i], xs[2 * i + 1]);
            }
        }
    }
    u32 am[4];
    F::min_a(r, t4, am);
#pragma unroll
    for (int n = 0; n < TG; ++n) {
        const int tok = tok0 + 8 * n + g;
        u32 b0 = 0u, b1 = 0u;
        if (LN && !XS)  // as the tiles' loads above
            F::template min_b<XG>(sums + ((size_t)max(0, min(tok, n_tok - 1)) * nsb + s) * F::SUM_WORDS, t4, b0, b1);
        else if (tok < n_tok) {
            if constexpr (XS)
                F::template min_b<false>((const u32*)(xst + (8 * n + g) * XST_TOK + 512), t4, b0, b1);
            else
                F::template min_b<XG>(sums + ((size_t)tok * nsb + s) * F::SUM_WORDS, t4, b0, b1);
        }
        mma_h16(acc[n], am, b0, b1);
        if constexpr (A2) {
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[n][q] += acc2[n][q];
        }
    }
}

// Warp 0's part of the fold: chain 0's sums (`acc`) plus chains 1 … S − 1's (`part`) in warp
// order, scaled and stored — the numbers of every one-token fold (mvh_finish, mvh_cluster_body).
template <int S, int TG>
__device__ __forceinline__ void mvh_fold_out(float (&acc)[TG][4],
                                             const float (&part)[S][32][TG][4], int G, int tok0,
                                             int n_tok, const float* __restrict__ XINV,
                                             float w_inv, float* __restrict__ Y, int ldy) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int w = 1; w < S; ++w)
#pragma unroll
        for (int n = 0; n < TG; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[n][e] = __fadd_rn(acc[n][e], part[w][lane][n][e]);
    const int r0 = 16 * G + g;
#pragma unroll
    for (int n = 0; n < TG; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int row = r0 + 8 * (e >> 1), t = tok0 + 8 * n + 2 * t4 + (e & 1);
            if (t < n_tok)
                Y[(size_t)t * ldy + row] = __fmul_rn(acc[n][e], __fmul_rn(XINV[t], w_inv));
        }
}

// The S warps' chains added in warp order by warp 0 (through `part`), scaled and stored.
template <int S, int TG>
__device__ __forceinline__ void mvh_finish(float (&acc)[TG][4], float (&part)[S][32][TG][4],
                                           int G, int tok0, int n_tok,
                                           const float* __restrict__ XINV, float w_inv,
                                           float* __restrict__ Y, int ldy) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
    for (int n = 0; n < TG; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) part[warp][lane][n][e] = acc[n][e];
    __syncthreads();
    if (warp != 0) return;
    mvh_fold_out<S, TG>(acc, part, G, tok0, n_tok, XINV, w_inv, Y, ldy);
}

// The wait of mvh_chain before it reads activations: the launch's PDL wait (and trigger), or
// another (probes_h16.cu's grid barrier).
struct PdlWait {
    __device__ __forceinline__ void operator()() const { PDL_ENTRY() }
};

// MVH_XSMEM's wait: PDL's, then the block copies token 0's activation row (K f16) and its sums
// (K/256 · SUM_WORDS words) into `dst` (dynamic shared memory: [2K bytes][the sums]) and meets
// at a barrier — every warp of the block runs one chain and so calls it once, at the same
// point. A launch given less dynamic shared memory than that traps.
template <class F>
struct XsmemWait {
    const u16* XH;
    const u32* sums;
    int K;
    u8* dst;
    __device__ __forceinline__ void operator()() const {
        PDL_ENTRY()
        const int n16 = K / 8, nsw = (K / 256) * F::SUM_WORDS;
        u32 dyn;
        asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
        if (dyn < 2u * (u32)K + 4u * (u32)nsw) __trap();
        uint4* xd = (uint4*)dst;
        for (int i = threadIdx.x; i < n16; i += blockDim.x) xd[i] = lda<true>((const uint4*)XH + i);
        u32* sd = (u32*)(dst + 2 * (size_t)K);
        for (int i = threadIdx.x; i < nsw; i += blockDim.x) sd[i] = lda<true>(sums + i);
        __syncthreads();
    }
};

// One warp's chain: super-blocks c, c + S, c + 2S, … of row group G of W (`pieces` pieces) into
// `acc`, the next MVH_AHEAD pieces ahead in registers. The wait (PDL's by default) is here: before the
// first load, or after it (and MVH_EARLY − 1 L2 prefetches) with MVH_EARLY (weights: no kernel
// writes them).
template <class F, int S, int TG, bool XS = false, class Wait = PdlWait, bool XG = true>
__device__ __forceinline__ void mvh_chain(const u8* __restrict__ W, size_t pieces, int G, int nsb,
                                          int c, int K, const u16* __restrict__ XH,
                                          const u32* sums, int tok0, int n_tok,
                                          float (&acc)[TG][4], const Wait& wait = Wait(),
                                          u8* xarea = nullptr) {
    static_assert(!XS || TG == 1, "staged activations: one 8-token group per warp");
    constexpr bool LN = mvh_lean_loads<F, S, TG>();
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    // MVH_XSTAGE: this warp's two stages (xarea), min(n_tok, 8) tokens each, nv of them this
    // block's; piece sp's activations and sums into stage b, lane l copying bytes 16l..16l+15
    // of each token's 512 and lanes below nv · (sum bytes / 16) the sums.
    const int ntb = n_tok < 8 ? n_tok : 8, nv = min(8, n_tok - tok0);
    auto stage = [&](int sp, int b) {
        const u32 dst = (u32)__cvta_generic_to_shared(xarea) + (u32)(b * ntb * XST_TOK);
#pragma unroll 1
        for (int tl = 0; tl < nv; ++tl)
            h16_cp16(dst + tl * XST_TOK + lane * 16,
                     (const u8*)(XH + (size_t)(tok0 + tl) * K) + (size_t)sp * 512 + lane * 16);
        constexpr int SL = F::SUM_WORDS / 4;  // 16-byte pieces of a token's sums
        if (lane < nv * SL) {
            const int tl = lane / SL, q = lane % SL;
            h16_cp16(dst + tl * XST_TOK + 512 + q * 16,
                     (const u8*)(sums + ((size_t)(tok0 + tl) * nsb + sp) * F::SUM_WORDS) + q * 16);
        }
    };
    auto load = [&](int sb, typename F::Regs& rr) {
        const u8 *p0, *p1, *p2;
        piece_at<F>(W, pieces, (size_t)G * nsb + sb, p0, p1, p2);
        F::template load_at<true>(p0, p1, p2, lane, g, t4, rr);
    };
    typename F::Regs r;
    int s = c;
#if MVH_AHEAD == 2
    typename F::Regs r1;
#endif
    // MVH_PP's second set; under MVH_EARLY_PP its first piece is requested before the wait.
    // Q4H's only: the Q6H kernels would go from 126 registers to 132 (12 warps per SM, not 16).
    constexpr bool early_pp =
        MVH_EARLY_PP && !XS && TG == 1 && F::SM_WARPS == 20 && mvh_pp_on<F, S>();
    typename F::Regs r2;
#if MVH_EARLY
    if (s < nsb) load(s, r);
    if (early_pp && s + S < nsb) load(s + S, r2);
#if MVH_AHEAD == 2
    if (s + S < nsb) load(s + S, r1);
#endif
#if MVH_EARLY > 1
    if (lane == 0) {
#pragma unroll
        for (int k = 1; k < MVH_EARLY; ++k)
            if (s + k * S < nsb) prefetch_piece_l2<F>(W, pieces, (size_t)G * nsb + s + k * S);
    }
#endif
    wait();
#else
    wait();
    if (s < nsb) load(s, r);
#if MVH_AHEAD == 2
    if (s + S < nsb) load(s + S, r1);
#endif
#endif
#if MVH_XTOUCH
    // This lane's touch of a piece (lanes 0..15 of a one-token launch; see MVH_XTOUCH): byte
    // 32·lane of the piece's activations (a 32-bit offset from XH: a 64-bit pointer stepped
    // across pieces cost Q4H's 96-register kernels a spill — static SASS); `touched` holds the
    // last touch's word until the next touch folds it into `sink`.
    const bool toucher = TG == 1 && !XS && XG && n_tok == 1 && lane < 16;
    u32 touched = 0u, sink = 0u;
    auto touch = [&](int sp) {
        if (toucher && sp < nsb) {
            sink ^= touched;  // the previous touch, a piece ago: landed by now
            touched = touch_u32((const u8*)XH + ((u32)sp * 512u + 32u * lane));
        }
    };
    // (The sink reaches the accumulator only under n_tok < 0, which no launch has.)
    auto keep_touches = [&]() {
        if constexpr (TG == 1 && !XS && XG)
            if (n_tok < 0) acc[0][0] = __uint_as_float(sink ^ touched);
    };
#else
    auto touch = [](int) {};
    auto keep_touches = []() {};
#endif
#if MVH_PP
    if constexpr (!XS && TG == 1 && MVH_AHEAD == 1 && mvh_pp3_on<F, S>()) {
        // Three register sets in turn (MVH_PP_SETS=3): two pieces in flight while one is
        // computed; nothing copied. (The two-set loop below written out again: one loop over
        // an array of N sets changes the measured default's SASS — mvh_q4h_s8, the Q6H kernels
        // — so it waits until the device can measure it.)
        typename F::Regs r3;  // with r2, above
        if (s + S < nsb) load(s + S, r2);
        for (; s < nsb; s += 3 * S) {
            if (s + 2 * S < nsb) load(s + 2 * S, r3);
            mvh_piece<F, S, TG, false, XG, LN>(r, s, K, nsb, XH, sums, tok0, n_tok, g, t4, acc);
            if (s + S >= nsb) break;
            if (s + 3 * S < nsb) load(s + 3 * S, r);
            mvh_piece<F, S, TG, false, XG, LN>(r2, s + S, K, nsb, XH, sums, tok0, n_tok, g, t4, acc);
            if (s + 2 * S >= nsb) break;
            if (s + 4 * S < nsb) load(s + 4 * S, r2);
            mvh_piece<F, S, TG, false, XG, LN>(r3, s + 2 * S, K, nsb, XH, sums, tok0, n_tok, g, t4, acc);
        }
        return;
    }
    if constexpr (!XS && TG == 1 && MVH_AHEAD == 1 && mvh_pp_on<F, S>()) {
        // Two register sets in turn (MVH_PP): the next piece is requested into the set the
        // previous piece was computed from, and nothing is copied, so no instruction waits on
        // the next piece's loads before the one after it is requested. Under early_pp each
        // piece's load into the second set moves to the end of the previous round (the first
        // one before the wait, above): the same loads in the same order between the same pieces.
        for (; s < nsb; s += 2 * S) {
            if (!early_pp && s + S < nsb) load(s + S, r2);
            touch(s + S);
            mvh_piece<F, S, TG, false, XG, LN>(r, s, K, nsb, XH, sums, tok0, n_tok, g, t4, acc);
            if (s + S >= nsb) break;
            if (s + 2 * S < nsb) load(s + 2 * S, r);
            touch(s + 2 * S);
            mvh_piece<F, S, TG, false, XG, LN>(r2, s + S, K, nsb, XH, sums, tok0, n_tok, g, t4, acc);
            if (early_pp && s + 3 * S < nsb) load(s + 3 * S, r2);
        }
        keep_touches();
        return;
    }
#endif
    if constexpr (XS) {
        if (s < nsb) stage(s, 0);
        cp_async_commit();
    }
    for (int it = 0; s < nsb; s += S, ++it) {
        typename F::Regs rn;
        if (s + MVH_AHEAD * S < nsb) load(s + MVH_AHEAD * S, rn);
        touch(s + S);
        if constexpr (XS) {
            // The next piece into the other stage (read last iteration, released by the
            // __syncwarp after it); one group per piece, empty at the end.
            if (s + S < nsb) stage(s + S, (it + 1) & 1);
            cp_async_commit();
            cp_async_wait<1>();
            __syncwarp();
        }
#if MVH_XPF
        // A piece's activations are 512 contiguous bytes per token (four L1 lines): lane
        // (g, t4) takes line t4 of token tok0 + 8n + g, and t4 = 0 its sums.
        if (s + S < nsb) {
#pragma unroll
            for (int n = 0; n < TG; ++n) {
                const int tok = tok0 + 8 * n + g;
                if (tok < n_tok) {
                    const uint4* xp = (const uint4*)(XH + (size_t)tok * K) + (size_t)(s + S) * 32 + 8 * t4;
                    asm volatile("prefetch.global.L1 [%0];" ::"l"(xp));
                    if (t4 == 0)
                        asm volatile("prefetch.global.L1 [%0];" ::"l"(sums + ((size_t)tok * nsb + s + S) * F::SUM_WORDS));
                }
            }
        }
#endif
        mvh_piece<F, S, TG, XS, XG, LN>(r, s, K, nsb, XH, sums, tok0, n_tok, g, t4, acc,
                                 xarea + (it & 1) * ntb * XST_TOK);
        if constexpr (XS) __syncwarp();
#if MVH_AHEAD == 2
        r = r1;
        r1 = rn;
#else
        r = rn;
#endif
    }
    if constexpr (XS) cp_async_wait<0>();
    keep_touches();
}

// Two pieces of one-token chains on their registers `ra` (super-block sa, into `acca`) and
// `rb` (sb, into `accb`): each accumulator takes mvh_piece's MMAs in mvh_piece's order; the two
// sequences interleaved, so neither waits on the other's results.
template <class F>
__device__ __forceinline__ void mvh_piece_pair(const typename F::Regs& ra, int sa,
                                               const typename F::Regs& rb, int sb, int K, int nsb,
                                               const u16* __restrict__ XH, const u32* sums,
                                               int tok0, int n_tok, int g, int t4,
                                               float (&acca)[1][4], float (&accb)[1][4]) {
    const int tok = tok0 + g;  // this lane's B column
    const bool in = tok < n_tok;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        u32 a[4][4], b[4][4];
        F::frags(ra, j, a);
        F::frags(rb, j, b);
        uint4 xa0 = make_uint4(0, 0, 0, 0), xa1 = xa0, xb0 = xa0, xb1 = xa0;
        if (in) {
            const uint4* pa = (const uint4*)(XH + (size_t)tok * K) + 2 * t4 + (size_t)(4 * sa + j) * 8;
            const uint4* pb = (const uint4*)(XH + (size_t)tok * K) + 2 * t4 + (size_t)(4 * sb + j) * 8;
            xa0 = lda<true>(pa);
            xa1 = lda<true>(pa + 1);
            xb0 = lda<true>(pb);
            xb1 = lda<true>(pb + 1);
        }
        const u32 xa[8] = {xa0.x, xa0.y, xa0.z, xa0.w, xa1.x, xa1.y, xa1.z, xa1.w};
        const u32 xb[8] = {xb0.x, xb0.y, xb0.z, xb0.w, xb1.x, xb1.y, xb1.z, xb1.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            mma_h16(acca[0], a[i], xa[2 * i], xa[2 * i + 1]);
            mma_h16(accb[0], b[i], xb[2 * i], xb[2 * i + 1]);
        }
    }
    u32 ama[4], amb[4];
    F::min_a(ra, t4, ama);
    F::min_a(rb, t4, amb);
    u32 a0 = 0u, a1 = 0u, b0 = 0u, b1 = 0u;
    if (in) {
        F::template min_b<true>(sums + ((size_t)tok * nsb + sa) * F::SUM_WORDS, t4, a0, a1);
        F::template min_b<true>(sums + ((size_t)tok * nsb + sb) * F::SUM_WORDS, t4, b0, b1);
    }
    mma_h16(acca[0], ama, a0, a1);
    mma_h16(accb[0], amb, b0, b1);
}

// MVH_PAIR: warp w's two chains of an S-chain one-token matmul, chain w (super-blocks w, w + S,
// …) into `acc0` and chain w + S/2 into `acc1`, a pair of pieces (one per chain) in registers
// and the next pair requested before the current one's MMAs; PDL's wait as mvh_chain's.
template <class F, int S>
__device__ __forceinline__ void mvh_chain_pair(const u8* __restrict__ W, size_t pieces, int G,
                                               int nsb, int w, int K, const u16* __restrict__ XH,
                                               const u32* sums, int tok0, int n_tok,
                                               float (&acc0)[1][4], float (&acc1)[1][4]) {
    static_assert(S % 2 == 0, "MVH_PAIR: an even chain count");
    constexpr int H = S / 2;
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    auto load = [&](int sb, typename F::Regs& rr) {
        const u8 *p0, *p1, *p2;
        piece_at<F>(W, pieces, (size_t)G * nsb + sb, p0, p1, p2);
        F::template load_at<true>(p0, p1, p2, lane, g, t4, rr);
    };
    typename F::Regs r0, r1;
    int s = w;
#if MVH_EARLY
    if (s < nsb) load(s, r0);
    if (s + H < nsb) load(s + H, r1);
    PDL_ENTRY()
#else
    PDL_ENTRY()
    if (s < nsb) load(s, r0);
    if (s + H < nsb) load(s + H, r1);
#endif
    for (; s < nsb; s += S) {
        typename F::Regs n0, n1;
        if (s + S < nsb) load(s + S, n0);
        if (s + S + H < nsb) load(s + S + H, n1);
        if (s + H < nsb)  // warp-uniform
            mvh_piece_pair<F>(r0, s, r1, s + H, K, nsb, XH, sums, tok0, n_tok, g, t4, acc0, acc1);
        else
            mvh_piece<F, S, 1>(r0, s, K, nsb, XH, sums, tok0, n_tok, g, t4, acc0);
        r0 = n0;
        r1 = n1;
    }
}
