// mmv_a16.cu — packed decode rows on the int8 tensor cores with A16 activations (each int16
// quant as two bytes: mma_int8.cuh's hi/lo MMA pair): the Q4_K / Q6_K / Q6_K-P formats of
// mmv.cuh's body and the paired tiles for at most 4 tokens. Needs common.cuh + formats_a16.cuh
// + mma_int8.cuh + mmv.cuh.

// Sub-block s (low / high nibbles) of a Q4_K unit as one hi/lo MMA pair's operands: A from the
// quant bytes qa (tile rows 0..7) and qb (rows 8..15), B from x, a column's 8 quants; called as
// mma_pair's `mma`.
struct MmvQ4Tile {
    u32 a[4], bh0, bl0, bh1, bl1;
    __device__ __forceinline__ MmvQ4Tile(uint2 qa, uint2 qb, uint4 x, int s) {
        a[0] = (qa.x >> (4 * s)) & 0x0F0F0F0Fu;
        a[1] = (qb.x >> (4 * s)) & 0x0F0F0F0Fu;
        a[2] = (qa.y >> (4 * s)) & 0x0F0F0F0Fu;
        a[3] = (qb.y >> (4 * s)) & 0x0F0F0F0Fu;
        split_hilo(x.x, x.y, &bh0, &bl0);
        split_hilo(x.z, x.w, &bh1, &bl1);
    }
    __device__ __forceinline__ void operator()(int* d, bool lo, const int* cc) const {
        mma_k32(d, a, lo ? bl0 : bh0, lo ? bl1 : bh1, lo, cc);
    }
};

// ---- Q4_K × A16 (MmvQ4KLoad's fragments, mmv.cuh).
struct MmvQ4K : MmvQ4KLoad<short> {
    // fq: (xs, xsm) of tokens 2q, 2q+1 for group G at fq[4 G].
    static __device__ __forceinline__ void consume(const In& in, int u, int c, const float4* fq,
                                                   float* p) {
        const int q = threadIdx.x & 3;
        const u32 sw[3] = {in.h.y, in.h.z, in.h.w};
        const K4Factors k = k4_factors(in.h.x, sw, c);
        const float mine[4] = {k.a0, k.nb0, k.a1, k.nb1};
        float fa[4], fb[4];
        quad_rows(mine, q, fa, fb);
#pragma unroll
        for (int s = 0; s < 2; ++s) {
            float fs[4];
            mma_pair(MmvQ4Tile(in.qa, in.qb, s ? in.x1 : in.x0, s), fs);
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

// ---- Q6_K: unit (half h, part pt) of a 210-byte (2-aligned) block = four groups of 16 values
// 128h + 32g + 16pt + l (l < 16), weights ql run A (low nibbles: g = 0, high: g = 2), run B
// (g = 1, 3), qh run (bits 2g, 2g+1), scales s[8h + pt + 2g], d. Thread q feeds l = 4q .. 4q+3
// of each group (k slots 4q..): each word is read as two aligned 16-bit halves.
struct MmvQ6K {
    typedef short XE;
    struct Bases {
        const u8 *wh, *wa, *wb;  // block base of this lane's row; rows g, g + 8 (run offset in)
        const short* x;          // token g: value 16pt + 4q of unit 0's half
    };
    struct In {
        u32 A[2], B[2], H[2];  // rows g, g + 8: bytes 4q .. 4q+3 of runs A, B and qh
        u32 s01, s23;          // this lane's row: scales (g = 0, 1), (g = 2, 3) as 16-bit pairs
        u32 d;                 // this lane's row: d's f16 bits
        uint2 x[4];            // token g: quants 4q .. 4q+3 of groups 0..3
    };
    static __device__ __forceinline__ Bases bases(const u8* W, u64 row_bytes, int row0, int n_out,
                                                  const short* XQ, int K, int n_tok, int c) {
        const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
        const int h = c >> 1, pt = c & 1;
        Bases b;
        b.wh = opaque(W + (u64)min(row0 + g + 8 * (q & 1), n_out - 1) * row_bytes);
        b.wa = opaque(W + (u64)min(row0 + g, n_out - 1) * row_bytes + 64 * h + 16 * pt + 4 * q);
        b.wb = opaque(W + (u64)min(row0 + g + 8, n_out - 1) * row_bytes + 64 * h + 16 * pt + 4 * q);
        b.x = opaque(XQ + (size_t)min(g, n_tok - 1) * K + 128 * h + 16 * pt + 4 * q);
        return b;
    }
    static __device__ __forceinline__ void fetch(const Bases& b, int u, In& in) {
        const int bo = (u >> 2) * 210, hh = ((u & 3) >> 1);
        const u8* r[2] = {b.wa + bo, b.wb + bo};
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            in.A[i] = ld_u32_a2(r[i]);
            in.B[i] = ld_u32_a2(r[i] + 32);
            in.H[i] = ld_u32_a2(r[i] + 128 - 32 * hh);  // qh run: 128 + 32h + 16pt + 4q
        }
        // Scales s[8h + pt + 2g]: the 16-bit words at 192 + 8h + 2g hold s[8h + 2g] (low byte)
        // and s[8h + 2g + 1] (high byte).
        const unsigned short* sc = (const unsigned short*)(b.wh + bo + 192 + 8 * hh);
        in.s01 = (u32)__ldg(sc) | ((u32)__ldg(sc + 1) << 16);
        in.s23 = (u32)__ldg(sc + 2) | ((u32)__ldg(sc + 3) << 16);
        in.d = __ldg((const unsigned short*)(b.wh + bo + 208));
        const short* x = b.x + 256 * (u >> 2);
#pragma unroll
        for (int g = 0; g < 4; ++g) in.x[g] = *(const uint2*)(x + 32 * g);
    }
    static __device__ __forceinline__ void consume(const In& in, int u, int c, const float4* fq,
                                                   float* p) {
        consume_sc<true>(in, u, c, fq, p);
    }
    // PAIRS: s01 / s23 hold GGUF's 16-bit scale pairs (the unit's part picks the byte); else
    // the unit's four scales at bytes 0 and 2 of each (Q6_K-P).
    // InT: MmvQ6K::In or MmvQ6KPLoad<short>::In (the same fields).
    template <bool PAIRS, class InT>
    static __device__ __forceinline__ void consume_sc(const InT& in, int u, int c, const float4* fq,
                                                      float* p) {
        const int q = threadIdx.x & 3, pt = c & 1, h = c >> 1;
        float mine[4];
        mmv_q6_scales(in.s01, in.s23, in.d, PAIRS ? pt : 0, mine);
        float fa[4], fb[4];
        quad_rows(mine, q, fa, fb);
        const int grp0 = 8 * (u >> 2) + 4 * h;  // the unit's first group of 32 (scale index)
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            u32 a[2];
            mmv_q6_frag(in.A, in.B, in.H, g, a);
            u32 bh, bl;
            split_hilo(in.x[g].x, in.x[g].y, &bh, &bl);
            float fs[4];
            mma_pair([&](int* dd, bool lo, const int* cc) { mma_k16(dd, a[0], a[1], lo ? bl : bh, lo, cc); },
                     fs);
            const float4 tf = fq[4 * (grp0 + g)];
#pragma unroll
            for (int e = 0; e < 4; ++e)
                p[e] = q6_step(p[e], (e >> 1) ? fb[g] : fa[g], (e & 1) ? tf.z : tf.x, fs[e]);
        }
    }
};

// ---- Q6_K-P × A16 (MmvQ6KPLoad's fragments, mmv.cuh): MmvQ6K's arithmetic.
struct MmvQ6KP : MmvQ6KPLoad<short> {
    static __device__ __forceinline__ void consume(const In& in, int u, int c, const float4* fq,
                                                   float* p) {
        MmvQ6K::consume_sc<false>(in, u, c, fq, p);
    }
};

MMV_KERNEL(mmv_q4_k, mmv_body, MmvQ4K)
MMV_KERNEL(mmv_q6_k, mmv_body, MmvQ6K)
MMV_KERNEL(mmv_q6p, mmv_body, MmvQ6KP)

// ---- Paired tiles for at most 4 tokens (`mmv_pair_*`). With 4 tokens an 8-column tile leaves
// half its columns empty; here the tile's two row halves carry the same 8 weight rows at two
// units of the warp — A rows 0..7 at unit uA (virtual lane vA), rows 8..15 at uA + 8 (virtual
// lane vB = vA + 8) — and B's columns 0..3 the 4 tokens at uA, columns 4..7 at uA + 8. Of the
// 16 × 8 products only the two diagonal quarters are used, and each thread holds exactly two of
// them: q < 2 rows g at uA (tokens 2q, 2q+1; chain of vA), q >= 2 rows g at uB (tokens 2q-4,
// 2q-3; chain of vB). Per used output the epilogue is half the 8-column tile's, and a thread
// decodes the block header of its own (row, unit), so no quad shuffles. Each (row, token,
// virtual lane) chain stays in one thread and in unit order: decode's float sequence, as above.
// Block: 8 warps on 8 rows; warp w takes the pairs (w, w + 8) and (w + 16, w + 24).
//   W: [n_out][row_bytes]   XQ: [n_tok][K] i16   XS, XSUM: [n_tok][K/32]   Y: [n_tok][ldy] f32
//   K % 256 == 0, 1 <= n_tok <= 4 (token columns past n_tok read the last token, not written).

// Q4_K, paired: thread (g, q) feeds values 8q .. 8q+7 of each sub-block (as MmvQ4K).
struct MmvPairQ4K {
    typedef short XE;
    static const int BLOCK_BYTES = 144;
    struct Bases {
        const u8 *wh, *wq;  // row g's block 0: header; quants 8q of unit position c
        const short* x;     // column g: token g & 3, value 8q of unit 0
        int hoff, xoff;     // with a B unit: this thread's header, column g's quants further on
    };
    struct In {
        uint4 h;       // the header of this thread's (row, unit)
        uint2 qa, qb;  // quant bytes 8q .. 8q+7 of row g at uA, uA + 8
        uint4 x0, x1;  // column g: quants 8q .. 8q+7 of sub-blocks 0, 1 of its unit
    };
    static __device__ __forceinline__ Bases bases(const u8* W, u64 row_bytes, int row0, int n_out,
                                                  const short* XQ, int K, int n_tok, int c) {
        const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
        const u8* row = W + (u64)min(row0 + g, n_out - 1) * row_bytes;
        Bases b;
        b.wh = opaque(row);
        b.wq = opaque(row + 16 + 32 * c + 8 * q);
        b.x = opaque(XQ + (size_t)min(g & 3, n_tok - 1) * K + 8 * q);
        b.hoff = (q >> 1) ? 2 * 144 : 0;
        b.xoff = (g >> 2) ? 512 : 0;
        return b;
    }
    // Unit uA's loads; `pb`: unit uA + 8 exists (else the B half reads uA again, unused).
    static __device__ __forceinline__ void fetch(const Bases& b, int ua, bool pb, In& in) {
        const int bo = (ua >> 2) * 144, bb = pb ? 2 * 144 : 0;
        in.h = __ldg((const uint4*)(b.wh + bo + (pb ? b.hoff : 0)));
        in.qa = __ldg((const uint2*)(b.wq + bo));
        in.qb = __ldg((const uint2*)(b.wq + bo + bb));
        const short* x = b.x + 64 * ua + (pb ? b.xoff : 0);
        in.x0 = *(const uint4*)x;
        in.x1 = *(const uint4*)(x + 32);
    }
    // fq: (xs, xsm) of this thread's tokens for group G at fq[2 G]; u: this thread's unit;
    // upper: the thread's outputs are the tile's rows 8..15 (q >= 2); active: u exists (else
    // the step leaves p as it is).
    static __device__ __forceinline__ void consume(const In& in, int u, int c, const float4* fq,
                                                   bool upper, bool active, float* p) {
        const u32 sw[3] = {in.h.y, in.h.z, in.h.w};
        const K4Factors k = k4_factors(in.h.x, sw, c);
#pragma unroll
        for (int s = 0; s < 2; ++s) {
            float fs[2];
            mma_pair_half(MmvQ4Tile(in.qa, in.qb, s ? in.x1 : in.x0, s), upper, fs);
            const float4 tf = fq[2 * (2 * u + s)];
            const float n0 = k4_step(p[0], s ? k.a1 : k.a0, s ? k.nb1 : k.nb0, tf.x, fs[0], tf.y);
            const float n1 = k4_step(p[1], s ? k.a1 : k.a0, s ? k.nb1 : k.nb0, tf.z, fs[1], tf.w);
            p[0] = active ? n0 : p[0];
            p[1] = active ? n1 : p[1];
        }
    }
};

// Q6_K, paired: thread (g, q) feeds l = 4q .. 4q+3 of each group (as MmvQ6K).
struct MmvPairQ6K {
    typedef short XE;
    static const int BLOCK_BYTES = 210;
    struct Bases {
        const u8 *wh, *wq;  // row g's block 0; its run offset for unit position c
        const short* x;     // column g: token g & 3, value 16pt + 4q of unit 0's half
        int hoff, xoff;     // with a B unit: this thread's scales, column g's quants further on
    };
    struct In {
        u32 A[2], B[2], H[2];  // row g at uA, uA + 8: bytes 4q .. 4q+3 of runs A, B and qh
        u32 s01, s23;          // this thread's (row, unit): scales as 16-bit pairs
        u32 d;                 // its d's f16 bits
        uint2 x[4];            // column g: quants 4q .. 4q+3 of groups 0..3 of its unit
    };
    static __device__ __forceinline__ Bases bases(const u8* W, u64 row_bytes, int row0, int n_out,
                                                  const short* XQ, int K, int n_tok, int c) {
        const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
        const int h = c >> 1, pt = c & 1;
        const u8* row = W + (u64)min(row0 + g, n_out - 1) * row_bytes;
        Bases b;
        b.wh = opaque(row);
        b.wq = opaque(row + 64 * h + 16 * pt + 4 * q);
        b.x = opaque(XQ + (size_t)min(g & 3, n_tok - 1) * K + 128 * h + 16 * pt + 4 * q);
        b.hoff = (q >> 1) ? 2 * 210 : 0;
        b.xoff = (g >> 2) ? 512 : 0;
        return b;
    }
    static __device__ __forceinline__ void fetch(const Bases& b, int ua, bool pb, In& in) {
        const int bo = (ua >> 2) * 210, hh = ((ua & 3) >> 1), bb = pb ? 2 * 210 : 0;
        const u8* r[2] = {b.wq + bo, b.wq + bo + bb};
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            in.A[i] = ld_u32_a2(r[i]);
            in.B[i] = ld_u32_a2(r[i] + 32);
            in.H[i] = ld_u32_a2(r[i] + 128 - 32 * hh);
        }
        const u8* hd = b.wh + bo + (pb ? b.hoff : 0);
        const unsigned short* sc = (const unsigned short*)(hd + 192 + 8 * hh);
        in.s01 = (u32)__ldg(sc) | ((u32)__ldg(sc + 1) << 16);
        in.s23 = (u32)__ldg(sc + 2) | ((u32)__ldg(sc + 3) << 16);
        in.d = __ldg((const unsigned short*)(hd + 208));
        const short* x = b.x + 256 * (ua >> 2) + (pb ? b.xoff : 0);
#pragma unroll
        for (int j = 0; j < 4; ++j) in.x[j] = *(const uint2*)(x + 32 * j);
    }
    static __device__ __forceinline__ void consume(const In& in, int u, int c, const float4* fq,
                                                   bool upper, bool active, float* p) {
        consume_sc<true>(in, u, c, fq, upper, active, p);
    }
    // PAIRS: as MmvQ6K::consume_sc.
    template <bool PAIRS>
    static __device__ __forceinline__ void consume_sc(const In& in, int u, int c, const float4* fq,
                                                      bool upper, bool active, float* p) {
        const int pt = c & 1, h = c >> 1;
        float sc[4];
        mmv_q6_scales(in.s01, in.s23, in.d, PAIRS ? pt : 0, sc);
        const int grp0 = 8 * (u >> 2) + 4 * h;  // this thread's unit's first group of 32
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            u32 a[2];
            mmv_q6_frag(in.A, in.B, in.H, j, a);
            u32 bh, bl;
            split_hilo(in.x[j].x, in.x[j].y, &bh, &bl);
            float fs[2];
            mma_pair_half(
                [&](int* dd, bool lo, const int* cc) { mma_k16(dd, a[0], a[1], lo ? bl : bh, lo, cc); },
                upper, fs);
            const float4 tf = fq[2 * (grp0 + j)];
            const float n0 = q6_step(p[0], sc[j], tf.x, fs[0]);
            const float n1 = q6_step(p[1], sc[j], tf.z, fs[1]);
            p[0] = active ? n0 : p[0];
            p[1] = active ? n1 : p[1];
        }
    }
};

// Q6_K-P, paired (layout as MmvQ6KP): unit uA + 8 is two blocks on, so the next pair, same half.
struct MmvPairQ6KP : MmvPairQ6K {
    static __device__ __forceinline__ Bases bases(const u8* W, u64 row_bytes, int row0, int n_out,
                                                  const short* XQ, int K, int n_tok, int c) {
        const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
        const int h = c >> 1, pt = c & 1;
        const u8* row = W + (u64)min(row0 + g, n_out - 1) * row_bytes;
        Bases b;
        b.wh = opaque(row);
        b.wq = opaque(row + 48 * c + 4 * q);
        b.x = opaque(XQ + (size_t)min(g & 3, n_tok - 1) * K + 128 * h + 16 * pt + 4 * q);
        b.hoff = (q >> 1) ? 432 : 0;
        b.xoff = (g >> 2) ? 512 : 0;
        return b;
    }
    static __device__ __forceinline__ void fetch(const Bases& b, int ua, bool pb, In& in) {
        const int blk = ua >> 2, e = blk & 1;
        const u32 po = q6p_pair_off(blk), bo = po + 192 * e, bb = pb ? 432 : 0;
        const u8* r[2] = {b.wq + bo, b.wq + bo + bb};
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            in.A[i] = __ldg((const u32*)r[i]);
            in.B[i] = __ldg((const u32*)(r[i] + 16));
            in.H[i] = __ldg((const u32*)(r[i] + 32));
        }
        const u8* hd = b.wh + po + (pb ? b.hoff : 0);
        q6p_scale_pairs(__ldg((const u32*)(hd + 384 + 16 * e + 4 * (ua & 3))), in.s01, in.s23);
        in.d = __ldg((const unsigned short*)(hd + 416 + 2 * e));
        const short* x = b.x + 256 * blk + (pb ? b.xoff : 0);
#pragma unroll
        for (int j = 0; j < 4; ++j) in.x[j] = *(const uint2*)(x + 32 * j);
    }
    static __device__ __forceinline__ void consume(const In& in, int u, int c, const float4* fq,
                                                   bool upper, bool active, float* p) {
        consume_sc<false>(in, u, c, fq, upper, active, p);
    }
};

// One warp's chains (unit position C = warp % 4 in its block, a constant here: the scale
// decode's shifts fold). uA walks vA = warp, then vA = warp + 16 (pairs (w, w + 8), (w + 16,
// w + 24)); a thread's partial goes to `redp` + 32 v after its virtual lane v's last unit.
template <class F, int C>
__device__ __forceinline__ void mmv_pair_chains(const u8* W, u64 row_bytes, int row0, int n_out,
                                                const short* XQ, int K, int n_tok,
                                                const float4* fq, float* redp) {
    const int warp = threadIdx.x >> 5, half = (threadIdx.x & 3) >> 1;
    const bool upper = half;
    const int n_units = K / 64;
    const typename F::Bases b = F::bases(W, row_bytes, row0, n_out, XQ, K, n_tok, C);
    auto next = [&](int ua) {
        return ua + 32 < n_units ? ua + 32
                                 : ((ua & 31) == warp && warp + 16 < n_units ? warp + 16 : -1);
    };
    float p[2] = {0.f, 0.f};
    auto consume = [&](const typename F::In& in, int ua) {
        const int u = ua + 8 * half;  // this thread's unit
        const bool active = u < n_units;
        F::consume(in, active ? u : ua, C, fq, upper, active, p);
        if (active && u + 32 >= n_units) {
            *(float2*)(redp + 32 * (u & 31)) = make_float2(p[0], p[1]);
            p[0] = 0.f;
            p[1] = 0.f;
        }
    };
    // Unit uA's fetch reads unit uA + 8 too where it exists.
    mmv_walk<typename F::In>(
        warp, next, [&](int ua, typename F::In& in) { F::fetch(b, ua, ua + 8 < n_units, in); },
        consume);
}

template <class F>
__device__ __forceinline__ void mmv_pair_body(const u8* __restrict__ W, u64 row_bytes,
                                              const short* __restrict__ XQ,
                                              const float* __restrict__ XS,
                                              const int* __restrict__ XSUM, int K,
                                              float* __restrict__ Y, int ldy, int n_out, int n_tok) {
    __shared__ __align__(16) float red[32][8][4];  // [virtual lane][row][token]
    extern __shared__ __align__(16) float2 fac[];  // [K/32][4 tokens]: (xs, xs * xsum)
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int row0 = blockIdx.x * 8, kg = K / 32;
    mmv_stage_factors<4>(XS, XSUM, kg, n_tok, fac);
    // Tokens 2(q&1), 2(q&1)+1 of group 0; this thread's partials of virtual lane 0.
    const float4* fq = (const float4*)(fac + 2 * (q & 1));
    float* redp = &red[0][g][2 * (q & 1)];
    const int n_units = K / 64;
    for (int v = warp; v < 32; v += MMV_WARPS)
        if (v >= n_units) red[v][g][q] = 0.f;
    __syncthreads();  // the factors are staged
    if (warp < n_units) {
        // Warp-uniform: no barrier inside.
        switch (warp & 3) {
            case 0: mmv_pair_chains<F, 0>(W, row_bytes, row0, n_out, XQ, K, n_tok, fq, redp); break;
            case 1: mmv_pair_chains<F, 1>(W, row_bytes, row0, n_out, XQ, K, n_tok, fq, redp); break;
            case 2: mmv_pair_chains<F, 2>(W, row_bytes, row0, n_out, XQ, K, n_tok, fq, redp); break;
            default: mmv_pair_chains<F, 3>(W, row_bytes, row0, n_out, XQ, K, n_tok, fq, redp); break;
        }
    }
    __syncthreads();
    if (warp == 0) {
        float total = red[0][g][q];
        for (int j = 1; j < 32; ++j) total = __fadd_rn(total, red[j][g][q]);
        const int row = row0 + g;
        if (row < n_out && q < n_tok) Y[(size_t)q * ldy + row] = total;
    }
}

MMV_KERNEL(mmv_pair_q4_k, mmv_pair_body, MmvPairQ4K)
MMV_KERNEL(mmv_pair_q6_k, mmv_pair_body, MmvPairQ6K)
MMV_KERNEL(mmv_pair_q6p, mmv_pair_body, MmvPairQ6KP)
