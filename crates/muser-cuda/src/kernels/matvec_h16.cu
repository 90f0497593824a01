// matvec_h16.cu — the f16 tensor-core route's activation step and its matmul of up to 8 tokens per
// row pass (decode, packed rows; more tokens take more blocks along y). Weights in the Q4H and
// Q6H layouts (host: muser_cuda::q4h / q6h, whose headers define the numerics; docs/cuda.md,
// "the f16 route").
//
// The formats and MMA helpers: formats_h16.cuh; the chain of pieces and its fold: mvh_chain.cuh.
//
// act_h16: X [n_tok][ldx] f32 (K used; ldx % 4 == 0, 16-byte aligned rows) -> XH [n_tok][K] f16
//   in fragment order, XSUM [n_tok][K/32] and XSUM16 [n_tok][K/16] f16, XINV [n_tok] f32: the
//   format of act_h16.cuh (its one definition, shared with the fused residual_norm_h16).
//
// mvh_{q4h,q6h}_s{4,8,16}: Y[t][r] = (Σ_k f16(q·dsc)·x'_k + Σ_b ndm_b·sum_b) · (XINV[t] · w_inv)
//   over mma.sync.m16n8k16 (f16 in, f32 accumulate). Block = S warps on one 16-row group and 8
//   tokens (blockIdx.y); warp w chains the MMAs of super-blocks w, w + S, w + 2S, … in order (per
//   super-block: loads j = 0..3, tiles i = 0..3, then the min MMA), and warp 0 adds the S chains
//   in warp order. Each output's operations depend on (K, S) only — not on the token count or
//   the other columns — so 1 token and 8 give the same bits; S per matrix is the host's
//   (`Registry::mvh_plan`). Needs n_out % 16 == 0, K % 256 == 0, 16-byte aligned W and XH.
//   The decode kernels hold the next piece in registers, or with MVH_BULK a ring of bulk copies
//   in shared memory (mvh_bulk_body); the same pieces in the same order either way.

#define ACT_H16_THREADS 128

// One thread per 32-value unit, ACT_H16_THREADS units per block (blockIdx.x), one token per
// blockIdx.y; each block reads its token's whole row for the row's largest magnitude (max is
// exact, so every block finds the same power of two). 128 threads: the configuration of the
// measured route (784bef7; docs/receipts/cuda-f16-route-02195bc.txt). act_h16_m: the same with
// the row's largest magnitude read from M[t] (its producer's atomicMax, elementwise.cu's `_m`
// kernels: the same value, so the same bits).
__device__ __forceinline__ void act_h16_row(const float* x, int K, int t, float amax, u16* XH,
                                            u16* XSUM, u16* XSUM16, float* XINV) {
    const int sh = h16_shift(amax);
    if (blockIdx.x == 0 && threadIdx.x == 0) XINV[t] = ldexpf(1.f, -sh);
    const int u = blockIdx.x * blockDim.x + threadIdx.x;
    if (u < K / 32)
        h16_unit(x, u, ldexpf(1.f, sh), XH + (size_t)t * K, XSUM + (size_t)t * (K / 32),
                 XSUM16 + (size_t)t * (K / 16));
}

extern "C" __global__ void __launch_bounds__(ACT_H16_THREADS)
    act_h16(const float* X, int ldx, int K, int n_tok, u16* XH, u16* XSUM, u16* XSUM16,
            float* XINV) {
    __shared__ float red[32];
    PDL_ENTRY()
    const int t = blockIdx.y;
    if (t >= n_tok) return;
    const float* x = X + (size_t)t * ldx;
    float amax = 0.f;
    for (int i = threadIdx.x; i < K / 4; i += blockDim.x) {
        const float4 v = ((const float4*)x)[i];
        amax = fmaxf(fmaxf(amax, fabsf(v.x)), fmaxf(fabsf(v.y), fmaxf(fabsf(v.z), fabsf(v.w))));
    }
    act_h16_row(x, K, t, h16_block_max(amax, red), XH, XSUM, XSUM16, XINV);
}

extern "C" __global__ void __launch_bounds__(ACT_H16_THREADS)
    act_h16_m(const float* X, int ldx, int K, int n_tok, u16* XH, u16* XSUM, u16* XSUM16,
              float* XINV, const u32* M) {
    PDL_ENTRY()
    const int t = blockIdx.y;
    if (t >= n_tok) return;
    act_h16_row(X + (size_t)t * ldx, K, t, __uint_as_float(M[t]), XH, XSUM, XSUM16, XINV);
}


// The matmul: S warps per 16-row group, TG groups of 8 tokens per warp (blockIdx.y covers 8·TG
// tokens). Every output's MMA sequence is the same for any TG — one A fragment feeds the TG
// token groups' MMAs — so decode (TG = 1) and prefill (TG = 4) give the same bits. The weights
// one piece ahead in registers.
template <class F, int S, int TG>
__device__ __forceinline__ void mvh_body(const u8* __restrict__ W, int n_out, int K,
                                         const u16* __restrict__ XH, const u16* __restrict__ XSUM,
                                         const u16* __restrict__ XSUM16,
                                         const float* __restrict__ XINV, float w_inv,
                                         float* __restrict__ Y, int ldy, int n_tok) {
    __shared__ float part[S][32][TG][4];
    const int warp = threadIdx.x >> 5;
    const int G = blockIdx.x, nsb = K / 256;
    const size_t pieces = (size_t)(n_out / 16) * nsb;
    const int tok0 = 8 * TG * blockIdx.y;
    float acc[TG][4];
#pragma unroll
    for (int n = 0; n < TG; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
#if MVH_PAIR
    if constexpr (TG == 1) {
        // S / 2 warps: chains warp and warp + S / 2, the second's sums into part first.
        float acc1[1][4] = {{0.f, 0.f, 0.f, 0.f}};
        mvh_chain_pair<F, S>(W, pieces, G, nsb, warp, K, XH, (const u32*)F::sums(XSUM, XSUM16),
                             tok0, n_tok, acc, acc1);
#pragma unroll
        for (int e = 0; e < 4; ++e) part[warp + S / 2][threadIdx.x & 31][0][e] = acc1[0][e];
        mvh_finish<S, TG>(acc, part, G, tok0, n_tok, XINV, w_inv, Y, ldy);
        return;
    }
#endif
    constexpr bool XS = MVH_XSTAGE && TG == 1;
    extern __shared__ __align__(16) u8 mvh_xs[];  // MVH_XSTAGE: [S warps][2][ntb][XST_TOK]
    const int ntb = n_tok < 8 ? n_tok : 8;
#if MVH_XSMEM
    if constexpr (TG == 1) {
        if (n_tok == 1) {  // the launch's one token, its row staged by the chains' wait
            const u32* sums = (const u32*)F::sums(XSUM, XSUM16);
            const XsmemWait<F> wait{XH, sums, K, mvh_xs};
            mvh_chain<F, S, 1, false, XsmemWait<F>, false>(
                W, pieces, G, nsb, warp, K, (const u16*)mvh_xs,
                (const u32*)(mvh_xs + 2 * (size_t)K), 0, 1, acc, wait);
            mvh_finish<S, TG>(acc, part, G, tok0, n_tok, XINV, w_inv, Y, ldy);
            return;
        }
    }
#endif
    mvh_chain<F, S, TG, XS>(W, pieces, G, nsb, warp, K, XH, (const u32*)F::sums(XSUM, XSUM16),
                            tok0, n_tok, acc, PdlWait(), mvh_xs + warp * 2 * ntb * XST_TOK);
    mvh_finish<S, TG>(acc, part, G, tok0, n_tok, XINV, w_inv, Y, ldy);
}

// ---- The FFN's gate and up matmuls and its SwiGLU in one decode launch (`MUSER_CUDA_H16_GLU=1`,
// up to 8 tokens per block row): a block of 2S warps holds one 16-row group of both matrices —
// warps 0..S−1 gate's S chains, warps S..2S−1 up's — each chain mvh_body's arithmetic, each
// matrix's chains added in warp order as mvh_finish does and scaled by its own w_inv, so gate and
// up are the values the two mvh launches give. Warp 0 then writes ew_swiglu(gate, up) to Y (the
// swiglu kernel's formula; strict math only — the host refuses the launch for fast-math
// activations) and folds each token's largest magnitude over the block's 16 rows into M[t]
// (atomicMax on the bits of non-negative floats, a NaN as 0: the row maxima of
// elementwise.cu's swiglu_m, exact in any order; M zeroed before the step). Y never holds
// the up projection. With MVH_PAIR the block is S warps, each running two of its matrix's
// chains (mvh_chain_pair); the partial sums land in the same places.
template <class F, int S>
__device__ __forceinline__ void mvh_glu_body(const u8* __restrict__ Wg, const u8* __restrict__ Wu,
                                             int n_out, int K, const u16* __restrict__ XH,
                                             const u16* __restrict__ XSUM,
                                             const u16* __restrict__ XSUM16,
                                             const float* __restrict__ XINV, float winv_g,
                                             float winv_u, float* __restrict__ Y, int ldy,
                                             int n_tok, u32* __restrict__ M) {
    __shared__ float part[2 * S][32][4];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int G = blockIdx.x, nsb = K / 256;
    const size_t pieces = (size_t)(n_out / 16) * nsb;
    const int tok0 = 8 * blockIdx.y;
    float acc[1][4] = {{0.f, 0.f, 0.f, 0.f}};
#if MVH_PAIR
    // S warps: 0 .. S/2 − 1 gate's chains c and c + S/2, the others up's; part as below.
    const int m = warp / (S / 2), c = warp % (S / 2);
    float acc1[1][4] = {{0.f, 0.f, 0.f, 0.f}};
    mvh_chain_pair<F, S>(m == 0 ? Wg : Wu, pieces, G, nsb, c, K, XH,
                         (const u32*)F::sums(XSUM, XSUM16), tok0, n_tok, acc, acc1);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        part[m * S + c][lane][e] = acc[0][e];
        part[m * S + c + S / 2][lane][e] = acc1[0][e];
    }
#else
    const u8* W = warp < S ? Wg : Wu;
    extern __shared__ __align__(16) u8 mvh_xs[];  // MVH_XSTAGE: [2S warps][2][ntb][XST_TOK]
    const int ntb = n_tok < 8 ? n_tok : 8;
#if MVH_XSMEM
    if (n_tok == 1) {  // as mvh_body's
        const u32* sums = (const u32*)F::sums(XSUM, XSUM16);
        const XsmemWait<F> wait{XH, sums, K, mvh_xs};
        mvh_chain<F, S, 1, false, XsmemWait<F>, false>(W, pieces, G, nsb, warp % S, K,
                                                       (const u16*)mvh_xs,
                                                       (const u32*)(mvh_xs + 2 * (size_t)K), 0,
                                                       1, acc, wait);
    } else
#endif
    mvh_chain<F, S, 1, MVH_XSTAGE != 0>(W, pieces, G, nsb, warp % S, K, XH,
                                         (const u32*)F::sums(XSUM, XSUM16), tok0, n_tok, acc,
                                         PdlWait(), mvh_xs + warp * 2 * ntb * XST_TOK);
#pragma unroll
    for (int e = 0; e < 4; ++e) part[warp][lane][e] = acc[0][e];
#endif
    __syncthreads();
    if (warp != 0) return;
    float ag[4], au[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        ag[e] = part[0][lane][e];
        au[e] = part[S][lane][e];
    }
#pragma unroll
    for (int w = 1; w < S; ++w)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            ag[e] = __fadd_rn(ag[e], part[w][lane][e]);
            au[e] = __fadd_rn(au[e], part[S + w][lane][e]);
        }
    const int r0 = 16 * G + g;
    float mx[2] = {0.f, 0.f};  // tokens tok0 + 2·t4 + 0 / 1
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const int row = r0 + 8 * (e >> 1), t = tok0 + 2 * t4 + (e & 1);
        if (t < n_tok) {
            const float yg = __fmul_rn(ag[e], __fmul_rn(XINV[t], winv_g));
            const float yu = __fmul_rn(au[e], __fmul_rn(XINV[t], winv_u));
            const float v = ew_swiglu(yg, yu);
            Y[(size_t)t * ldy + row] = v;
            mx[e & 1] = fmaxf(mx[e & 1], v == v ? fabsf(v) : 0.f);
        }
    }
    // Each token's maximum over the 8 lanes of its t4 (g = 0..7: lane bits 2..4).
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
        mx[0] = fmaxf(mx[0], __shfl_xor_sync(0xffffffffu, mx[0], o));
        mx[1] = fmaxf(mx[1], __shfl_xor_sync(0xffffffffu, mx[1], o));
    }
    if (g == 0) {
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const int t = tok0 + 2 * t4 + k;
            if (t < n_tok) atomicMax(M + t, __float_as_uint(mx[k]));
        }
    }
}

#define MVH_GLU_KERNEL(NAME, F, S)                                                                \
    extern "C" __global__ void MVH_BOUNDS(2 * MVH_THREADS_1(S), F::SM_WARPS)                      \
        NAME(const u8* Wg, const u8* Wu, int n_out, int K, const u16* XH, const u16* XSUM,        \
             const u16* XSUM16, const float* XINV, float winv_g, float winv_u, float* Y, int ldy, \
             int n_tok, u32* M) {                                                                 \
        mvh_glu_body<F, S>(Wg, Wu, n_out, K, XH, XSUM, XSUM16, XINV, winv_g, winv_u, Y, ldy,      \
                           n_tok, M);                                                             \
    }
MVH_GLU_KERNEL(mvh_glu_q4h_s2, FmtQ4H, 2)
MVH_GLU_KERNEL(mvh_glu_q4h_s4, FmtQ4H, 4)
MVH_GLU_KERNEL(mvh_glu_q6h_s2, FmtQ6H, 2)
MVH_GLU_KERNEL(mvh_glu_q6h_s4, FmtQ6H, 4)
MVH_GLU_KERNEL(mvh_glu_q4h_s8, FmtQ4H, 8)
MVH_GLU_KERNEL(mvh_glu_q4h_s16, FmtQ4H, 16)
MVH_GLU_KERNEL(mvh_glu_q6h_s8, FmtQ6H, 8)
MVH_GLU_KERNEL(mvh_glu_q6h_s16, FmtQ6H, 16)

// ---- The decode matmul with its weights streamed by bulk copies (MVH_BULK = D >= 2 stages,
// `MUSER_CUDA_MVH_BULK`): the same pieces, order and arithmetic as mvh_body (the same bits),
// but each warp's next D − 1 pieces are in flight as cp.async.bulk copies into its ring of D
// stages in dynamic shared memory ([S warps][D' stages][piece bytes], D' = mvh_bulk_stages),
// completing on one mbarrier per stage, instead of one piece ahead in registers. Lane 0 issues
// a piece's three section copies; the first D' − 1 are issued before the PDL wait (weights:
// no kernel writes them). A stage is refilled one iteration after it was read (after the
// warp's __syncwarp and a proxy fence).
#ifndef MVH_BULK
#define MVH_BULK 0
#endif
// The stages of an S-warp block of format F: MVH_BULK, fewer where S · D pieces would pass
// 200 KiB (the host's `Registry::mvh_bulk_smem` mirrors it).
template <class F, int S>
__device__ constexpr int mvh_bulk_stages() {
    constexpr int pb = F::S0 + F::S1 + F::S2, cap = 200 * 1024 / (S * pb);
    return MVH_BULK < cap ? MVH_BULK : (cap < 2 ? 2 : cap);
}
__device__ __forceinline__ u32 smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(u32 bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_expect(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}
// Wait for phase `parity` of the mbarrier at `bar` to complete; CLUSTER: acquire at cluster
// scope (arrivals from other blocks of the cluster, mvh_cluster_body).
template <bool CLUSTER = false>
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    u32 done = 0;
    while (!done) {
        if constexpr (CLUSTER)
            asm volatile(
                "{\n .reg .pred p;\n"
                " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                " selp.u32 %0, 1, 0, p;\n}"
                : "=r"(done)
                : "r"(bar), "r"(parity)
                : "memory");
        else
            asm volatile(
                "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                " selp.u32 %0, 1, 0, p;\n}"
                : "=r"(done)
                : "r"(bar), "r"(parity)
                : "memory");
    }
}
__device__ __forceinline__ void bulk_copy(u32 dst, const void* src, u32 bytes, u32 bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
        "l"(src), "r"(bytes), "r"(bar)
        : "memory");
}

template <class F, int S>
__device__ __forceinline__ void mvh_bulk_body(const u8* __restrict__ W, int n_out, int K,
                                              const u16* __restrict__ XH,
                                              const u16* __restrict__ XSUM,
                                              const u16* __restrict__ XSUM16,
                                              const float* __restrict__ XINV, float w_inv,
                                              float* __restrict__ Y, int ldy, int n_tok) {
    constexpr int D = mvh_bulk_stages<F, S>(), PB = F::S0 + F::S1 + F::S2;
    extern __shared__ __align__(128) u8 mvh_ring[];  // [S][D][PB]
    __shared__ __align__(8) unsigned long long bars[S][D];
    __shared__ float part[S][32][1][4];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int G = blockIdx.x, nsb = K / 256;
    const size_t pieces = (size_t)(n_out / 16) * nsb;
    const int tok0 = 8 * blockIdx.y;
    u8* ring = mvh_ring + (size_t)warp * D * PB;
    const u32 bar0 = smem_addr(&bars[warp][0]);
    const int n_c = warp < nsb ? (nsb - warp + S - 1) / S : 0;  // this warp's chain length
    if (lane == 0) {
#pragma unroll
        for (int d = 0; d < D; ++d) mbar_init(bar0 + 8 * d);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncwarp();
    // Piece c of the chain (super-block warp + c·S) into stage c % D.
    auto issue = [&](int c) {
        if (lane != 0 || c >= n_c) return;
        const u8 *p0, *p1, *p2;
        piece_at<F>(W, pieces, (size_t)G * nsb + warp + (size_t)c * S, p0, p1, p2);
        const u32 bar = bar0 + 8 * (c % D), dst = smem_addr(ring + (c % D) * PB);
        mbar_expect(bar, PB);
        bulk_copy(dst, p0, F::S0, bar);
        bulk_copy(dst + F::S0, p1, F::S1, bar);
        bulk_copy(dst + F::S0 + F::S1, p2, F::S2, bar);
    };
#pragma unroll
    for (int c = 0; c < D - 1; ++c) issue(c);
    PDL_ENTRY()
    float acc[1][4] = {{0.f, 0.f, 0.f, 0.f}};
    const u32* sums = (const u32*)F::sums(XSUM, XSUM16);
    for (int c = 0; c < n_c; ++c) {
        if (c > 0 && lane == 0) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        issue(c + D - 1);  // the stage read in iteration c − 1
        mbar_wait(bar0 + 8 * (c % D), (c / D) & 1);
        const u8* st = ring + (c % D) * PB;
        typename F::Regs r;
        F::template load_at<false>(st, st + F::S0, st + F::S0 + F::S1, lane, g, t4, r);
        __syncwarp();
        mvh_piece<F, S, 1>(r, warp + c * S, K, nsb, XH, sums, tok0, n_tok, g, t4, acc);
    }
    mvh_finish<S, 1>(acc, part, G, tok0, n_tok, XINV, w_inv, Y, ldy);
}

#define MVH_KERNEL(NAME, F, S, TG)                                                               \
    extern "C" __global__ void MVH_BOUNDS_##TG(MVH_THREADS_##TG(S), F::SM_WARPS)                 \
        NAME(const u8* W, int n_out, int K, const u16* XH, const u16* XSUM, const u16* XSUM16,   \
             const float* XINV, float w_inv, float* Y, int ldy, int n_tok) {                     \
        mvh_body<F, S, TG>(W, n_out, K, XH, XSUM, XSUM16, XINV, w_inv, Y, ldy, n_tok);           \
    }
#if MVH_BULK > 0
#define MVH_DECODE(NAME, F, S)                                                                   \
    extern "C" __global__ void __launch_bounds__(32 * S)                                         \
        NAME(const u8* W, int n_out, int K, const u16* XH, const u16* XSUM, const u16* XSUM16,   \
             const float* XINV, float w_inv, float* Y, int ldy, int n_tok) {                     \
        mvh_bulk_body<F, S>(W, n_out, K, XH, XSUM, XSUM16, XINV, w_inv, Y, ldy, n_tok);          \
    }
#else
#define MVH_DECODE(NAME, F, S) MVH_KERNEL(NAME, F, S, 1)
#endif
// Decode and packed rows: 8 tokens per block row.
MVH_DECODE(mvh_q4h_s2, FmtQ4H, 2)
MVH_DECODE(mvh_q6h_s2, FmtQ6H, 2)
MVH_DECODE(mvh_q4h_s4, FmtQ4H, 4)
MVH_DECODE(mvh_q4h_s8, FmtQ4H, 8)
MVH_DECODE(mvh_q4h_s16, FmtQ4H, 16)
MVH_DECODE(mvh_q6h_s4, FmtQ6H, 4)
MVH_DECODE(mvh_q6h_s8, FmtQ6H, 8)
MVH_DECODE(mvh_q6h_s16, FmtQ6H, 16)

// ---- The one-token kernels of S = 8 / 16 chains as thread-block clusters
// (`MUSER_CUDA_MVH_CLUSTER=1`, `Registry::mvh_cluster_plan`): mvh_{q4h,q6h}_s{8,16}_c{2,4} run a
// 16-row group's S chains on a cluster of C blocks of S / C warps (4), block rank r's warp w
// chaining chain r · S / C + w — the same mvh_chain (its stride S, its pieces, loads and MMAs) —
// and rank 0's warp 0 folding the S chains in chain order as mvh_finish does (mvh_fold_out): the
// same bits as mvh_*_s8 / _s16. Why: with blocks of 128 threads ptxas keeps the chain loop's
// addresses in registers (session 39's static SASS: at 256 / 512 threads it rematerialises them,
// ~20% more instructions per piece), and a block whose chains are all short (K = 6656 at S = 8:
// chains of 4, 4, 3, 3, 3, 3, 3, 3 pieces) leaves as soon as its chains end instead of idling
// until the block's longest one does. The other ranks store their chains' sums into rank 0's
// `part` through distributed shared memory and arrive on its mbarrier (release, cluster scope),
// then exit; rank 0's warp 0 waits on it (acquire). The cluster barrier pair orders the
// barrier's initialisation before any remote arrival. One token group per block row (TG = 1).
// Session 42 (full forge): the same bits, but slower — tg128 −1.4%, mvh_q4h_s8_c2 643 µs per token
// in the graph against mvh_q4h_s8's 583 — so off by default.
// Y, XH, …: as mvh_body; grid (C · n_out / 16, ceil(n_tok / 8)), cluster (C, 1, 1).
template <class F, int S, int C>
__device__ __forceinline__ void mvh_cluster_body(const u8* __restrict__ W, int n_out, int K,
                                                 const u16* __restrict__ XH,
                                                 const u16* __restrict__ XSUM,
                                                 const u16* __restrict__ XSUM16,
                                                 const float* __restrict__ XINV, float w_inv,
                                                 float* __restrict__ Y, int ldy, int n_tok) {
    static_assert(S % C == 0 && C >= 2 && C <= 8, "C blocks of S / C warps");
    constexpr int WB = S / C;                // warps per block
    __shared__ float part[S][32][1][4];      // rank 0: every chain's sums, by chain
    __shared__ __align__(8) unsigned long long bar;  // rank 0: the other ranks' arrivals
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const u32 rank = blockIdx.x % C;  // the cluster's rank: clusters of C along x
    const int G = blockIdx.x / C, nsb = K / 256, c = (int)rank * WB + warp;
    const size_t pieces = (size_t)(n_out / 16) * nsb;
    const int tok0 = 8 * blockIdx.y;
    if (rank == 0 && threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(&bar)),
                     "r"((C - 1) * WB * 32)
                     : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cl_arrive();  // rank 0's barrier initialised (waited for below, before any remote arrival)
    float acc[1][4] = {{0.f, 0.f, 0.f, 0.f}};
    mvh_chain<F, S, 1>(W, pieces, G, nsb, c, K, XH, (const u32*)F::sums(XSUM, XSUM16), tok0,
                       n_tok, acc);
    cl_wait();
    if (rank != 0) {
#pragma unroll
        for (int e = 0; e < 4; ++e) cl_st(cl_map(&part[c][lane][0][e], 0), acc[0][e]);
        asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(
                         cl_map(&bar, 0))
                     : "memory");
        return;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) part[c][lane][0][e] = acc[0][e];
    __syncthreads();
    if (warp != 0) return;
    mbar_wait<true>(smem_addr(&bar), 0);
    mvh_fold_out<S, 1>(acc, part, G, tok0, n_tok, XINV, w_inv, Y, ldy);
}
// Blocks per SM the bounds ask for: Q6H 16 warps' worth (unbounded, ptxas takes 153 registers:
// 13 warps per SM; bounded, 127 as mvh_q6h_s16), Q4H none (bounded to 16 warps its loop grows from
// 538 to 589 instructions at the same 126 registers — static SASS, session 42).
#define MVH_CLUSTER_MINB(F, S, C) ((F::SM_WARPS) == 16 ? 16 * (C) / (S) : 0)
#define MVH_CLUSTER_KERNEL(NAME, F, S, C)                                                        \
    extern "C" __global__ void __launch_bounds__(32 * (S) / (C), MVH_CLUSTER_MINB(F, S, C))      \
        NAME(const u8* W, int n_out, int K, const u16* XH, const u16* XSUM, const u16* XSUM16,   \
             const float* XINV, float w_inv, float* Y, int ldy, int n_tok) {                     \
        mvh_cluster_body<F, S, C>(W, n_out, K, XH, XSUM, XSUM16, XINV, w_inv, Y, ldy, n_tok);    \
    }
MVH_CLUSTER_KERNEL(mvh_q4h_s8_c2, FmtQ4H, 8, 2)
MVH_CLUSTER_KERNEL(mvh_q6h_s8_c2, FmtQ6H, 8, 2)
MVH_CLUSTER_KERNEL(mvh_q4h_s16_c4, FmtQ4H, 16, 4)
MVH_CLUSTER_KERNEL(mvh_q6h_s16_c4, FmtQ6H, 16, 4)

// Prefill: 32 tokens per block row (the prototype's best, docs/receipts/cuda-hmma-prototype.txt).
MVH_KERNEL(mmh_q4h_s2, FmtQ4H, 2, 4)
MVH_KERNEL(mmh_q6h_s2, FmtQ6H, 2, 4)
MVH_KERNEL(mmh_q4h_s4, FmtQ4H, 4, 4)
MVH_KERNEL(mmh_q4h_s8, FmtQ4H, 8, 4)
MVH_KERNEL(mmh_q4h_s16, FmtQ4H, 16, 4)
MVH_KERNEL(mmh_q6h_s4, FmtQ6H, 4, 4)
MVH_KERNEL(mmh_q6h_s8, FmtQ6H, 8, 4)
MVH_KERNEL(mmh_q6h_s16, FmtQ6H, 16, 4)
