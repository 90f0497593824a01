// mmt_h16.cu — the f16 route's prefill matmul: shared-memory tiles of 128 rows × 64 tokens over
// the Q4H / Q6H layouts (formats_h16.cuh), the same bits per output as the decode kernels
// (`mvh_*`, matvec_h16.cu) for the same chain count S.
//
// mmt_{q4h,q6h}_s{2,4,8,16}: Y[t][r] as mvh_*: per output, S chains — chain w the MMAs of
//   super-blocks w, w + S, w + 2S, … in order (per super-block: loads j = 0..3, tiles i = 0..3,
//   then the min MMA; with MVH_ACC2 the odd k16 steps into a second accumulator, added after the
//   min MMA: formats_h16.cuh) from a zero accumulator — added in chain order ((c0 + c1) + c2) + …, every
//   chain counted, an empty one as +0, then times XINV[t] · w_inv. The decode kernels run the
//   chains on S warps at once; a tile walks them one after another (super-block order w, w + S,
//   …, then w + 1, …), folding each finished chain into a running total.
//
//   Block = 8 row groups (128 rows, blockIdx.x) × 64 tokens (blockIdx.y) on 8 / WG warps; warp
//   w owns groups WG·w .. WG·w + WG − 1 and all 64 tokens (each weight fragment built once per
//   block and used for 8 token tiles; with WG = 2 each activation fragment feeds both groups'
//   MMAs). The running totals live in registers at WG = MINB = 1, else in Y (the thread's own
//   outputs: the same additions in the same order). A super-block's pieces of the 8 groups,
//   its 64 tokens' f16 activations (rows
//   of 512 bytes padded to MMT_XROW: conflict-free fragment reads) and their sums are copied by
//   cp.async into one of STAGES shared-memory stages, STAGES − 1 super-blocks ahead,
//   from per-thread source pointers set once (a step adds the super-block's offset). Rows past
//   n_out (a last partial tile) and tokens past n_tok read the last valid ones and are not
//   stored. Needs n_out % 16 == 0, K % 256 == 0, 16-byte aligned W, XH and sums; dynamic shared
//   memory = `MmtShape::smem` bytes (plan_h16.rs).

#define MMT_GROUPS 8
#define MMT_TOK 64
#define MMT_THREADS 256
#define MMT_XROW 528
// Q4H's row groups per warp, blocks per SM and stages (the registry's `MmtShape`); Q6H: 1, 1
// and 3 (two of its stage sets would not fit an SM).
#ifndef MMT_WG
#define MMT_WG 1
#endif
#ifndef MMT_MINB
#define MMT_MINB 1
#endif
#ifndef MMT_STAGES
#define MMT_STAGES 3
#endif

// A tile's accumulators (WG row groups × N token groups × 4) set to zero.
template <int WG, int N>
__device__ __forceinline__ void mmt_zero(float (&x)[WG][N][4]) {
#pragma unroll
    for (int m = 0; m < WG; ++m)
#pragma unroll
        for (int n = 0; n < N; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) x[m][n][e] = 0.f;
}

// Super-blocks of chain w of a K of nsb super-blocks.
__device__ __forceinline__ int mmt_chain_len(int w, int nsb, int S) {
    return w < nsb ? (nsb - w + S - 1) / S : 0;
}

template <class F, int THREADS>
struct MmtStage {
    static constexpr int PIECE = F::S0 + F::S1 + F::S2;
    static constexpr int SUMB = F::SUM_WORDS * 4;  // sum bytes per (token, super-block)
    static constexpr int X_OFF = MMT_GROUPS * PIECE;
    static constexpr int S_OFF = X_OFF + MMT_TOK * MMT_XROW;
    static constexpr int BYTES = S_OFF + MMT_TOK * SUMB;
    // 16-byte chunks per thread and super-block: quants (section 0), the other two sections,
    // activations, sums (the last on the first SUM_T threads only).
    static constexpr int Q_CH = MMT_GROUPS * F::S0 / 16 / THREADS;
    static constexpr int R_PER = (F::S1 + F::S2) / 16;  // chunks per group of sections 1 and 2
    // (Q4H's 8-bit scales: 20 chunks per group, 160 per block — the last round partial.)
    static constexpr int R_ALL = MMT_GROUPS * R_PER;
    static constexpr int R_CH = (R_ALL + THREADS - 1) / THREADS;
    // Whether chunk k of thread tid exists (always, where the chunks fill the rounds).
    static __device__ __forceinline__ bool r_has(int tid, int k) {
        return R_ALL % THREADS == 0 || tid + THREADS * k < R_ALL;
    }
    static constexpr int X_CH = MMT_TOK * 32 / THREADS;
    static constexpr int SUM_T = MMT_TOK * SUMB / 16;
    static_assert(MMT_GROUPS * F::S0 / 16 % THREADS == 0, "quant chunks per thread");
    static_assert(SUM_T <= THREADS, "one sum chunk per thread");
};

// One thread's share of copying a super-block into a stage: where each of its 16-byte chunks
// comes from at super-block 0 (`src + s · step` at super-block s) and goes to in a stage. Set
// once per block; rows past the matrix and tokens past n_tok read the last valid ones.
template <class F, int THREADS>
struct MmtCopy {
    using T = MmtStage<F, THREADS>;
    const u8* q[T::Q_CH];
    const u8* r[T::R_CH];
    u32 rstep[T::R_CH];
    u32 rdst[T::R_CH];
    const u8* x[T::X_CH];
    const u8* sm;

    __device__ __forceinline__ MmtCopy(const u8* W, size_t pieces, int nsb, int g0, int n_groups,
                                       const u16* XH, const u8* sums, int K, int tok0, int n_tok) {
        const int tid = threadIdx.x;
        // The group's first piece (super-block 0).
        auto piece0 = [&](int gl) { return (size_t)min(g0 + gl, n_groups - 1) * nsb; };
#pragma unroll
        for (int k = 0; k < T::Q_CH; ++k) {
            const int c = tid + THREADS * k, gl = c / (F::S0 / 16), off = (c % (F::S0 / 16)) * 16;
            q[k] = W + piece0(gl) * F::S0 + off;
        }
#pragma unroll
        for (int k = 0; k < T::R_CH; ++k) {
            const int c = min(tid + THREADS * k, T::R_ALL - 1), gl = c / T::R_PER,
                      o = (c % T::R_PER) * 16;
            if (o < F::S1) {
                r[k] = W + pieces * F::S0 + piece0(gl) * F::S1 + o;
                rstep[k] = F::S1;
            } else {
                r[k] = W + pieces * (F::S0 + F::S1) + piece0(gl) * F::S2 + (o - F::S1);
                rstep[k] = F::S2;
            }
            rdst[k] = gl * T::PIECE + F::S0 + o;
        }
        const int lane = tid & 31;
#pragma unroll
        for (int k = 0; k < T::X_CH; ++k) {
            const int tok = min(tok0 + (tid >> 5) + (THREADS / 32) * k, n_tok - 1);
            x[k] = (const u8*)(XH + (size_t)tok * K) + lane * 16;
        }
        constexpr int SC = T::SUMB / 16;
        const int tok = min(tok0 + tid / SC, n_tok - 1);
        sm = sums + (size_t)tok * nsb * T::SUMB + (tid % SC) * 16;
    }

    // Copy super-block s into the stage at shared address `st` (not yet waited for).
    __device__ __forceinline__ void issue(u32 st, int s) const {
        const int tid = threadIdx.x, lane = tid & 31;
#pragma unroll
        for (int k = 0; k < T::Q_CH; ++k) {
            const int c = tid + THREADS * k;
            h16_cp16(st + (c / (F::S0 / 16)) * T::PIECE + (c % (F::S0 / 16)) * 16,
                     q[k] + (size_t)s * F::S0);
        }
#pragma unroll
        for (int k = 0; k < T::R_CH; ++k)
            if (T::r_has(tid, k)) h16_cp16(st + rdst[k], r[k] + (size_t)s * rstep[k]);
#pragma unroll
        for (int k = 0; k < T::X_CH; ++k)
            h16_cp16(st + T::X_OFF + ((tid >> 5) + (THREADS / 32) * k) * MMT_XROW + lane * 16,
                     x[k] + 512 * s);
        if (tid < T::SUM_T) h16_cp16(st + T::S_OFF + tid * 16, sm + (size_t)s * T::SUMB);
    }
};

// WG row groups per warp (8 / WG warps per block), MINB blocks per SM, STAGES stages. With
// WG = 1 and MINB = 1 the running totals live in registers, otherwise in Y (the thread's own
// outputs; the same additions in the same order).
template <class F, int S, int WG, int MINB, int STAGES>
__device__ __forceinline__ void mmt_body(const u8* __restrict__ W, int n_out, int K,
                                         const u16* __restrict__ XH, const u16* __restrict__ XSUM,
                                         const u16* __restrict__ XSUM16,
                                         const float* __restrict__ XINV, float w_inv,
                                         float* __restrict__ Y, int ldy, int n_tok) {
    constexpr int THREADS = MMT_THREADS / WG;
    constexpr bool TOTAL_IN_Y = WG > 1 || MINB > 1;
    using T = MmtStage<F, THREADS>;
    extern __shared__ __align__(16) u8 mmt_smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int nsb = K / 256, n_groups = n_out / 16;
    const size_t pieces = (size_t)n_groups * nsb;
    const int g0 = MMT_GROUPS * blockIdx.x, tok0 = MMT_TOK * blockIdx.y;
    const MmtCopy<F, THREADS> copy(W, pieces, nsb, g0, n_groups, XH,
                                   (const u8*)F::sums(XSUM, XSUM16), K, tok0, n_tok);
    const u32 smem0 = (u32)__cvta_generic_to_shared(mmt_smem);
    float acc[WG][MMT_TOK / 8][4];
    mmt_zero(acc);
    float total[TOTAL_IN_Y ? 1 : WG][MMT_TOK / 8][4];
    // Output element (m, n, e) of this thread: row group grp(m), token tok(n, e).
    auto grp = [&](int m) { return g0 + WG * warp + m; };
    auto tok = [&](int n, int e) { return tok0 + 8 * n + 2 * t4 + (e & 1); };
    auto yat = [&](int m, int n, int e) {
        return Y + (size_t)tok(n, e) * ldy + 16 * grp(m) + g + 8 * (e >> 1);
    };
    // The copy runs STAGES − 1 steps ahead of the MMAs; a step's super-block follows the
    // chains (w, w + S, …, then w + 1, …).
    int cw = 0, cs = 0, cstage = 0;
    auto issue_next = [&]() {
        copy.issue(smem0 + cstage * T::BYTES, cs);
        cstage = cstage + 1 == STAGES ? 0 : cstage + 1;
        cs += S;
        if (cs >= nsb) cs = ++cw;
    };
#pragma unroll
    for (int i = 0; i < STAGES - 1; ++i) {
        if (i < nsb) issue_next();
        asm volatile("cp.async.commit_group;\n" ::);
    }
    int w = 0, left = mmt_chain_len(0, nsb, S), stage = 0;
    for (int i = 0; i < nsb; ++i) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
        __syncthreads();  // stage i landed for every thread; stage i − 1 is free again
        if (i + STAGES - 1 < nsb) issue_next();
        asm volatile("cp.async.commit_group;\n" ::);
        const u8* st = mmt_smem + stage * T::BYTES;
        stage = stage + 1 == STAGES ? 0 : stage + 1;
        typename F::Regs r[WG];
#pragma unroll
        for (int m = 0; m < WG; ++m) {
            const u8* p = st + (WG * warp + m) * T::PIECE;
            F::template load_at<false>(p, p + F::S0, p + F::S0 + F::S1, lane, g, t4, r[m]);
        }
        const u8* xrow = st + T::X_OFF + g * MMT_XROW + 32 * t4;
        // MVH_ACC2 (formats_h16.cuh): the odd k16 steps' sums of this super-block, from zero.
        constexpr bool A2 = mvh_acc2_on<F, S>();
        float acc2[WG][MMT_TOK / 8][4];  // unused (and dropped by the compiler) without it
        if constexpr (A2) mmt_zero(acc2);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            u32 a[WG][4][4];
#pragma unroll
            for (int m = 0; m < WG; ++m) F::frags(r[m], j, a[m]);
#pragma unroll
            for (int n = 0; n < MMT_TOK / 8; ++n) {
                const uint4 xa = *(const uint4*)(xrow + 8 * n * MMT_XROW + 128 * j);
                const uint4 xb = *(const uint4*)(xrow + 8 * n * MMT_XROW + 128 * j + 16);
                const u32 xs[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
                for (int m = 0; m < WG; ++m)
#pragma unroll
                    for (int ii = 0; ii < 4; ++ii)
                        mma_h16((A2 && (ii & 1)) ? acc2[m][n] : acc[m][n], a[m][ii], xs[2 * ii],
                                xs[2 * ii + 1]);
            }
        }
#pragma unroll
        for (int m = 0; m < WG; ++m) {
            u32 am[4];
            F::min_a(r[m], t4, am);
#pragma unroll
            for (int n = 0; n < MMT_TOK / 8; ++n) {
                const u32* sw = (const u32*)(st + T::S_OFF + (8 * n + g) * T::SUMB);
                u32 b0, b1;
                F::template min_b<false>(sw, t4, b0, b1);
                mma_h16(acc[m][n], am, b0, b1);
                if constexpr (A2) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[m][n][e] += acc2[m][n][e];
                }
            }
        }
        if (--left == 0) {
            // Fold the finished chain, and the empty ones after it (each adds +0, as in mvh).
            do {
#pragma unroll
                for (int m = 0; m < WG; ++m)
#pragma unroll
                    for (int n = 0; n < MMT_TOK / 8; ++n)
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            if constexpr (!TOTAL_IN_Y) {
                                total[m][n][e] =
                                    w == 0 ? acc[m][n][e] : __fadd_rn(total[m][n][e], acc[m][n][e]);
                            } else if (grp(m) < n_groups && tok(n, e) < n_tok) {
                                float* y = yat(m, n, e);
                                *y = w == 0 ? acc[m][n][e] : __fadd_rn(*y, acc[m][n][e]);
                            }
                            acc[m][n][e] = 0.f;
                        }
                ++w;
            } while (w < S && (left = mmt_chain_len(w, nsb, S)) == 0);
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
#pragma unroll
    for (int m = 0; m < WG; ++m) {
        if (grp(m) >= n_groups) continue;  // a last partial tile's extra groups store nothing
#pragma unroll
        for (int n = 0; n < MMT_TOK / 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int t = tok(n, e);
                if (t >= n_tok) continue;
                float* y = yat(m, n, e);
                const float v = TOTAL_IN_Y ? *y : total[TOTAL_IN_Y ? 0 : m][n][e];
                *y = __fmul_rn(v, __fmul_rn(XINV[t], w_inv));
            }
    }
}

#define MMT_KERNEL(NAME, F, S, WG, MINB, STAGES)                                                \
    extern "C" __global__ void __launch_bounds__(MMT_THREADS / WG, MINB)                        \
        NAME(const u8* W, int n_out, int K, const u16* XH, const u16* XSUM, const u16* XSUM16,  \
             const float* XINV, float w_inv, float* Y, int ldy, int n_tok) {                    \
        PDL_ENTRY()                                                                             \
        mmt_body<F, S, WG, MINB, STAGES>(W, n_out, K, XH, XSUM, XSUM16, XINV, w_inv, Y, ldy,    \
                                         n_tok);                                                \
    }
MMT_KERNEL(mmt_q4h_s2, FmtQ4H, 2, MMT_WG, MMT_MINB, MMT_STAGES)
MMT_KERNEL(mmt_q4h_s4, FmtQ4H, 4, MMT_WG, MMT_MINB, MMT_STAGES)
MMT_KERNEL(mmt_q4h_s8, FmtQ4H, 8, MMT_WG, MMT_MINB, MMT_STAGES)
MMT_KERNEL(mmt_q4h_s16, FmtQ4H, 16, MMT_WG, MMT_MINB, MMT_STAGES)
MMT_KERNEL(mmt_q6h_s2, FmtQ6H, 2, 1, 1, 3)
MMT_KERNEL(mmt_q6h_s4, FmtQ6H, 4, 1, 1, 3)
MMT_KERNEL(mmt_q6h_s8, FmtQ6H, 8, 1, 1, 3)
MMT_KERNEL(mmt_q6h_s16, FmtQ6H, 16, 1, 1, 3)
