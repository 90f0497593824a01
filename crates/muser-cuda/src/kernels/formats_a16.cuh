// formats_a16.cuh — weight blocks × A16 activations (int16 quants, one f32 scale and one int32
// quant sum per 32 values; Muser's activation format, see muser_quant::a16).
// Owns: per weight format, the integer dot product of one "unit" (the slice of a block one lane
// handles) with the activation quants for NT tokens, via dp2a (int16 pair × int8 pair).
// Invariants: the integer sums are exact; each unit is one fixed chain of explicitly rounded
// float operations into its lane's partial, the same for every token slot and every NT — decode,
// prefill chunks, packed batches and the tensor-core tiles (mmq_a16.cu) agree bit for bit.
//
//   XQ: [n_tok][K] i16   XS: [n_tok][K/32] f32   XSUM: [n_tok][K/32] i32
//   dot<NT>(blk, u, xq, xs, xsum, K, acc): xq/xs/xsum point at the block's first value/group for
//   token 0; token t is at +t*K (quants) and +t*K/32 (scales, sums).

// Activation layouts. XP = 64: plain (value v at v). XP = 72: the padded shared-memory copy
// of the decode kernels (mvs_*): every 64 values are followed by 8 unused slots, so the 16-byte
// reads of lanes 128 bytes apart fall in different banks. Runs read by the formats are 16-value
// aligned and never cross a 64-value boundary, so a run stays contiguous in either layout.
template <int XP>
__device__ __forceinline__ int xoff(int v) {
    return XP == 64 ? v : (v >> 6) * XP + (v & 63);
}
// A format's activation side: the quants' element type and the padded stride (elements per 64
// values) of the decode kernels' shared-memory copy. A16 (int16, 72) unless specialized (the
// A8 formats, formats_a8.cuh: int8, 80 — 16 bytes of pad per 64, as here).
template <class F>
struct XType {
    typedef short T;
    static const int PAD = 72;
};

// 16 bytes at a 2-byte-aligned address as four little-endian words. Two forms (the A/B switch
// MUSER_CUDA_LD16, -DMUSER_LD16_WINDOW): "words", five aligned 4-byte loads + funnel shifts
// (may read 3 bytes past the run); "window" (default), the two aligned 16-byte loads around the
// run + selects + funnel shifts — fewer, wider load instructions (may read up to 16 bytes past
// the run). The arena keeps slack after the last tensor for either.
#ifndef MUSER_LD16_WINDOW
#define MUSER_LD16_WINDOW 1
#endif
// The window form in two steps, so the loads can be issued long before the data is used:
// win16_load fetches the two aligned 16-byte words around p; win16_words extracts the run.
struct Win16 {
    uint4 a, b;
    u32 off;  // p & 15
};
__device__ __forceinline__ void win16_load(const u8* p, Win16& w) {
    const u64 a = (u64)p;
    const uint4* b = (const uint4*)(a & ~(u64)15);
    w.a = __ldg(b);
    w.b = __ldg(b + 1);
    w.off = (u32)(a & 15);
}
__device__ __forceinline__ void win16_words(const Win16& w, u32* out) {
    const u32 v[8] = {w.a.x, w.a.y, w.a.z, w.a.w, w.b.x, w.b.y, w.b.z, w.b.w};
    const u32 k = w.off >> 2, sh = (w.off & 3) * 8;
    u32 s[5];
#pragma unroll
    for (int i = 0; i < 5; ++i)
        s[i] = k == 0 ? v[i] : (k == 1 ? v[i + 1] : (k == 2 ? v[i + 2] : v[i + 3]));
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = __funnelshift_r(s[i], s[i + 1], sh);
}
__device__ __forceinline__ void ld16_a2(const u8* p, u32* w) {
#if MUSER_LD16_WINDOW
    Win16 win;
    win16_load(p, win);
    win16_words(win, w);
#else
    const u64 a = (u64)p;
    const u32* b = (const u32*)(a & ~(u64)3);
    const u32 sh = (u32)(a & 3) * 8;
    u32 v[5];
#pragma unroll
    for (int i = 0; i < 5; ++i) v[i] = b[i];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = __funnelshift_r(v[i], v[i + 1], sh);
#endif
}

// Activation quant pairs: word j holds values 2j, 2j+1 of a run starting at `q`.
__device__ __forceinline__ void ld_xq8(const short* q, u32* x) {  // 16 values -> 8 words
    const uint4 a = *(const uint4*)q, b = *(const uint4*)(q + 8);
    x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w; x[4] = b.x; x[5] = b.y; x[6] = b.z; x[7] = b.w;
}

// sum over 4 int8 weights (bytes of w) times 4 int16 activations (x0 = values 0,1; x1 = 2,3).
__device__ __forceinline__ int dot4(u32 w, u32 x0, u32 x1, int acc) {
    acc = __dp2a_lo((int)x0, (int)w, acc);
    return __dp2a_hi((int)x1, (int)w, acc);
}

// Each unit's float arithmetic is a fixed chain of explicitly rounded operations into the
// lane's running partial p (no contraction choices left to the compiler), shared by the
// matvec kernels and the tensor-core tiles (mmq_a16.cu), so both produce the same bits.
// The integer sums s are exact and |s| < 2^24, so (float)s is exact however it is formed.

// Q4_K/Q5_K row factors of unit c (sub-blocks 2c, 2c+1): a = d * sc, nb = -(dmin * m).
struct K4Factors {
    float a0, nb0, a1, nb1;
};
__device__ __forceinline__ K4Factors k4_factors(u32 dm, const u32* sw, int c) {
    const float d = h2f((u16)(dm & 0xFFFF)), dmin = h2f((u16)(dm >> 16));
    float sc0, m0, sc1, m1;
    k4_scales_pair(sw, c, &sc0, &m0, &sc1, &m1);
    K4Factors f;
    f.a0 = __fmul_rn(d, sc0);
    f.nb0 = -__fmul_rn(dmin, m0);
    f.a1 = __fmul_rn(d, sc1);
    f.nb1 = -__fmul_rn(dmin, m1);
    return f;
}
// An activation group's scale times its quant sum (the min term's token factor).
__device__ __forceinline__ float a16_xsm(float xs, int xsum) { return __fmul_rn(xs, i22f(xsum)); }
// One Q4_K/Q5_K sub-block: p + a * (xs * s) + nb * xsm.
__device__ __forceinline__ float k4_step(float p, float a, float nb, float xs, float fs, float xsm) {
    p = __fmaf_rn(a, __fmul_rn(xs, fs), p);
    return __fmaf_rn(nb, xsm, p);
}
// One Q6_K group of 16: p + sc * (xs * s), sc = d * scale.
__device__ __forceinline__ float q6_scale(float d, int scale) { return __fmul_rn(d, i22f(scale)); }
__device__ __forceinline__ float q6_step(float p, float sc, float xs, float fs) {
    return __fmaf_rn(sc, __fmul_rn(xs, fs), p);
}

// ---- Q4_K (144 B, 16-aligned). Unit c: sub-blocks 2c (low nibbles) and 2c+1 (high).
struct AQ4K {
    static const int BLOCK_VALS = 256, BLOCK_BYTES = 144, UNITS = 4;
    struct W {
        u32 dm, sw[3], q[8];
    };
    static __device__ __forceinline__ void load(const u8* b, int c, W& w) {
        const uint4 h = *(const uint4*)b;
        w.dm = h.x; w.sw[0] = h.y; w.sw[1] = h.z; w.sw[2] = h.w;
        const uint4 qa = ((const uint4*)(b + 16 + 32 * c))[0], qb = ((const uint4*)(b + 16 + 32 * c))[1];
        w.q[0] = qa.x; w.q[1] = qa.y; w.q[2] = qa.z; w.q[3] = qa.w;
        w.q[4] = qb.x; w.q[5] = qb.y; w.q[6] = qb.z; w.q[7] = qb.w;
    }
    // The pipelined kernels' in-flight form (see AQ6K): plain loads need no second step.
    typedef W Raw;
    static __device__ __forceinline__ void load_raw(const u8* b, int c, Raw& r) { load(b, c, r); }
    static __device__ __forceinline__ void finish(const Raw& r, W& w) { w = r; }
    // The weight ring's form (matvec_pipe.cuh, MVA_WSTAGES): unit c as NCH 16-byte chunks
    // (header, quants 0..15, quants 16..31), chunk j at s[32 j].
    static const int NCH = 3;
    static __device__ __forceinline__ const u8* chunk(const u8* b, int c, int j) {
        return j == 0 ? b : b + 16 * (2 * c + j);
    }
    static __device__ __forceinline__ void from_chunks(const uint4* s, const u8*, int, W& w) {
        const uint4 h = s[0], qa = s[32], qb = s[64];
        w.dm = h.x; w.sw[0] = h.y; w.sw[1] = h.z; w.sw[2] = h.w;
        w.q[0] = qa.x; w.q[1] = qa.y; w.q[2] = qa.z; w.q[3] = qa.w;
        w.q[4] = qb.x; w.q[5] = qb.y; w.q[6] = qb.z; w.q[7] = qb.w;
    }
    // One token's activations for unit c: 64 quants (two runs of 32), scales and sums.
    struct X {
        u32 a[16], b[16];
        float s0, s1;
        int m0, m1;
    };
    template <int XP>
    static __device__ __forceinline__ void loadx(int c, const short* xq, const float* xs,
                                                 const int* xsum, X& x) {
        const short* q = xq + xoff<XP>(64 * c);
        ld_xq8(q, x.a); ld_xq8(q + 16, x.a + 8);
        ld_xq8(q + 32, x.b); ld_xq8(q + 48, x.b + 8);
        x.s0 = xs[2 * c]; x.s1 = xs[2 * c + 1];
        x.m0 = xsum[2 * c]; x.m1 = xsum[2 * c + 1];
    }
    static __device__ __forceinline__ void compute_x(const W& w, int c, const X& x, float* acc) {
        const K4Factors f = k4_factors(w.dm, w.sw, c);
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            s0 = dot4(w.q[i] & 0x0F0F0F0Fu, x.a[2 * i], x.a[2 * i + 1], s0);
            s1 = dot4((w.q[i] >> 4) & 0x0F0F0F0Fu, x.b[2 * i], x.b[2 * i + 1], s1);
        }
        float p = k4_step(*acc, f.a0, f.nb0, x.s0, (float)s0, a16_xsm(x.s0, x.m0));
        *acc = k4_step(p, f.a1, f.nb1, x.s1, (float)s1, a16_xsm(x.s1, x.m1));
    }
    template <int NT>
    static __device__ __forceinline__ void compute(const W& w, int c, const short* xq, const float* xs,
                                                   const int* xsum, int K, float* acc) {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            X x;
            loadx<64>(c, xq + (size_t)t * K, xs + (size_t)t * (K / 32), xsum + (size_t)t * (K / 32), x);
            compute_x(w, c, x, acc + t);
        }
    }
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int c, const short* xq, const float* xs,
                                               const int* xsum, int K, float* acc) {
        W w;
        load(b, c, w);
        compute<NT>(w, c, xq, xs, xsum, K, acc);
    }
};

// ---- Q5_K (176 B, 16-aligned): d, dmin, scales[12], qh[32], qs[128].
struct AQ5K {
    static const int BLOCK_VALS = 256, BLOCK_BYTES = 176, UNITS = 4;
    // Unit c's row factors and its weights: lo[i] / hi[i] hold values 4i .. 4i+3 of sub-blocks
    // 2c / 2c+1 as unsigned 5-bit bytes. Shared with the A8 twin (formats_a8.cuh).
    static __device__ __forceinline__ K4Factors words(const u8* b, int c, u32 (&lo)[8],
                                                      u32 (&hi)[8]) {
        const u32 dm = *(const u32*)b;
        u32 sw[3] = {((const u32*)b)[1], ((const u32*)b)[2], ((const u32*)b)[3]};
        const K4Factors f = k4_factors(dm, sw, c);
        const uint4 ha = ((const uint4*)(b + 16))[0], hb = ((const uint4*)(b + 16))[1];
        const u32 hw[8] = {ha.x, ha.y, ha.z, ha.w, hb.x, hb.y, hb.z, hb.w};
        const uint4 qa = ((const uint4*)(b + 48 + 32 * c))[0], qb = ((const uint4*)(b + 48 + 32 * c))[1];
        const u32 qw[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            lo[i] = (qw[i] & 0x0F0F0F0Fu) | (((hw[i] >> (2 * c)) & 0x01010101u) << 4);
            hi[i] = ((qw[i] >> 4) & 0x0F0F0F0Fu) | (((hw[i] >> (2 * c + 1)) & 0x01010101u) << 4);
        }
        return f;
    }
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int c, const short* xq, const float* xs,
                                               const int* xsum, int K, float* acc) {
        u32 lo[8], hi[8];
        const K4Factors f = words(b, c, lo, hi);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const short* x = xq + (size_t)t * K + 64 * c;
            u32 xa[16], xb[16];
            ld_xq8(x, xa); ld_xq8(x + 16, xa + 8);
            ld_xq8(x + 32, xb); ld_xq8(x + 48, xb + 8);
            int s0 = 0, s1 = 0;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                s0 = dot4(lo[i], xa[2 * i], xa[2 * i + 1], s0);
                s1 = dot4(hi[i], xb[2 * i], xb[2 * i + 1], s1);
            }
            const int g = (size_t)t * (K / 32) + 2 * c;
            const float sx0 = xs[g], sx1 = xs[g + 1];
            const float p = k4_step(acc[t], f.a0, f.nb0, sx0, (float)s0, a16_xsm(sx0, xsum[g]));
            acc[t] = k4_step(p, f.a1, f.nb1, sx1, (float)s1, a16_xsm(sx1, xsum[g + 1]));
        }
    }
};

// ---- Q6_K (210 B, 2-aligned): ql[128], qh[64], scales[16] i8, d. Unit u = 2*half + part:
// l in [16 part, 16 part + 16) of that half; four groups of 16 (values l, l+32, l+64, l+96 of
// the half; scales part, part+2, part+4, part+6).
struct AQ6K {
    static const int BLOCK_VALS = 256, BLOCK_BYTES = 210, UNITS = 4;
    struct W {
        u32 A[4], B[4], H[4], sd;  // sd: scales s[0], s[2] (low 16 bits), d (high 16 bits)
        u32 s46;                   // scales s[4], s[6]
    };
    // scales s[j], j = 8 half + part + {0, 2, 4, 6}: bytes part, part+2 of words 2 half and
    // 2 half + 1 of the 16 scale bytes; d's f16 bits.
    static __device__ __forceinline__ void pack_scales(const u32* sc, u32 dbits, int u, W& w) {
        const int half = u >> 1, part = u & 1;
        const u32 lo = half ? sc[2] : sc[0], hi = half ? sc[3] : sc[1];
        const u32 sh = 8 * part;
        w.sd = ((lo >> sh) & 0xFFu) | (((lo >> (sh + 16)) & 0xFFu) << 8) | (dbits << 16);
        w.s46 = ((hi >> sh) & 0xFFu) | (((hi >> (sh + 16)) & 0xFFu) << 8);
    }
    static __device__ __forceinline__ void load(const u8* b, int u, W& w) {
        const int half = u >> 1, part = u & 1;
        ld16_a2(b + 64 * half + 16 * part, w.A);
        ld16_a2(b + 64 * half + 32 + 16 * part, w.B);
        ld16_a2(b + 128 + 32 * half + 16 * part, w.H);
        u32 sc[4];
        ld16_a2(b + 192, sc);
        pack_scales(sc, __ldg((const unsigned short*)(b + 208)), u, w);
    }
    // The pipelined decode kernels load the next unit while computing the current one. With
    // -DMVA_Q6_LAZY=1 (the default; `MUSER_CUDA_Q6_LAZY=0` for A/B) the in-flight form is the
    // four raw aligned windows (runs A, B, H and the scales, which share one misalignment:
    // every run starts a multiple of 16 bytes into the block), extracted only at `finish` — so
    // the loads are not waited on where they are issued (tg128 on the H200: 109.5 tok/s vs
    // 102.2 with `load` extracting at once). Same words either way.
#ifndef MVA_Q6_LAZY
#define MVA_Q6_LAZY 1
#endif
    // Unit u's four aligned 32-byte windows (runs A, B, H, the scales; every run starts a
    // multiple of 16 bytes into the block, so they share one misalignment off = b & 15) into W.
    static __device__ __forceinline__ void from_windows(const uint4* a, const uint4* bw, u32 off,
                                                        int u, W& w) {
        Win16 win;
        win.off = off;
        win.a = a[0]; win.b = bw[0]; win16_words(win, w.A);
        win.a = a[1]; win.b = bw[1]; win16_words(win, w.B);
        win.a = a[2]; win.b = bw[2]; win16_words(win, w.H);
        win.a = a[3]; win.b = bw[3];
        u32 sc[4];
        win16_words(win, sc);
        // d: the two bytes after the 16 scale bytes, at an even offset (inside one word).
        const u32 o = off + 16, k = o >> 2;
        const u32 dw = k == 4 ? bw[3].x : (k == 5 ? bw[3].y : (k == 6 ? bw[3].z : bw[3].w));
        pack_scales(sc, (dw >> ((o & 3) * 8)) & 0xFFFFu, u, w);
    }
    static __device__ __forceinline__ const u8* window(const u8* b, int u, int i) {
        const int half = u >> 1, part = u & 1;
        const u8* p = i == 0 ? b + 64 * half + 16 * part
                    : i == 1 ? b + 64 * half + 32 + 16 * part
                    : i == 2 ? b + 128 + 32 * half + 16 * part
                             : b + 192;
        return (const u8*)((u64)p & ~(u64)15);
    }
    // The weight ring's form (matvec_pipe.cuh, MVA_WSTAGES_Q6): the four windows as NCH = 8
    // chunks (window i's halves are chunks 2i, 2i + 1), chunk j at s[32 j].
    static const int NCH = 8;
    static __device__ __forceinline__ const u8* chunk(const u8* b, int u, int j) {
        return window(b, u, j >> 1) + 16 * (j & 1);
    }
    static __device__ __forceinline__ void from_chunks(const uint4* s, const u8* b, int u, W& w) {
        uint4 a[4], bw[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            a[i] = s[32 * (2 * i)];
            bw[i] = s[32 * (2 * i + 1)];
        }
        from_windows(a, bw, (u32)((u64)b & 15), u, w);
    }
#if MVA_Q6_LAZY
    struct Raw {
        uint4 a[4], b[4];
        u32 off_u;  // (block address & 15) << 8 | unit
    };
    static __device__ __forceinline__ void load_raw(const u8* b, int u, Raw& r) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint4* q = (const uint4*)window(b, u, i);
            r.a[i] = __ldg(q);
            r.b[i] = __ldg(q + 1);
        }
        r.off_u = ((u32)((u64)b & 15) << 8) | (u32)u;
    }
    static __device__ __forceinline__ void finish(const Raw& r, W& w) {
        from_windows(r.a, r.b, r.off_u >> 8, (int)(r.off_u & 0xFF), w);
    }
#else
    typedef W Raw;
    static __device__ __forceinline__ void load_raw(const u8* b, int u, Raw& r) { load(b, u, r); }
    static __device__ __forceinline__ void finish(const Raw& r, W& w) { w = r; }
#endif
    // One token's activations for unit u: four runs of 16 quants and their groups' scales.
    struct X {
        u32 q[4][8];
        float s[4];
    };
    template <int XP>
    static __device__ __forceinline__ void loadx(int u, const short* xq, const float* xs,
                                                 const int* xsum, X& x) {
        const int half = u >> 1, part = u & 1;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            ld_xq8(xq + xoff<XP>(128 * half + 32 * g + 16 * part), x.q[g]);
            x.s[g] = xs[4 * half + g];
        }
    }
    // A unit's four group scales d · s and its quants minus 32 (group g's 16 as words q[g][i],
    // values 4i .. 4i+3), shared with the A8 activation side (formats_a8.cuh).
    static __device__ __forceinline__ void decode(const W& w, float (&sc)[4], u32 (&q)[4][4]) {
        const float d = h2f((u16)(w.sd >> 16));
        sc[0] = q6_scale(d, (i8)(w.sd & 0xFF));
        sc[1] = q6_scale(d, (i8)((w.sd >> 8) & 0xFF));
        sc[2] = q6_scale(d, (i8)(w.s46 & 0xFF));
        sc[3] = q6_scale(d, (i8)((w.s46 >> 8) & 0xFF));
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            q[0][i] = __vsub4((w.A[i] & 0x0F0F0F0Fu) | ((w.H[i] & 0x03030303u) << 4), 0x20202020u);
            q[1][i] = __vsub4((w.B[i] & 0x0F0F0F0Fu) | (((w.H[i] >> 2) & 0x03030303u) << 4), 0x20202020u);
            q[2][i] = __vsub4(((w.A[i] >> 4) & 0x0F0F0F0Fu) | (((w.H[i] >> 4) & 0x03030303u) << 4), 0x20202020u);
            q[3][i] = __vsub4(((w.B[i] >> 4) & 0x0F0F0F0Fu) | (((w.H[i] >> 6) & 0x03030303u) << 4), 0x20202020u);
        }
    }
    static __device__ __forceinline__ void compute_x(const W& w, int u, const X& x, float* acc) {
        float sc[4];
        u32 q[4][4];
        decode(w, sc, q);
        float p = *acc;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            int is = 0;
#pragma unroll
            for (int i = 0; i < 4; ++i) is = dot4(q[g][i], x.q[g][2 * i], x.q[g][2 * i + 1], is);
            p = q6_step(p, sc[g], x.s[g], (float)is);
        }
        *acc = p;
    }
    template <int NT>
    static __device__ __forceinline__ void compute(const W& w, int u, const short* xq, const float* xs,
                                                   const int* xsum, int K, float* acc) {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            X x;
            loadx<64>(u, xq + (size_t)t * K, xs + (size_t)t * (K / 32), xsum, x);
            compute_x(w, u, x, acc + t);
        }
    }
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int u, const short* xq, const float* xs,
                                               const int* xsum, int K, float* acc) {
        W w;
        load(b, u, w);
        compute<NT>(w, u, xq, xs, xsum, K, acc);
    }
};

// ---- Q6_K-P (host: muser_cuda::q6pad; `MUSER_CUDA_Q6_PAD`): the same Q6_K bytes in 432-byte
// pairs of blocks — unit u of the pair's block e at [192e + 48u] (runs A, B, H), its four scales
// at [384 + 16e + 4u], d at [416 + 2e] — so a unit is three aligned 16-byte loads and two words.
// Block b sits at row + 216 b (BLOCK_BYTES): the pair's start for even b, 8 past a 16-byte
// boundary (pair + 216) for odd b, which gives e. Rows start 16-aligned. Decoded into AQ6K's W:
// the arithmetic (AQ6K::compute_x) is AQ6K's, bit for bit.
struct AQ6KP {
    static const int BLOCK_VALS = 256, BLOCK_BYTES = 216, UNITS = 4;
    typedef AQ6K::W W;
    typedef AQ6K::X X;
    struct Raw {
        uint4 a, b, h;
        u32 sc, d;  // unit scales (group order); the word holding both blocks' d
        u32 e;      // 1 for the pair's second block
    };
    // The pair's start and the block's half e from a block address.
    static __device__ __forceinline__ const u8* pair(const u8* b, u32& e) {
        const u64 a = (u64)b;
        e = (u32)(a >> 3) & 1u;
        return (const u8*)((a & ~(u64)15) - 208 * (u64)e);
    }
    static __device__ __forceinline__ const uint4* unit(const u8* p, u32 e, int u) {
        return (const uint4*)(p + 192 * e + 48 * u);
    }
    static __device__ __forceinline__ void load_raw(const u8* b, int u, Raw& r) {
        u32 e;
        const u8* p = pair(b, e);
        const uint4* q = unit(p, e, u);
        r.a = __ldg(q);
        r.b = __ldg(q + 1);
        r.h = __ldg(q + 2);
        r.sc = __ldg((const u32*)(p + 384 + 16 * e + 4 * u));
        r.d = __ldg((const u32*)(p + 416));
        r.e = e;
    }
    static __device__ __forceinline__ void words(const uint4& v, u32* w) {
        w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
    }
    static __device__ __forceinline__ void finish(const Raw& r, W& w) {
        words(r.a, w.A);
        words(r.b, w.B);
        words(r.h, w.H);
        w.sd = (r.sc & 0xFFFFu) | (((r.d >> (16 * r.e)) & 0xFFFFu) << 16);
        w.s46 = r.sc >> 16;
    }
    static __device__ __forceinline__ void load(const u8* b, int u, W& w) {
        Raw r;
        load_raw(b, u, r);
        finish(r, w);
    }
    // The weight ring's form (unused: the Q6_K-P kernels run without a ring; mva_pipe names it).
    static const int NCH = 3;
    static __device__ __forceinline__ const u8* chunk(const u8* b, int u, int j) {
        u32 e;
        const u8* p = pair(b, e);
        return (const u8*)(unit(p, e, u) + j);
    }
    static __device__ __forceinline__ void from_chunks(const uint4* s, const u8* b, int u, W& w) {
        Raw r;
        load_raw(b, u, r);
        r.a = s[0];
        r.b = s[32];
        r.h = s[64];
        finish(r, w);
    }
    template <int XP>
    static __device__ __forceinline__ void loadx(int u, const short* xq, const float* xs,
                                                 const int* xsum, X& x) {
        AQ6K::loadx<XP>(u, xq, xs, xsum, x);
    }
    static __device__ __forceinline__ void compute_x(const W& w, int u, const X& x, float* acc) {
        AQ6K::compute_x(w, u, x, acc);
    }
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int u, const short* xq, const float* xs,
                                               const int* xsum, int K, float* acc) {
        W w;
        load(b, u, w);
        AQ6K::compute<NT>(w, u, xq, xs, xsum, K, acc);
    }
};

// One 32-value block of signed 8-bit weights (8 words) with scale d, for NT tokens: exact
// integer sum, then d * (sx * sum). Shared by Q8_0 and Q5_0 (after unpacking).
template <int NT>
__device__ __forceinline__ void dot32_i8(const u32* w, float d, const short* xq, const float* xs,
                                         int K, float* acc) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        u32 x[16];
        ld_xq8(xq + (size_t)t * K, x);
        ld_xq8(xq + (size_t)t * K + 16, x + 8);
        int is = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) is = dot4(w[i], x[2 * i], x[2 * i + 1], is);
        acc[t] += d * (xs[(size_t)t * (K / 32)] * (float)is);
    }
}

// ---- Q8_0 (34 B, 2-aligned): d, qs[32] i8. One unit per block.
struct AQ80 {
    static const int BLOCK_VALS = 32, BLOCK_BYTES = 34, UNITS = 1;
    // The block's scale and its 32 weights (word i: values 4i .. 4i+3); shared with the A8 twin.
    static __device__ __forceinline__ float words(const u8* b, u32 (&w)[8]) {
        const float d = h2f(ld_u16(b));
        ld16_a2(b + 2, w);
        ld16_a2(b + 18, w + 4);
        return d;
    }
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int, const short* xq, const float* xs,
                                               const int* xsum, int K, float* acc) {
        u32 w[8];
        const float d = words(b, w);
        dot32_i8<NT>(w, d, xq, xs, K, acc);
    }
};

// ---- Q5_0 (22 B, 2-aligned): d, qh u32, qs[16]; value j: nibble j of qs (low for j<16, high
// for j>=16) with bit j of qh on top, minus 16.
struct AQ50 {
    static const int BLOCK_VALS = 32, BLOCK_BYTES = 22, UNITS = 1;
    // The block's scale and its 32 weights as signed bytes (word i: values 4i .. 4i+3); shared
    // with the A8 twin (formats_a8.cuh).
    static __device__ __forceinline__ float words(const u8* b, u32 (&w)[8]) {
        const float d = h2f(ld_u16(b));
        const u32 qh = (u32)ld_u16(b + 2) | ((u32)ld_u16(b + 4) << 16);
        u32 qs[4];
        ld16_a2(b + 6, qs);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const u32 hl = (((qh >> (4 * i)) & 0xFu) * 0x00204081u) & 0x01010101u;
            const u32 hh = (((qh >> (16 + 4 * i)) & 0xFu) * 0x00204081u) & 0x01010101u;
            w[i] = __vsub4((qs[i] & 0x0F0F0F0Fu) | (hl << 4), 0x10101010u);
            w[4 + i] = __vsub4(((qs[i] >> 4) & 0x0F0F0F0Fu) | (hh << 4), 0x10101010u);
        }
        return d;
    }
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int, const short* xq, const float* xs,
                                               const int* xsum, int K, float* acc) {
        u32 w[8];
        const float d = words(b, w);
        dot32_i8<NT>(w, d, xq, xs, K, acc);
    }
};

// ---- F16 / F32 weights: float products with the dequantized activation (sx * q).
struct AF16 {
    static const int BLOCK_VALS = 32, BLOCK_BYTES = 64, UNITS = 1;
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int, const short* xq, const float* xs,
                                               const int* xsum, int K, float* acc) {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const float sx = xs[(size_t)t * (K / 32)];
            float s = 0.f;
            for (int l = 0; l < 32; ++l)
                s = fmaf(h2f(ld_u16(b + 2 * l)), (float)xq[(size_t)t * K + l], s);
            acc[t] += sx * s;
        }
    }
};
struct AF32 {
    static const int BLOCK_VALS = 32, BLOCK_BYTES = 128, UNITS = 1;
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int, const short* xq, const float* xs,
                                               const int* xsum, int K, float* acc) {
        const float* w = (const float*)b;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const float sx = xs[(size_t)t * (K / 32)];
            float s = 0.f;
            for (int l = 0; l < 32; ++l) s = fmaf(w[l], (float)xq[(size_t)t * K + l], s);
            acc[t] += sx * s;
        }
    }
};
