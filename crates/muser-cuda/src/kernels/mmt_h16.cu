// mmt_h16.cu — the f16 route's prefill matmul: shared-memory tiles of 128 rows × 64 tokens over
// the Q4H / Q6H layouts (formats_h16.cuh), the same bits per output as the decode kernels
// (`mvh_*`, matvec_h16.cu) for the same chain count S.
//
// mmt_{q4h,q6h}_s{4,8,16}: Y[t][r] as mvh_*: per output, S chains — chain w the MMAs of
//   super-blocks w, w + S, w + 2S, … in order (per super-block: loads j = 0..3, tiles i = 0..3,
//   then the min MMA) from a zero accumulator — added in chain order ((c0 + c1) + c2) + …, every
//   chain counted, an empty one as +0, then times XINV[t] · w_inv. The decode kernels run the
//   chains on S warps at once; a tile walks them one after another (super-block order w, w + S,
//   …, then w + 1, …), folding each finished chain into a running total.
//
//   Block = 8 warps on 8 row groups (128 rows, blockIdx.x) × 64 tokens (blockIdx.y); warp
//   (wm = warp & 3, wn = warp >> 2) owns groups 2wm, 2wm + 1 and tokens 32wn .. 32wn + 31. A
//   super-block's pieces of the 8 groups, its 64 tokens' f16 activations (rows of 512 bytes
//   padded to MMT_XROW: conflict-free fragment reads) and their sums are copied by cp.async
//   into one of MMT_STAGES shared-memory stages, MMT_STAGES − 1 super-blocks ahead. Rows past
//   n_out (a last partial tile) and tokens past n_tok read the last valid ones and are not
//   stored. Needs n_out % 16 == 0, K % 256 == 0, 16-byte aligned W, XH and sums; dynamic shared
//   memory = `Registry::mmt_smem` bytes.

#define MMT_GROUPS 8
#define MMT_TOK 64
#define MMT_THREADS 256
#define MMT_XROW 528
#ifndef MMT_STAGES
#define MMT_STAGES 3
#endif

__device__ __forceinline__ void mmt_cp16(void* dst, const void* src) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}

// Super-blocks of chain w of a K of nsb super-blocks.
__device__ __forceinline__ int mmt_chain_len(int w, int nsb, int S) {
    return w < nsb ? (nsb - w + S - 1) / S : 0;
}
// The super-block of step i (chains one after another).
__device__ __forceinline__ int mmt_step_sb(int i, int nsb, int S) {
    for (int w = 0;; ++w) {
        const int c = mmt_chain_len(w, nsb, S);
        if (i < c) return w + S * i;
        i -= c;
    }
}

template <class F>
struct MmtStage {
    static constexpr int PIECE = F::S0 + F::S1 + F::S2;
    static constexpr int SUMB = F::SUM_WORDS * 4;  // sum bytes per (token, super-block)
    static constexpr int X_OFF = MMT_GROUPS * PIECE;
    static constexpr int S_OFF = X_OFF + MMT_TOK * MMT_XROW;
    static constexpr int BYTES = S_OFF + MMT_TOK * SUMB;
};

// Copy super-block s of the tile into stage `st` (all threads; not yet waited for).
template <class F>
__device__ __forceinline__ void mmt_issue(u8* st, const u8* W, size_t pieces, int nsb, int s,
                                          int g0, int n_groups, const u16* XH, const u8* sums,
                                          int K, int tok0, int n_tok) {
    using T = MmtStage<F>;
    constexpr int PC = T::PIECE / 16;
    for (int c = threadIdx.x; c < MMT_GROUPS * PC; c += MMT_THREADS) {
        const int gl = c / PC, off = (c % PC) * 16;
        const size_t piece = (size_t)min(g0 + gl, n_groups - 1) * nsb + s;
        const u8* src = off < F::S0 ? W + piece * F::S0 + off
                        : off < F::S0 + F::S1
                            ? W + pieces * F::S0 + piece * F::S1 + (off - F::S0)
                            : W + pieces * (F::S0 + F::S1) + piece * F::S2 + (off - F::S0 - F::S1);
        mmt_cp16(st + gl * T::PIECE + off, src);
    }
    for (int c = threadIdx.x; c < MMT_TOK * 32; c += MMT_THREADS) {
        const int tl = c >> 5, ch = c & 31;
        const int tok = min(tok0 + tl, n_tok - 1);
        mmt_cp16(st + T::X_OFF + tl * MMT_XROW + ch * 16,
                 (const u8*)(XH + (size_t)tok * K + 256 * s) + ch * 16);
    }
    constexpr int SC = T::SUMB / 16;
    for (int c = threadIdx.x; c < MMT_TOK * SC; c += MMT_THREADS) {
        const int tl = c / SC, ch = c % SC;
        const int tok = min(tok0 + tl, n_tok - 1);
        mmt_cp16(st + T::S_OFF + tl * T::SUMB + ch * 16,
                 sums + ((size_t)tok * nsb + s) * T::SUMB + ch * 16);
    }
}

template <class F, int S>
__device__ __forceinline__ void mmt_body(const u8* __restrict__ W, int n_out, int K,
                                         const u16* __restrict__ XH, const u16* __restrict__ XSUM,
                                         const u16* __restrict__ XSUM16,
                                         const float* __restrict__ XINV, float w_inv,
                                         float* __restrict__ Y, int ldy, int n_tok) {
    using T = MmtStage<F>;
    extern __shared__ __align__(16) u8 mmt_smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int wm = warp & 3, wn = warp >> 2;
    const int nsb = K / 256, n_groups = n_out / 16;
    const size_t pieces = (size_t)n_groups * nsb;
    const int g0 = MMT_GROUPS * blockIdx.x, tok0 = MMT_TOK * blockIdx.y;
    const u8* sums = (const u8*)F::sums(XSUM, XSUM16);
    float acc[2][4][4], total[2][4][4];
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int n = 0; n < 4; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[m][n][e] = total[m][n][e] = 0.f;
#pragma unroll
    for (int i = 0; i < MMT_STAGES - 1; ++i) {
        if (i < nsb)
            mmt_issue<F>(mmt_smem + i * T::BYTES, W, pieces, nsb, mmt_step_sb(i, nsb, S), g0,
                         n_groups, XH, sums, K, tok0, n_tok);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    int w = 0, left = mmt_chain_len(0, nsb, S);
    for (int i = 0; i < nsb; ++i) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(MMT_STAGES - 2));
        __syncthreads();  // stage i landed for every thread; stage i − 1 is free again
        const int ahead = i + MMT_STAGES - 1;
        if (ahead < nsb)
            mmt_issue<F>(mmt_smem + (ahead % MMT_STAGES) * T::BYTES, W, pieces, nsb,
                         mmt_step_sb(ahead, nsb, S), g0, n_groups, XH, sums, K, tok0, n_tok);
        asm volatile("cp.async.commit_group;\n" ::);
        const u8* st = mmt_smem + (i % MMT_STAGES) * T::BYTES;
        typename F::Regs r[2];
#pragma unroll
        for (int m = 0; m < 2; ++m) {
            const u8* p = st + (2 * wm + m) * T::PIECE;
            F::template load_at<false>(p, p + F::S0, p + F::S0 + F::S1, lane, g, t4, r[m]);
        }
        const u8* xrow = st + T::X_OFF + (32 * wn + g) * MMT_XROW + 32 * t4;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            u32 xs[4][8];
#pragma unroll
            for (int n = 0; n < 4; ++n) {
                const uint4 xa = *(const uint4*)(xrow + 8 * n * MMT_XROW + 128 * j);
                const uint4 xb = *(const uint4*)(xrow + 8 * n * MMT_XROW + 128 * j + 16);
                xs[n][0] = xa.x, xs[n][1] = xa.y, xs[n][2] = xa.z, xs[n][3] = xa.w;
                xs[n][4] = xb.x, xs[n][5] = xb.y, xs[n][6] = xb.z, xs[n][7] = xb.w;
            }
#pragma unroll
            for (int m = 0; m < 2; ++m) {
                u32 a[4][4];
                F::frags(r[m], j, a);
#pragma unroll
                for (int n = 0; n < 4; ++n)
#pragma unroll
                    for (int ii = 0; ii < 4; ++ii)
                        mma_h16(acc[m][n], a[ii], xs[n][2 * ii], xs[n][2 * ii + 1]);
            }
        }
#pragma unroll
        for (int m = 0; m < 2; ++m) {
            u32 am[4];
            F::min_a(r[m], t4, am);
#pragma unroll
            for (int n = 0; n < 4; ++n) {
                const u32* sw = (const u32*)(st + T::S_OFF + (32 * wn + 8 * n + g) * T::SUMB);
                u32 b0, b1;
                F::template min_b<false>(sw, t4, b0, b1);
                mma_h16(acc[m][n], am, b0, b1);
            }
        }
        if (--left == 0) {
            // Fold the finished chain, and the empty ones after it (each adds +0, as in mvh).
            do {
#pragma unroll
                for (int m = 0; m < 2; ++m)
#pragma unroll
                    for (int n = 0; n < 4; ++n)
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            total[m][n][e] =
                                w == 0 ? acc[m][n][e] : __fadd_rn(total[m][n][e], acc[m][n][e]);
                            acc[m][n][e] = 0.f;
                        }
                ++w;
            } while (w < S && (left = mmt_chain_len(w, nsb, S)) == 0);
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
#pragma unroll
    for (int m = 0; m < 2; ++m) {
        const int grp = g0 + 2 * wm + m;
        if (grp >= n_groups) continue;
#pragma unroll
        for (int n = 0; n < 4; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int row = 16 * grp + g + 8 * (e >> 1);
                const int t = tok0 + 32 * wn + 8 * n + 2 * t4 + (e & 1);
                if (t < n_tok)
                    Y[(size_t)t * ldy + row] = __fmul_rn(total[m][n][e], __fmul_rn(XINV[t], w_inv));
            }
    }
}

#define MMT_KERNEL(NAME, F, S)                                                                  \
    extern "C" __global__ void __launch_bounds__(MMT_THREADS, 1)                                \
        NAME(const u8* W, int n_out, int K, const u16* XH, const u16* XSUM, const u16* XSUM16,  \
             const float* XINV, float w_inv, float* Y, int ldy, int n_tok) {                    \
        PDL_ENTRY()                                                                             \
        mmt_body<F, S>(W, n_out, K, XH, XSUM, XSUM16, XINV, w_inv, Y, ldy, n_tok);              \
    }
MMT_KERNEL(mmt_q4h_s4, FmtQ4H, 4)
MMT_KERNEL(mmt_q4h_s8, FmtQ4H, 8)
MMT_KERNEL(mmt_q4h_s16, FmtQ4H, 16)
MMT_KERNEL(mmt_q6h_s4, FmtQ6H, 4)
MMT_KERNEL(mmt_q6h_s8, FmtQ6H, 8)
MMT_KERNEL(mmt_q6h_s16, FmtQ6H, 16)
