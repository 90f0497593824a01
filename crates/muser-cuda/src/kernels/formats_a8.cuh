// formats_a8.cuh — weight units × A8 activations: int8 quants in -127..127 with one f32 scale
// and one int32 quant sum per 32 values (the quantization of muser_quant::a8), for the decode
// matvecs: Q4_K and Q6_K-P in both bodies (mva_pipe, mva_body), Q5_K, Q8_0 and Q5_0 in the plain
// one (mva_body's dot<NT>, as their A16 formats). Needs common.cuh + formats_a16.cuh. No F16 /
// F32 twin: float weights keep 16-bit activations (the engine refuses them on the A8 route).
// Owns the activation side only. The weight side (loads, registers, the block walk) is the A16
// format's (AQ4K, AQ6KP), and so is each unit's float chain (k4_step / q6_step on the exact
// integer sums, the same operations in the same order): A8 and A16 outputs differ only through
// the activations' rounding. The integer sums take dp4a (four int8 products per instruction
// where A16's dp2a takes two) and half the activation bytes (64 per unit).
//
//   XQ: [n_tok][K] i8   XS: [n_tok][K/32] f32   XSUM: [n_tok][K/32] i32

// 16 activation quants (one aligned 16-byte run) as four words of four values.
__device__ __forceinline__ void ld_xq16(const signed char* q, u32* x) {
    const uint4 a = *(const uint4*)q;
    x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w;
}

// ---- Q4_K × A8. Unit c: sub-blocks 2c (low nibbles, activations 64c ..) and 2c+1 (high,
// 64c + 32 ..); quant word i holds values 4i .. 4i+3 of both, activation word i the same.
struct AQ4K8 : AQ4K {
    struct X {
        u32 a[8], b[8];
        float s0, s1;
        int m0, m1;
    };
    template <int XP>
    static __device__ __forceinline__ void loadx(int c, const signed char* xq, const float* xs,
                                                 const int* xsum, X& x) {
        const signed char* q = xq + xoff<XP>(64 * c);
        ld_xq16(q, x.a);
        ld_xq16(q + 16, x.a + 4);
        ld_xq16(q + 32, x.b);
        ld_xq16(q + 48, x.b + 4);
        x.s0 = xs[2 * c]; x.s1 = xs[2 * c + 1];
        x.m0 = xsum[2 * c]; x.m1 = xsum[2 * c + 1];
    }
    static __device__ __forceinline__ void compute_x(const W& w, int c, const X& x, float* acc) {
        const K4Factors f = k4_factors(w.dm, w.sw, c);
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            s0 = __dp4a((int)(w.q[i] & 0x0F0F0F0Fu), (int)x.a[i], s0);
            s1 = __dp4a((int)((w.q[i] >> 4) & 0x0F0F0F0Fu), (int)x.b[i], s1);
        }
        float p = k4_step(*acc, f.a0, f.nb0, x.s0, (float)s0, a16_xsm(x.s0, x.m0));
        *acc = k4_step(p, f.a1, f.nb1, x.s1, (float)s1, a16_xsm(x.s1, x.m1));
    }
    template <int NT>
    static __device__ __forceinline__ void compute(const W& w, int c, const signed char* xq,
                                                   const float* xs, const int* xsum, int K,
                                                   float* acc) {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            X x;
            loadx<64>(c, xq + (size_t)t * K, xs + (size_t)t * (K / 32), xsum + (size_t)t * (K / 32), x);
            compute_x(w, c, x, acc + t);
        }
    }
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int c, const signed char* xq,
                                               const float* xs, const int* xsum, int K, float* acc) {
        W w;
        load(b, c, w);
        compute<NT>(w, c, xq, xs, xsum, K, acc);
    }
};
template <>
struct XType<AQ4K8> {
    typedef signed char T;
    static const int PAD = 80;
};

// ---- Q6_K-P × A8. Unit u (half h, part p): groups g of 16 values 128h + 32g + 16p ..; weight
// word q[g][i] (AQ6K::decode) and activation word x.q[g][i] both hold values 4i .. 4i+3.
struct AQ6KP8 : AQ6KP {
    struct X {
        u32 q[4][4];
        float s[4];
    };
    template <int XP>
    static __device__ __forceinline__ void loadx(int u, const signed char* xq, const float* xs,
                                                 const int*, X& x) {
        const int half = u >> 1, part = u & 1;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            ld_xq16(xq + xoff<XP>(128 * half + 32 * g + 16 * part), x.q[g]);
            x.s[g] = xs[4 * half + g];
        }
    }
    static __device__ __forceinline__ void compute_x(const W& w, int, const X& x, float* acc) {
        float sc[4];
        u32 q[4][4];
        AQ6K::decode(w, sc, q);
        float p = *acc;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            int is = 0;
#pragma unroll
            for (int i = 0; i < 4; ++i) is = __dp4a((int)q[g][i], (int)x.q[g][i], is);
            p = q6_step(p, sc[g], x.s[g], (float)is);
        }
        *acc = p;
    }
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int u, const signed char* xq,
                                               const float* xs, const int* xsum, int K, float* acc) {
        W w;
        load(b, u, w);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            X x;
            loadx<64>(u, xq + (size_t)t * K, xs + (size_t)t * (K / 32), xsum, x);
            compute_x(w, u, x, acc + t);
        }
    }
};
template <>
struct XType<AQ6KP8> {
    typedef signed char T;
    static const int PAD = 80;
};

// ---- The plain-body formats (dot<NT> only, as their A16 twins): the A16 format's weight
// decoding (`words`) and float chain, dp4a on activation words of four values.

// One 32-value block of signed 8-bit weights (word i: values 4i .. 4i+3) with scale d, for NT
// tokens: exact integer sum, then d * (sx * sum) — dot32_i8's chain.
template <int NT>
__device__ __forceinline__ void dot32_i8_a8(const u32* w, float d, const signed char* xq,
                                            const float* xs, int K, float* acc) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        u32 x[8];
        ld_xq16(xq + (size_t)t * K, x);
        ld_xq16(xq + (size_t)t * K + 16, x + 4);
        int is = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) is = __dp4a((int)w[i], (int)x[i], is);
        acc[t] += d * (xs[(size_t)t * (K / 32)] * (float)is);
    }
}

// ---- Q8_0 / Q5_0 × A8: the 32-value block format A (AQ80, AQ50) decodes its weights (`words`).
template <class A>
struct ABlk32A8 {
    static const int BLOCK_VALS = 32, BLOCK_BYTES = A::BLOCK_BYTES, UNITS = 1;
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int, const signed char* xq,
                                               const float* xs, const int*, int K, float* acc) {
        u32 w[8];
        const float d = A::words(b, w);
        dot32_i8_a8<NT>(w, d, xq, xs, K, acc);
    }
};
template <class A>
struct XType<ABlk32A8<A> > {
    typedef signed char T;
    static const int PAD = 80;
};
typedef ABlk32A8<AQ80> AQ808;
typedef ABlk32A8<AQ50> AQ508;

// ---- Q5_K × A8. Unit c: sub-blocks 2c (lo) and 2c+1 (hi), as AQ5K.
struct AQ5K8 {
    static const int BLOCK_VALS = 256, BLOCK_BYTES = 176, UNITS = 4;
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int c, const signed char* xq,
                                               const float* xs, const int* xsum, int K, float* acc) {
        u32 lo[8], hi[8];
        const K4Factors f = AQ5K::words(b, c, lo, hi);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const signed char* x = xq + (size_t)t * K + 64 * c;
            u32 xa[8], xb[8];
            ld_xq16(x, xa);
            ld_xq16(x + 16, xa + 4);
            ld_xq16(x + 32, xb);
            ld_xq16(x + 48, xb + 4);
            int s0 = 0, s1 = 0;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                s0 = __dp4a((int)lo[i], (int)xa[i], s0);
                s1 = __dp4a((int)hi[i], (int)xb[i], s1);
            }
            const int g = (size_t)t * (K / 32) + 2 * c;
            const float sx0 = xs[g], sx1 = xs[g + 1];
            const float p = k4_step(acc[t], f.a0, f.nb0, sx0, (float)s0, a16_xsm(sx0, xsum[g]));
            acc[t] = k4_step(p, f.a1, f.nb1, sx1, (float)s1, a16_xsm(sx1, xsum[g + 1]));
        }
    }
};
template <>
struct XType<AQ5K8> {
    typedef signed char T;
    static const int PAD = 80;
};
