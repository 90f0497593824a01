// formats_h16.cuh — the f16 route's weight formats on the device, shared by the decode kernels
// (matvec_h16.cu) and the prefill tiles (mmh_h16.cu): f16 pairs through PTX, the m16n8k16 MMA,
// and per format (FmtQ4H, FmtQ6H; host: muser_cuda::q4h / q6h, whose headers define the
// numerics) the registers of one (16-row group, super-block) piece, its A fragments and its min
// MMA's operands. A piece is three sections (S0, S1, S2 bytes), each an array over the matrix's
// pieces (group-major: piece = group · K/256 + super-block).

// ---- f16 pairs through PTX (no cuda_fp16.h)
__device__ __forceinline__ u32 hfma2(u32 a, u32 b, u32 c) {
    u32 d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ u32 hmul2(u32 a, u32 b) {
    u32 d;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
// (a & MASK) | c in one LOP3: written out, the compiler spends two (one immediate per LOP3) when c
// is the constant H2_MAGIC.
template <u32 MASK>
__device__ __forceinline__ u32 and_or(u32 a, u32 c) {
    u32 d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "n"(MASK), "r"(c));
    return d;
}
// MVH_LEAN >= 1 (`MUSER_CUDA_MVH_LEAN`; the decode kernels' and the prefill tiles' modules): the
// broadcasts below as moves of halves, which ptxas folds into the consuming HFMA2's operand
// selectors (.H0_H0 / .H1_H1) instead of one PRMT each; the same values. (2 and 3 also change
// mvh_chain.cuh's loads of unused token columns: mvh_lean_loads.)
#ifndef MVH_LEAN
#define MVH_LEAN 0
#endif
// The pair's low / high half in both halves.
#if MVH_LEAN
__device__ __forceinline__ u32 lo2(u32 v) {
    u32 d;
    asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; mov.b32 %0, {l, l}; }" : "=r"(d) : "r"(v));
    return d;
}
__device__ __forceinline__ u32 hi2(u32 v) {
    u32 d;
    asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; mov.b32 %0, {h, h}; }" : "=r"(d) : "r"(v));
    return d;
}
#else
__device__ __forceinline__ u32 lo2(u32 v) { return __byte_perm(v, v, 0x1010); }
__device__ __forceinline__ u32 hi2(u32 v) { return __byte_perm(v, v, 0x3232); }
#endif

#define H2_M1024 0xE400E400u  // (−1024, −1024)
#define H2_R16 0x2C002C00u    // (1/16, 1/16)
#define H2_M64 0xD400D400u    // (−64, −64)
#define H2_MAGIC 0x64006400u  // 1024 in both halves: (1024 | q) = 1024 + q

__device__ __forceinline__ void mma_h16(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 16 bytes from global memory into shared memory (`dst`: a shared address), asynchronously.
__device__ __forceinline__ void h16_cp16(u32 dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

// A load from global memory through the read-only path (G) or from anywhere (shared memory).
template <bool G, class T>
__device__ __forceinline__ T ldx(const T* p) {
    if constexpr (G) return __ldg(p);
    else return *p;
}

// L1 cache hints of the f16 matmul chains' global loads (-DMVH_WHINT, `MUSER_CUDA_MVH_WHINT`,
// 2 by default; set for matvec_h16.cu only): 1 reads the weights with L1::no_allocate (each
// byte is read once, so it need not evict the activations the MMAs wait on), 2 also reads the
// activations and their sums with L1::evict_last. The same values, so the same bits. 2 measured
// faster (session 29, tg128 132.6 vs 128.5).
#ifndef MVH_WHINT
#define MVH_WHINT 2
#endif
#define MUSER_LD_HINTED(NAME, Q)                                                                  \
    __device__ __forceinline__ uint4 NAME(const uint4* p) {                                       \
        uint4 v;                                                                                  \
        asm("ld.global.nc" Q ".v4.u32 {%0, %1, %2, %3}, [%4];"                                    \
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)                                          \
            : "l"(p));                                                                            \
        return v;                                                                                 \
    }                                                                                             \
    __device__ __forceinline__ uint2 NAME(const uint2* p) {                                       \
        uint2 v;                                                                                  \
        asm("ld.global.nc" Q ".v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));          \
        return v;                                                                                 \
    }                                                                                             \
    __device__ __forceinline__ u32 NAME(const u32* p) {                                           \
        u32 v;                                                                                    \
        asm("ld.global.nc" Q ".u32 %0, [%1];" : "=r"(v) : "l"(p));                                \
        return v;                                                                                 \
    }
MUSER_LD_HINTED(ld_stream, ".L1::no_allocate")
MUSER_LD_HINTED(ld_keep, ".L1::evict_last")
// A weight load (ldx with MVH_WHINT's hint) and an activation or sum load.
template <bool G, class T>
__device__ __forceinline__ T ldw(const T* p) {
    if constexpr (G && MVH_WHINT >= 1) return ld_stream(p);
    else return ldx<G>(p);
}
template <bool G, class T>
__device__ __forceinline__ T lda(const T* p) {
    if constexpr (G && MVH_WHINT >= 2) return ld_keep(p);
    else return ldx<G>(p);
}

// The piece (group G, super-block s) of a matrix of `pieces` pieces in format F: its sections.
template <class F>
__device__ __forceinline__ void piece_at(const u8* W, size_t pieces, size_t piece, const u8*& p0,
                                         const u8*& p1, const u8*& p2) {
    p0 = W + piece * F::S0;
    p1 = W + pieces * F::S0 + piece * F::S1;
    p2 = W + pieces * (F::S0 + F::S1) + piece * F::S2;
}

// ---- The weight formats. A format provides the per-super-block registers (`Regs`, `load_at`), the
// A fragments of load j's four tiles (`frags`), and the min MMA's A fragment and B words
// (`min_a`, `min_b`). Both formats build each weight as f16(q · dsc) in one FMA: 1024 + q
// (registers 0, 2: rows g) with dsc and −1024·dsc, or 1024 + 16q (registers 1, 3: rows g + 8) with
// dsc/16 and −64·dsc — the same value either way while dsc/16 is a normal f16 (|dsc| ≥ 2^-10,
// i.e. 2^-14 of the matrix's largest: the host's power of two).

// The 8-bit scale forms (Q4H_U8, Q6H_U8): bytes (lo, lo + 1) of w (`sel` 0x4140 or 0x4342)
// less an offset (NEG = the offset's negation in both halves, 1024 + the bytes' bias) as exact
// f16 integers — the f16 whose bits are 0x6400 | b is 1024 + b, one exact HADD2 — times the f16
// in both halves of d2: each product rounded once (IEEE's signed zero where it is zero).
template <u32 NEG>
__device__ __forceinline__ u32 bytes_times(u32 w, u32 sel, u32 d2) {
    u32 x;
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(x) : "r"(__byte_perm(w, 0x64646464u, sel)), "r"(NEG));
    return hmul2(x, d2);
}
// Word e of a uint4 (the scale registers' pairs).
__device__ __forceinline__ u32 word(const uint4& v, int e) {
    return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
}
// A byte pair's selector: the pair at bytes 2·odd, 2·odd + 1.
__device__ __forceinline__ u32 pair_sel(int odd) { return odd ? 0x4342u : 0x4140u; }

// Q4H's A fragments of one load's four tiles (both scale forms): quant words q, the dsc pairs of
// sub-blocks (2j, 2j + 1) for rows g (Dg) and g + 8 (d8p).
__device__ __forceinline__ void q4h_tiles(const uint4& q, u32 Dg, u32 d8p, u32 (&a)[4][4]) {
    const u32 Cg = hmul2(Dg, H2_M1024);
    const u32 D8 = hmul2(d8p, H2_R16), C8 = hmul2(d8p, H2_M64);
    const u32 w4[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const bool hi = i >> 1;
        const u32 dg2 = hi ? hi2(Dg) : lo2(Dg), cg2 = hi ? hi2(Cg) : lo2(Cg);
        const u32 d82 = hi ? hi2(D8) : lo2(D8), c82 = hi ? hi2(C8) : lo2(C8);
        const u32 w = w4[i], w8 = w >> 8;
        a[i][0] = hfma2(and_or<0x000F000Fu>(w, H2_MAGIC), dg2, cg2);
        a[i][1] = hfma2(and_or<0x00F000F0u>(w, H2_MAGIC), d82, c82);
        a[i][2] = hfma2(and_or<0x000F000Fu>(w8, H2_MAGIC), dg2, cg2);
        a[i][3] = hfma2(and_or<0x00F000F0u>(w8, H2_MAGIC), d82, c82);
    }
}

// The Q4H scales' form (-DQ4H_U8, `MUSER_CUDA_Q4H_SCALES=auto|f16|u8`: the host passes 1 where
// the model allows it, auto being the default since session 41; this file's fallback 0 is f16):
// the same numbers either way (below); the host writes the layout that matches (q4h::Scales).
#ifndef Q4H_U8
#define Q4H_U8 0
#endif
// Q4H (muser_cuda::q4h): per (group, super-block) quants [4 loads][32 lanes][16 bytes], then
// - f16 scales: dsc and ndm as f16 [16 rows][8 sub-blocks of 32];
// - 8-bit scales (-DQ4H_U8=1, `Scales::U8`): per row [8 sc bytes][8 m bytes] (16 rows × 16
//   bytes), then per row the f16 pair (d', −dmin') = 2^E·(d, −dmin): 4.625 bits per weight
//   instead of 5. The kernel rebuilds the f16 form's factors exactly: a byte pair becomes two
//   exact f16 integers ((1024 + b) − 1024: the f16 whose bits are 0x6400 | b, one exact HADD2),
//   times d' (or −dmin') in one HMUL2 — the product rounded once, a zero one carrying the
//   product's sign — which is f16(2^E·d·sc) (f16(−2^E·dmin·m)) whenever the pair is exact. The
//   host checks every sub-block against the f16 form bit for bit before it writes this layout
//   (q4h::repack), so both layouts give every kernel the same bits.
// The mins against the 32-value sums.
struct FmtQ4H {
    // sg, s8: rows g and g + 8's 16 scale bytes (f16: 8 dsc; u8: 8 sc and 8 m); mg, m8: f16 the
    // ndm pair of sub-blocks (2t4, 2t4 + 1), u8 the row's (d', −dmin').
    struct Regs {
        uint4 q[4], sg, s8;
        u32 mg, m8;
    };
    // The three sections of a piece (quants, dsc or sc / m bytes, ndm or (d', −dmin')).
    static constexpr int S0 = 2048, S1 = 256, S2 = Q4H_U8 ? 64 : 256;
    // Warps per SM of the one-token kernels (96 registers; matvec_h16.cu's MVH_BOUNDS).
    static constexpr int SM_WARPS = 20;
    // The min MMA's B: 32-bit words per (token, super-block) of the sums (XSUM: 8 f16).
    static constexpr int SUM_WORDS = 4;
    // A piece's registers from its sections p0, p1, p2 (global with G: read-only loads).
    template <bool G>
    static __device__ __forceinline__ void load_at(const u8* p0, const u8* p1, const u8* p2,
                                                   int lane, int g, int t4, Regs& r) {
#pragma unroll
        for (int j = 0; j < 4; ++j) r.q[j] = ldw<G>((const uint4*)p0 + j * 32 + lane);
        r.sg = ldw<G>((const uint4*)p1 + g);
        r.s8 = ldw<G>((const uint4*)p1 + g + 8);
#if Q4H_U8
        r.mg = ldw<G>((const u32*)p2 + g);
        r.m8 = ldw<G>((const u32*)p2 + g + 8);
#else
        r.mg = ldw<G>((const u32*)p2 + g * 4 + t4);
        r.m8 = ldw<G>((const u32*)p2 + (g + 8) * 4 + t4);
#endif
    }
    static __device__ __forceinline__ void frags(const Regs& r, int j, u32 (&a)[4][4]) {
        // Sub-blocks 2j and 2j + 1 of rows g and g + 8.
#if Q4H_U8
        const u32 sel = pair_sel(j & 1);
        const u32 Dg = bytes_times<H2_M1024>(word(r.sg, j >> 1), sel, lo2(r.mg));
        const u32 d8p = bytes_times<H2_M1024>(word(r.s8, j >> 1), sel, lo2(r.m8));
        q4h_tiles(r.q[j], Dg, d8p, a);
#else
        q4h_tiles(r.q[j], word(r.sg, j), word(r.s8, j), a);
#endif
    }
    // A = ndm of sub-blocks 2t4, 2t4 + 1 (rows g, g + 8), zeros at k 8..15; B = 32-value sums.
    // (u8: m bytes 8 + 2t4, 9 + 2t4 of the row — word z for t4 < 2, w above.)
    static __device__ __forceinline__ void min_a(const Regs& r, int t4, u32 (&am)[4]) {
#if Q4H_U8
        const u32 sel = pair_sel(t4 & 1);
        am[0] = bytes_times<H2_M1024>((t4 & 2) ? r.sg.w : r.sg.z, sel, hi2(r.mg));
        am[1] = bytes_times<H2_M1024>((t4 & 2) ? r.s8.w : r.s8.z, sel, hi2(r.m8));
#else
        am[0] = r.mg;
        am[1] = r.m8;
#endif
        am[2] = 0u;
        am[3] = 0u;
    }
    // B = the (token, super-block)'s sums `sw` (SUM_WORDS words).
    template <bool G>
    static __device__ __forceinline__ void min_b(const u32* sw, int t4, u32& b0, u32& b1) {
        b0 = lda<G>(sw + t4);
        b1 = 0u;
    }
    static __device__ __forceinline__ const u16* sums(const u16* XSUM, const u16* XSUM16) {
        return XSUM;
    }
    // The scale registers folded into one word (probes_h16.cu's stream probes).
    static __device__ __forceinline__ u32 xor_scales(const Regs& r) {
        return r.sg.x ^ r.sg.y ^ r.sg.z ^ r.sg.w ^ r.s8.x ^ r.s8.y ^ r.s8.z ^ r.s8.w ^ r.mg ^ r.m8;
    }
};

// Q6H (muser_cuda::q6h): per (group, super-block) low nibbles [4 loads][32 lanes][16 bytes] as
// Q4H's, high bits [4 loads][32 lanes][8 bytes] (word h of a load: tiles 2h, 2h + 1; tile
// 2h + 1's bits two places above tile 2h's; for register p the first value's two bits at 4 + 4p
// (p < 3) or 0 (p = 3), the second's 16 higher), dsc as f16 [16 rows][16 sub-blocks of 16]; the
// −32 offset as the min MMA: ndm = −32·dsc (exact) against the 16-value sums.
// With 8-bit scales (-DQ6H_U8=1, `MUSER_CUDA_Q6H_SCALES=u8`; muser_cuda::q6h, `Scales::U8`) the
// third section is [16 rows][16 bytes sc + 128] then [8 row pairs (g, g + 8)][2 f16 d' = 2^E·d]
// (288 bytes instead of 512: 6.56 bits per weight instead of 7), each dsc pair rebuilt as
// bytes_times (the exact product sc·d' rounded once) — Q6H's f16(2^E·d·sc) wherever 2^E·d is
// exact: the host checks every sub-block bit for bit (q6h::repack).
// (Measured slower in session 41: the host passes 0 unless MUSER_CUDA_Q6H_SCALES=u8.)
#ifndef Q6H_U8
#define Q6H_U8 0
#endif
struct FmtQ6H {
    struct Regs {
        uint4 q[4];
        uint2 h[4];
#if Q6H_U8
        uint4 sg, s8;
        u32 dd;
#else
        uint4 dg[2], d8[2];
#endif
    };
    // The three sections of a piece (low nibbles, high bits, dsc): their bytes.
    static constexpr int S0 = 2048, S1 = 1024, S2 = Q6H_U8 ? 288 : 512;
    // Warps per SM of the one-token kernels (124 registers; matvec_h16.cu's MVH_BOUNDS).
    static constexpr int SM_WARPS = 16;
    // The min MMA's B: 32-bit words per (token, super-block) of the sums (XSUM16: 16 f16).
    static constexpr int SUM_WORDS = 8;
    template <bool G>
    static __device__ __forceinline__ void load_at(const u8* p0, const u8* p1, const u8* p2,
                                                   int lane, int g, int t4, Regs& r) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            r.q[j] = ldw<G>((const uint4*)p0 + j * 32 + lane);
            r.h[j] = ldw<G>((const uint2*)p1 + j * 32 + lane);
        }
#if Q6H_U8
        r.sg = ldw<G>((const uint4*)p2 + g);
        r.s8 = ldw<G>((const uint4*)p2 + g + 8);
        r.dd = ldw<G>((const u32*)(p2 + 256) + g);
#else
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            r.dg[c] = ldw<G>((const uint4*)p2 + g * 2 + c);
            r.d8[c] = ldw<G>((const uint4*)p2 + (g + 8) * 2 + c);
        }
#endif
    }
#if Q6H_U8
    // dsc pair `wi` (sub-blocks 2wi, 2wi + 1) of row g (R8 false) or g + 8: from the bytes.
    template <bool R8>
    static __device__ __forceinline__ u32 pair(const Regs& r, int wi) {
        constexpr u32 NEG = 0xE480E480u;  // (−1152, −1152): 1024 + the bytes' bias 128
        if constexpr (R8) return bytes_times<NEG>(word(r.s8, wi >> 1), pair_sel(wi & 1), hi2(r.dd));
        else return bytes_times<NEG>(word(r.sg, wi >> 1), pair_sel(wi & 1), lo2(r.dd));
    }
#else
    // dsc pair word `wi` (sub-blocks 2wi, 2wi + 1) of row g (R8 false) or g + 8.
    template <bool R8>
    static __device__ __forceinline__ u32 pair(const Regs& r, int wi) {
        if constexpr (R8) return word(r.d8[wi >> 2], wi & 3);
        else return word(r.dg[wi >> 2], wi & 3);
    }
#endif
    static __device__ __forceinline__ void frags(const Regs& r, int j, u32 (&a)[4][4]) {
        const u32 w4[4] = {r.q[j].x, r.q[j].y, r.q[j].z, r.q[j].w};
        const u32 hw[2] = {r.h[j].x, r.h[j].y};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            // Sub-block 4j + i: word 2j + i/2 of the row's dsc pairs, half i % 2.
            const u32 pg = pair<false>(r, 2 * j + (i >> 1)), p8 = pair<true>(r, 2 * j + (i >> 1));
            const u32 Dg = (i & 1) ? hi2(pg) : lo2(pg), D8r = (i & 1) ? hi2(p8) : lo2(p8);
            const u32 Cg = hmul2(Dg, H2_M1024), D8 = hmul2(D8r, H2_R16), C8 = hmul2(D8r, H2_M64);
            const u32 w = w4[i], w8 = w >> 8, h = hw[i >> 1] >> (2 * (i & 1)), h8 = h >> 8;
            a[i][0] = hfma2(and_or<0x00300030u>(h, and_or<0x000F000Fu>(w, H2_MAGIC)), Dg, Cg);
            a[i][1] = hfma2(and_or<0x03000300u>(h, and_or<0x00F000F0u>(w, H2_MAGIC)), D8, C8);
            a[i][2] = hfma2(and_or<0x00300030u>(h8, and_or<0x000F000Fu>(w8, H2_MAGIC)), Dg, Cg);
            a[i][3] = hfma2(and_or<0x03000300u>(h << 8, and_or<0x00F000F0u>(w8, H2_MAGIC)), D8, C8);
        }
    }
    // A = −32·dsc of sub-blocks (2t4, 2t4 + 1) and (2t4 + 8, 2t4 + 9), rows g and g + 8; B = the
    // 16-value sums of the same sub-blocks.
    static __device__ __forceinline__ void min_a(const Regs& r, int t4, u32 (&am)[4]) {
        const u32 m32 = 0xD000D000u;  // (−32, −32)
        am[0] = hmul2(pair<false>(r, t4), m32);
        am[1] = hmul2(pair<true>(r, t4), m32);
        am[2] = hmul2(pair<false>(r, t4 + 4), m32);
        am[3] = hmul2(pair<true>(r, t4 + 4), m32);
    }
    template <bool G>
    static __device__ __forceinline__ void min_b(const u32* sw, int t4, u32& b0, u32& b1) {
        b0 = lda<G>(sw + t4);
        b1 = lda<G>(sw + t4 + 4);
    }
    static __device__ __forceinline__ const u16* sums(const u16* XSUM, const u16* XSUM16) {
        return XSUM16;
    }
};

// An experiment, not yet a route (-DMVH_ACC2, `MUSER_CUDA_MVH_ACC2=0|1|2|3`, default 0: 1 every
// format, 2 Q4H only, 3 Q4H at S = 4 chains only; the engine refuses it but for timing runs,
// `MUSER_CUDA_MVH_ACC2_TIMING=1`): each super-block's MMAs of an output into two accumulators —
// the even k16 steps of each 64-value load (tiles i = 0, 2) and the min step into the chain's,
// the odd ones (i = 1, 3) into a second set from zero, added into the chain's (one f32 add)
// after the min step — so a decode piece's critical path is ~9 dependent MMAs instead of 17.
// The decode kernels (mvh_piece: `mvh_*`, `mmh_*`) and, since session 45, the prefill tiles
// (`mmt_*`, `mmw_*` / `mmws_*`) take the same order under the same define for the same (format,
// S), so every kernel still gives an output the same bits — which only the device can confirm
// (kernels_h16, cuda_route's f16 test under the switch). Session 45: `mvh_persist`'s Q4H graph
// −16.8% per layer; per matrix the Q4H kernels gain and the Q6H ones lose (docs/cuda.md's row),
// hence `=2`; `=3` (session 47) keeps the two that gained most, the S = 4 matrices (Muse
// Glimmer's attention output and Q4_K FFN down: −10% and −17% a launch), whose warpgroup tiles
// then run at 2 warpgroups (`mmw_wg_of`, mmw_h16.cu) while FFN gate / up keep 3.
#ifndef MVH_ACC2
#define MVH_ACC2 0
#endif
// Whether format F's super-blocks at S chains run MVH_ACC2's two accumulators (Q4H: SM_WARPS
// 20). S is part of the numbers already (plan_h16.rs `h16_chains`), so every kernel of a matrix
// — decode, packed rows, prefill — asks with the same pair.
template <class F, int S>
__device__ constexpr bool mvh_acc2_on() {
    return MVH_ACC2 == 1 || (MVH_ACC2 == 2 && F::SM_WARPS == 20) ||
           (MVH_ACC2 == 3 && F::SM_WARPS == 20 && S == 4);
}
