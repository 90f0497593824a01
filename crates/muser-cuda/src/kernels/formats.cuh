// formats.cuh — the weight block formats on the device (one struct per GGML type).
// Owns: block geometry and, per "unit" (the slice of a block one lane handles), the dot product
// with f32 activations for NT tokens at once and the dequantization of the unit.
// Invariant: for a given unit, `dot` performs the same operations in the same order for every
// token slot, whatever NT is — so a token's result does not depend on how many tokens share
// the launch (decode, prefill chunk or packed batch all agree bit for bit).
//
// Each format F provides:
//   BLOCK_VALS, BLOCK_BYTES, UNITS (units per block), UNIT_VALS
//   template<int NT> dot(const u8* blk, int u, const float* x, int ldx, float* acc)
//       x points at the block's first value for token 0; token t's values are at x + t*ldx.
//   dequant(const u8* blk, int u, float* y)   y points at the block's first value.

// The scale words of a Q4_K/Q5_K block (bytes 4..16; blocks are 16-byte aligned).
__device__ __forceinline__ void k4_scale_words(const u8* b, u32* sw) {
    const uint4 h = *(const uint4*)b;
    sw[0] = h.y; sw[1] = h.z; sw[2] = h.w;
}

// ---- Q4_K: d f16, dmin f16, scales[12], qs[128]; 256 values, 144 bytes.
// Unit c (0..3): qs[32c .. 32c+32): low nibbles = sub-block 2c, high nibbles = sub-block 2c+1.
struct FQ4K {
    static const int BLOCK_VALS = 256, BLOCK_BYTES = 144, UNITS = 4, UNIT_VALS = 64;
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int c, const float* x, int ldx, float* acc) {
        const float d = h2f(ld_u16(b)), dmin = h2f(ld_u16(b + 2));
        u32 sw[3];
        k4_scale_words(b, sw);
        float sc0, m0, sc1, m1;
        k4_scales_pair(sw, c, &sc0, &m0, &sc1, &m1);
        const uint4* q4 = (const uint4*)(b + 16 + 32 * c);
        const uint4 qa = q4[0], qb = q4[1];
        const u32 qw[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const float* xt = x + (size_t)t * ldx + 64 * c;
            float s0 = 0.f, s1 = 0.f, x0 = 0.f, x1 = 0.f;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const float4 xa = *(const float4*)(xt + 4 * i);
                const float4 xb = *(const float4*)(xt + 32 + 4 * i);
                const u32 w = qw[i];
                s0 = fmaf((float)(w & 0xF), xa.x, s0);
                s0 = fmaf((float)((w >> 8) & 0xF), xa.y, s0);
                s0 = fmaf((float)((w >> 16) & 0xF), xa.z, s0);
                s0 = fmaf((float)((w >> 24) & 0xF), xa.w, s0);
                s1 = fmaf((float)((w >> 4) & 0xF), xb.x, s1);
                s1 = fmaf((float)((w >> 12) & 0xF), xb.y, s1);
                s1 = fmaf((float)((w >> 20) & 0xF), xb.z, s1);
                s1 = fmaf((float)((w >> 28) & 0xF), xb.w, s1);
                x0 += (xa.x + xa.y) + (xa.z + xa.w);
                x1 += (xb.x + xb.y) + (xb.z + xb.w);
            }
            acc[t] += ((d * sc0) * s0 - (dmin * m0) * x0) + ((d * sc1) * s1 - (dmin * m1) * x1);
        }
    }
    static __device__ __forceinline__ void dequant(const u8* b, int c, float* y) {
        const float d = h2f(ld_u16(b)), dmin = h2f(ld_u16(b + 2));
        u32 sw[3];
        k4_scale_words(b, sw);
        float sc0, m0, sc1, m1;
        k4_scales_pair(sw, c, &sc0, &m0, &sc1, &m1);
        const u8* q = b + 16 + 32 * c;
        for (int l = 0; l < 32; ++l) {
            y[64 * c + l] = (d * sc0) * (float)(q[l] & 0xF) - dmin * m0;
            y[64 * c + 32 + l] = (d * sc1) * (float)(q[l] >> 4) - dmin * m1;
        }
    }
};

// ---- Q5_K: d, dmin, scales[12], qh[32], qs[128]; 256 values, 176 bytes.
// Unit c as Q4_K; the fifth bit of value l of sub-block 2c (2c+1) is bit 2c (2c+1) of qh[l].
struct FQ5K {
    static const int BLOCK_VALS = 256, BLOCK_BYTES = 176, UNITS = 4, UNIT_VALS = 64;
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int c, const float* x, int ldx, float* acc) {
        const float d = h2f(ld_u16(b)), dmin = h2f(ld_u16(b + 2));
        u32 sw[3];
        k4_scale_words(b, sw);
        float sc0, m0, sc1, m1;
        k4_scales_pair(sw, c, &sc0, &m0, &sc1, &m1);
        const u8* qh = b + 16;
        const u8* q = b + 48 + 32 * c;
        float v0[32], v1[32];
#pragma unroll
        for (int l = 0; l < 32; ++l) {
            const int h = qh[l] >> (2 * c);
            v0[l] = (float)((q[l] & 0xF) | ((h & 1) << 4));
            v1[l] = (float)((q[l] >> 4) | ((h & 2) << 3));
        }
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const float* xt = x + (size_t)t * ldx + 64 * c;
            float s0 = 0.f, s1 = 0.f, x0 = 0.f, x1 = 0.f;
#pragma unroll
            for (int l = 0; l < 32; ++l) {
                s0 = fmaf(v0[l], xt[l], s0);
                s1 = fmaf(v1[l], xt[32 + l], s1);
                x0 += xt[l];
                x1 += xt[32 + l];
            }
            acc[t] += ((d * sc0) * s0 - (dmin * m0) * x0) + ((d * sc1) * s1 - (dmin * m1) * x1);
        }
    }
    static __device__ __forceinline__ void dequant(const u8* b, int c, float* y) {
        const float d = h2f(ld_u16(b)), dmin = h2f(ld_u16(b + 2));
        u32 sw[3];
        k4_scale_words(b, sw);
        float sc0, m0, sc1, m1;
        k4_scales_pair(sw, c, &sc0, &m0, &sc1, &m1);
        const u8* qh = b + 16;
        const u8* q = b + 48 + 32 * c;
        for (int l = 0; l < 32; ++l) {
            const int h = qh[l] >> (2 * c);
            y[64 * c + l] = (d * sc0) * (float)((q[l] & 0xF) | ((h & 1) << 4)) - dmin * m0;
            y[64 * c + 32 + l] = (d * sc1) * (float)((q[l] >> 4) | ((h & 2) << 3)) - dmin * m1;
        }
    }
};

// ---- Q6_K: ql[128], qh[64], scales[16] (i8), d f16; 256 values, 210 bytes.
// Unit u = 2*half + part (half 0..1, part 0..1): l in [16 part, 16 part + 16) of that half,
// values l, l+32, l+64, l+96 of the half (four sub-blocks of 16, scales is+0/2/4/6).
struct FQ6K {
    static const int BLOCK_VALS = 256, BLOCK_BYTES = 210, UNITS = 4, UNIT_VALS = 64;
    static __device__ __forceinline__ void unpack(const u8* b, int u, float* v, float* sc) {
        const int half = u >> 1, part = u & 1;
        const u8* ql = b + 64 * half;
        const u8* qh = b + 128 + 32 * half;
        const i8* s = (const i8*)(b + 192) + 8 * half + part;
        const float d = h2f(ld_u16(b + 208));
        sc[0] = d * (float)s[0];
        sc[1] = d * (float)s[2];
        sc[2] = d * (float)s[4];
        sc[3] = d * (float)s[6];
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const int l = 16 * part + i;
            const int h = qh[l];
            v[i] = (float)(((ql[l] & 0xF) | ((h & 3) << 4)) - 32);
            v[16 + i] = (float)(((ql[l + 32] & 0xF) | (((h >> 2) & 3) << 4)) - 32);
            v[32 + i] = (float)(((ql[l] >> 4) | (((h >> 4) & 3) << 4)) - 32);
            v[48 + i] = (float)(((ql[l + 32] >> 4) | (((h >> 6) & 3) << 4)) - 32);
        }
    }
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int u, const float* x, int ldx, float* acc) {
        float v[64], sc[4];
        unpack(b, u, v, sc);
        const int base = 128 * (u >> 1) + 16 * (u & 1);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const float* xt = x + (size_t)t * ldx + base;
            float r = 0.f;
#pragma unroll
            for (int g = 0; g < 4; ++g) {
                float s = 0.f;
#pragma unroll
                for (int i = 0; i < 16; ++i) s = fmaf(v[16 * g + i], xt[32 * g + i], s);
                r = fmaf(sc[g], s, r);
            }
            acc[t] += r;
        }
    }
    static __device__ __forceinline__ void dequant(const u8* b, int u, float* y) {
        float v[64], sc[4];
        unpack(b, u, v, sc);
        const int base = 128 * (u >> 1) + 16 * (u & 1);
        for (int g = 0; g < 4; ++g)
            for (int i = 0; i < 16; ++i) y[base + 32 * g + i] = sc[g] * v[16 * g + i];
    }
};

// 32 dequantized weight values v times NT tokens' activations: sequential fma, then d * sum
// (d = 1 for float weights: exact). Shared by Q8_0, Q5_0, F16 and F32.
template <int NT>
__device__ __forceinline__ void dot32_f(const float* v, float d, const float* x, int ldx,
                                        float* acc) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const float* xt = x + (size_t)t * ldx;
        float s = 0.f;
#pragma unroll
        for (int l = 0; l < 32; ++l) s = fmaf(v[l], xt[l], s);
        acc[t] += d * s;
    }
}

// ---- Q8_0: d f16, qs[32] (i8); 32 values, 34 bytes. One unit per block.
struct FQ80 {
    static const int BLOCK_VALS = 32, BLOCK_BYTES = 34, UNITS = 1, UNIT_VALS = 32;
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int, const float* x, int ldx, float* acc) {
        const float d = h2f(ld_u16(b));
        const i8* q = (const i8*)(b + 2);
        float v[32];
#pragma unroll
        for (int l = 0; l < 32; ++l) v[l] = (float)q[l];
        dot32_f<NT>(v, d, x, ldx, acc);
    }
    static __device__ __forceinline__ void dequant(const u8* b, int, float* y) {
        const float d = h2f(ld_u16(b));
        const i8* q = (const i8*)(b + 2);
        for (int l = 0; l < 32; ++l) y[l] = d * (float)q[l];
    }
};

// ---- Q5_0: d f16, qh u32, qs[16]; 32 values, 22 bytes. Value j<16: low nibble of qs[j] and
// bit j of qh; value j+16: high nibble of qs[j] and bit j+16 of qh; minus 16.
struct FQ50 {
    static const int BLOCK_VALS = 32, BLOCK_BYTES = 22, UNITS = 1, UNIT_VALS = 32;
    static __device__ __forceinline__ void unpack(const u8* b, float* v) {
        const u32 qh = ld_u32(b + 2);
        const u8* q = b + 6;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            v[j] = (float)((int)((q[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16);
            v[j + 16] = (float)((int)((q[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
        }
    }
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int, const float* x, int ldx, float* acc) {
        const float d = h2f(ld_u16(b));
        float v[32];
        unpack(b, v);
        dot32_f<NT>(v, d, x, ldx, acc);
    }
    static __device__ __forceinline__ void dequant(const u8* b, int, float* y) {
        const float d = h2f(ld_u16(b));
        float v[32];
        unpack(b, v);
        for (int l = 0; l < 32; ++l) y[l] = d * v[l];
    }
};

// ---- F16 / F32: 32 values per unit ("block" of 32 for the shared loop).
struct FF16 {
    static const int BLOCK_VALS = 32, BLOCK_BYTES = 64, UNITS = 1, UNIT_VALS = 32;
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int, const float* x, int ldx, float* acc) {
        float v[32];
#pragma unroll
        for (int l = 0; l < 32; ++l) v[l] = h2f(ld_u16(b + 2 * l));
        dot32_f<NT>(v, 1.0f, x, ldx, acc);
    }
    static __device__ __forceinline__ void dequant(const u8* b, int, float* y) {
        for (int l = 0; l < 32; ++l) y[l] = h2f(ld_u16(b + 2 * l));
    }
};
struct FF32 {
    static const int BLOCK_VALS = 32, BLOCK_BYTES = 128, UNITS = 1, UNIT_VALS = 32;
    template <int NT>
    static __device__ __forceinline__ void dot(const u8* b, int, const float* x, int ldx, float* acc) {
        dot32_f<NT>((const float*)b, 1.0f, x, ldx, acc);
    }
    static __device__ __forceinline__ void dequant(const u8* b, int, float* y) {
        const float* w = (const float*)b;
        for (int l = 0; l < 32; ++l) y[l] = w[l];
    }
};
