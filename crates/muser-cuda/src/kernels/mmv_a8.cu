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

// ---- Q4_K × A8 (MmvQ4K's layout): thread q feeds values 8q .. 8q+7 of each sub-block, k slots
// 4q.. (values 8q .. 8q+3) and 16+4q.. (8q+4 .. 8q+7) in both operands.
struct MmvQ4K8 {
    typedef signed char XE;
    struct Bases {
        const u8 *wh, *wa, *wb;  // header of this lane's row; quants of rows g, g + 8
        const signed char* x;    // token g: value 8q of unit 0
    };
    struct In {
        uint4 h;       // this lane's row's block header: d, dmin, 12 scale bytes
        uint2 qa, qb;  // quant bytes 8q .. 8q+7 of the unit's 32, rows g, g + 8
        uint2 x0, x1;  // token g: quants 8q .. 8q+7 of sub-blocks 0, 1
    };
    static __device__ __forceinline__ Bases bases(const u8* W, u64 row_bytes, int row0, int n_out,
                                                  const signed char* XQ, int K, int n_tok, int c) {
        const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
        Bases b;
        b.wh = opaque(W + (u64)min(row0 + g + 8 * (q & 1), n_out - 1) * row_bytes);
        b.wa = opaque(W + (u64)min(row0 + g, n_out - 1) * row_bytes + 16 + 32 * c + 8 * q);
        b.wb = opaque(W + (u64)min(row0 + g + 8, n_out - 1) * row_bytes + 16 + 32 * c + 8 * q);
        b.x = opaque(XQ + (size_t)min(g, n_tok - 1) * K + 8 * q);
        return b;
    }
    static __device__ __forceinline__ void fetch(const Bases& b, int u, In& in) {
        const int bo = (u >> 2) * 144;
        in.h = __ldg((const uint4*)(b.wh + bo));
        in.qa = __ldg((const uint2*)(b.wa + bo));
        in.qb = __ldg((const uint2*)(b.wb + bo));
        in.x0 = *(const uint2*)(b.x + 64 * u);
        in.x1 = *(const uint2*)(b.x + 64 * u + 32);
    }
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

// ---- Q6_K-P × A8 (MmvQ6KP's layout): thread q feeds l = 4q .. 4q+3 of each group of 16.
struct MmvQ6KP8 {
    typedef signed char XE;
    struct Bases {
        const u8 *wh, *wa, *wb;  // row base of this lane's row; rows g, g + 8 (unit offset in)
        const signed char* x;    // token g: value 16pt + 4q of unit 0's half
    };
    struct In {
        u32 A[2], B[2], H[2];  // rows g, g + 8: bytes 4q .. 4q+3 of runs A, B and qh
        u32 s01, s23;          // this lane's row: the unit's scales as MmvQ6K's pairs at part 0
        u32 d;                 // this lane's row: d's f16 bits
        u32 x[4];              // token g: quants 4q .. 4q+3 of groups 0..3
    };
    static __device__ __forceinline__ Bases bases(const u8* W, u64 row_bytes, int row0, int n_out,
                                                  const signed char* XQ, int K, int n_tok, int c) {
        const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
        const int h = c >> 1, pt = c & 1;
        Bases b;
        b.wh = opaque(W + (u64)min(row0 + g + 8 * (q & 1), n_out - 1) * row_bytes);
        b.wa = opaque(W + (u64)min(row0 + g, n_out - 1) * row_bytes + 48 * c + 4 * q);
        b.wb = opaque(W + (u64)min(row0 + g + 8, n_out - 1) * row_bytes + 48 * c + 4 * q);
        b.x = opaque(XQ + (size_t)min(g, n_tok - 1) * K + 128 * h + 16 * pt + 4 * q);
        return b;
    }
    static __device__ __forceinline__ void fetch(const Bases& b, int u, In& in) {
        const int blk = u >> 2, e = blk & 1;
        const u32 po = q6p_pair_off(blk), bo = po + 192 * e;
        const u8* r[2] = {b.wa + bo, b.wb + bo};
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            in.A[i] = __ldg((const u32*)r[i]);
            in.B[i] = __ldg((const u32*)(r[i] + 16));
            in.H[i] = __ldg((const u32*)(r[i] + 32));
        }
        q6p_scale_pairs(__ldg((const u32*)(b.wh + po + 384 + 16 * e + 4 * (u & 3))), in.s01,
                        in.s23);
        in.d = __ldg((const unsigned short*)(b.wh + po + 416 + 2 * e));
        const signed char* x = b.x + 256 * blk;
#pragma unroll
        for (int g = 0; g < 4; ++g) in.x[g] = *(const u32*)(x + 32 * g);
    }
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
