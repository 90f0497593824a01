// mmv_a8.cu — packed decode rows on the int8 tensor cores with A8 activations
// (`MUSER_CUDA_ACTS=a8`): one s8 × s8 MMA per Q4_K sub-block or Q6_K group where A16 needs a
// hi/lo pair, with mmv_a16.cu's fragments, group factors and float chain — every (row, token)
// output equals the one-token A8 kernels' (matvec_a8.cu) bit for bit (device test
// `kernels_a8.rs`). Q4_K and Q6_K-P (the A8 route's Q6_K layout). Needs common.cuh +
// formats_a16.cuh + mma_int8.cuh + mmv.cuh.

// One tile's exact integer sums (k32 or k16 MMA from zero) as floats: (float)s, as decode's.
__device__ __forceinline__ void mmv8_floats(const int (&d)[4], float (&fs)[4]) {
#pragma unroll
    for (int e = 0; e < 4; ++e) fs[e] = __int2float_rn(d[e]);
}

// ---- Q4_K × A8 (MmvQ4KLoad's fragments).
struct MmvQ4K8 : MmvQ4KLoad<signed char> {
    // fq: (xs, xsm) of tokens 2q, 2q+1 for group G at fq[4 G].
    static __device__ __forceinline__ void consume(const In& in, int u, int c, const float4* fq,
                                                   float* p) {
        const int q = threadIdx.x & 3;
        const u32 sw[3] = {in.h.y, in.h.z, in.h.w};
        const K4Factors k = k4_factors(in.h.x, sw, c);
        const float mine[4] = {k.a0, k.nb0, k.a1, k.nb1};
        float fa[4], fb[4];
        quad_rows(mine, q, fa, fb);
        const int zero[4] = {0, 0, 0, 0};
#pragma unroll
        for (int s = 0; s < 2; ++s) {
            const u32 a[4] = {(in.qa.x >> (4 * s)) & 0x0F0F0F0Fu, (in.qb.x >> (4 * s)) & 0x0F0F0F0Fu,
                              (in.qa.y >> (4 * s)) & 0x0F0F0F0Fu, (in.qb.y >> (4 * s)) & 0x0F0F0F0Fu};
            const uint2 x = s ? in.x1 : in.x0;
            int d[4];
            mma_k32(d, a, x.x, x.y, false, zero);
            float fs[4];
            mmv8_floats(d, fs);
            const float4 tf = fq[4 * (2 * u + s)];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float* f = (e >> 1) ? fb : fa;
                p[e] = k4_step(p[e], f[2 * s], f[2 * s + 1], (e & 1) ? tf.z : tf.x, fs[e],
                               (e & 1) ? tf.w : tf.y);
            }
        }
    }
};

// ---- Q6_K-P × A8 (MmvQ6KPLoad's fragments).
struct MmvQ6KP8 : MmvQ6KPLoad<signed char> {
    static __device__ __forceinline__ void consume(const In& in, int u, int c, const float4* fq,
                                                   float* p) {
        const int q = threadIdx.x & 3, h = c >> 1;
        float mine[4];
        mmv_q6_scales(in.s01, in.s23, in.d, 0, mine);
        float fa[4], fb[4];
        quad_rows(mine, q, fa, fb);
        const int grp0 = 8 * (u >> 2) + 4 * h;  // the unit's first group of 32 (scale index)
        const int zero[4] = {0, 0, 0, 0};
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            u32 a[2];
            mmv_q6_frag(in.A, in.B, in.H, g, a);
            int d[4];
            mma_k16(d, a[0], a[1], in.x[g], false, zero);
            float fs[4];
            mmv8_floats(d, fs);
            const float4 tf = fq[4 * (grp0 + g)];
#pragma unroll
            for (int e = 0; e < 4; ++e)
                p[e] = q6_step(p[e], (e >> 1) ? fb[g] : fa[g], (e & 1) ? tf.z : tf.x, fs[e]);
        }
    }
};

MMV_KERNEL(mmv_q4_k_a8, mmv_body, MmvQ4K8)
MMV_KERNEL(mmv_q6p_a8, mmv_body, MmvQ6KP8)
