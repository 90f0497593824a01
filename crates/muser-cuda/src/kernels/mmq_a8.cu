// mmq_a8.cu — the tensor-core matmul (prefill chunks) on A8 activations (issue 5's A/B of the
// activation format; benchmark and tests only): the staging of Q4_K and Q6_K-P weights × A8
// activations for mmq.cuh's tile. Needs common.cuh + formats_a16.cuh + mma_int8.cuh + mmq.cuh.
//
// One int8 MMA per sub-block (Q4_K, m16n8k32) or group (Q6_K, m16n8k16) per tile gives the
// exact integer sum the A8 decode kernels form with dp4a (formats_a8.cuh), converted exactly
// (I2F); the float chain is the A16 one (k4_step, q6_step), so every output equals the A8
// decode kernels' bit for bit (device test `kernels_a8`). Where A16 runs two MMAs per tile (hi
// and lo bytes) and splits its quants at staging, A8 runs one on the quants as they are.
//
// Token row in shared memory (XW = 20 words): the unit's 64 quants (16 words; Q4_K: natural
// order, word i = values 4i .. 4i+3; Q6_K: group g at words 4g .. 4g+3), then the token
// factors (Q4_K: xs, xs · xsum of sub-blocks 0 and 1; Q6_K: xs of groups 0..3). A fragment
// load of 8 rows × 4 words hits 32 distinct banks at stride 20.
//
//   XQ: [n_tok][K] i8.

#define MMQ8_XW 20
static_assert(4 * MMQ_BN <= MMQ_THREADS, "mmq_a8: one activation piece per thread at most");

// The integer sums of one m16n8k32 / m16n8k16 tile (s8 × s8), as exact floats.
__device__ __forceinline__ void mma8_k32(const u32* a, u32 b0, u32 b1, float* out) {
    const int zero[4] = {0, 0, 0, 0};
    int d[4];
    mma_k32(d, a, b0, b1, false, zero);
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = __int2float_rn(d[e]);
}
__device__ __forceinline__ void mma8_k16(u32 a0, u32 a1, u32 b, float* out) {
    const int zero[4] = {0, 0, 0, 0};
    int d[4];
    mma_k16(d, a0, a1, b, false, zero);
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = __int2float_rn(d[e]);
}

struct MmqQ4K8 {
    typedef signed char XE;
    static const int WW = MmqW4K::WW;
    static const int XW = MMQ8_XW;
    struct Regs {
        uint4 w[2];
        uint4 x;
        float xs;
        int xsum;
    };
    // Weights (MmqW4K); activation piece tid < 4 * MMQ_BN: token tid / 4, quants 16·(tid % 4)
    // .. +15 of the unit; token factors, threads MMQ_BM .. MMQ_BM + 2 * MMQ_BN: token f / 2,
    // sub-block f % 2.
    static __device__ __forceinline__ void fetch(const u8* W, u64 row_bytes, int n_out, int u,
                                                 const signed char* XQ, const float* XS,
                                                 const int* XSUM, int K, int n_tok, int row0,
                                                 int tok0, Regs& r) {
        const int tid = threadIdx.x, blk = u >> 2, c = u & 3;
        MmqW4K::fetch_w(W, row_bytes, n_out, u, row0, r.w);
        if (tid < 4 * MMQ_BN) {
            const int t = min(tok0 + tid / 4, n_tok - 1);
            r.x = *(const uint4*)(XQ + (size_t)t * K + 256 * blk + 64 * c + 16 * (tid & 3));
        }
        const int f = tid - MMQ_BM;
        if (f >= 0 && f < 2 * MMQ_BN) {
            const int t = min(tok0 + f / 2, n_tok - 1);
            const size_t g = (size_t)t * (K / 32) + 8 * blk + 2 * c + (f & 1);
            r.xs = XS[g];
            r.xsum = XSUM[g];
        }
    }
    static __device__ __forceinline__ void commit(int u, const Regs& r, u32* wsh, u32* xsh) {
        const int tid = threadIdx.x;
        MmqW4K::commit_w(u, r.w, wsh);
        if (tid < 4 * MMQ_BN) *(uint4*)(xsh + XW * (tid / 4) + 4 * (tid & 3)) = r.x;
        const int f = tid - MMQ_BM;
        if (f >= 0 && f < 2 * MMQ_BN) {
            float* dst = (float*)(xsh + XW * (f / 2) + 16 + 2 * (f & 1));
            dst[0] = r.xs;
            dst[1] = a16_xsm(r.xs, r.xsum);
        }
    }
    // One unit for the warp's 2 x MMQ_WN tiles: p[mt][nt][e] chained with sub-blocks 0 then 1.
    static __device__ __forceinline__ void compute(const u32* wsh, const u32* xsh, int wr, int wt,
                                                   float (&p)[2][MMQ_WN][4]) {
        const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
        const Frags4K fr(wsh, wr);
#pragma unroll
        for (int s = 0; s < 2; ++s) {
            u32 a[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) fr.a_op(mt, s, a[mt]);
#pragma unroll
            for (int nt = 0; nt < MMQ_WN; ++nt) {
                // B: token g of the tile, quants 4q.. and 16+4q.. of sub-block s.
                const u32* xr = xsh + XW * (wt + 8 * nt + g) + 8 * s;
                const u32 b0 = xr[q], b1 = xr[4 + q];
                // Token factors of the accumulator columns 2q, 2q+1.
                const float2 f0 = *(const float2*)(xsh + XW * (wt + 8 * nt + 2 * q) + 16 + 2 * s);
                const float2 f1 = *(const float2*)(xsh + XW * (wt + 8 * nt + 2 * q + 1) + 16 + 2 * s);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    float fs[4];
                    mma8_k32(a[mt], b0, b1, fs);
                    fr.step(mt, s, f0, f1, fs, p[mt][nt]);
                }
            }
        }
    }
};

struct MmqQ6KP8 {
    typedef signed char XE;
    static const int WW = MmqW6P::WW;
    static const int XW = MMQ8_XW;
    struct Regs {
        uint4 w0, w1;
        uint4 x;
        float xs;
    };
    // Weights (MmqW6P); thread tid < 4 * MMQ_BN: token tid / 4, group tid % 4 of the unit —
    // its 16 quants (values 128h + 32g + 16pt ..) and its scale.
    static __device__ __forceinline__ void fetch(const u8* W, u64 row_bytes, int n_out, int u,
                                                 const signed char* XQ, const float* XS,
                                                 const int*, int K, int n_tok, int row0, int tok0,
                                                 Regs& r) {
        const int tid = threadIdx.x, blk = u >> 2, h = (u >> 1) & 1, pt = u & 1;
        MmqW6P::fetch_w(W, row_bytes, n_out, u, row0, r.w0, r.w1);
        if (tid < 4 * MMQ_BN) {
            const int t = min(tok0 + tid / 4, n_tok - 1), gg = tid & 3;
            r.x = *(const uint4*)(XQ + (size_t)t * K + 256 * blk + 128 * h + 32 * gg + 16 * pt);
            r.xs = XS[(size_t)t * (K / 32) + 8 * blk + 4 * h + gg];
        }
    }
    static __device__ __forceinline__ void commit(int, const Regs& r, u32* wsh, u32* xsh) {
        const int tid = threadIdx.x;
        MmqW6P::commit_w(r.w0, r.w1, wsh);
        if (tid < 4 * MMQ_BN) {
            *(uint4*)(xsh + XW * (tid / 4) + 4 * (tid & 3)) = r.x;
            ((float*)xsh)[XW * (tid / 4) + 16 + (tid & 3)] = r.xs;
        }
    }
    static __device__ __forceinline__ void compute(const u32* wsh, const u32* xsh, int wr, int wt,
                                                   float (&p)[2][MMQ_WN][4]) {
        const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
        const Frags6K fr(wsh, wr);
#pragma unroll
        for (int gg = 0; gg < 4; ++gg) {
            u32 a[2][2];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) fr.a_op(mt, gg, a[mt]);
#pragma unroll
            for (int nt = 0; nt < MMQ_WN; ++nt) {
                // B: token g, quants 4q .. 4q+3 of group gg.
                const u32 b = xsh[XW * (wt + 8 * nt + g) + 4 * gg + q];
                const float xs0 = ((const float*)xsh)[XW * (wt + 8 * nt + 2 * q) + 16 + gg];
                const float xs1 = ((const float*)xsh)[XW * (wt + 8 * nt + 2 * q + 1) + 16 + gg];
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    float fs[4];
                    mma8_k16(a[mt][0], a[mt][1], b, fs);
                    fr.step(mt, gg, xs0, xs1, fs, p[mt][nt]);
                }
            }
        }
    }
};

MMQ_KERNEL(mmq_q4_k_a8, MmqQ4K8)
MMQ_KERNEL(mmq_q6p_a8, MmqQ6KP8)
