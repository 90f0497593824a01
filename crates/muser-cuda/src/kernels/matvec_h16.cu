// matvec_h16.cu — the f16 tensor-core route's activation step and its matmul of up to 8 tokens per
// row pass (decode, packed rows; more tokens take more blocks along y). Weights in the Q4H and
// Q6H layouts (host: muser_cuda::q4h / q6h, whose headers define the numerics; docs/cuda.md,
// "the f16 route").
//
// act_h16: X [n_tok][ldx] f32 (K used) -> XH [n_tok][K] f16 in fragment order, XSUM [n_tok][K/32] and
//   XSUM16 [n_tok][K/16] f16, XINV [n_tok] f32. Token t's values times 2^(9 − e) (its largest
//   magnitude in [2^e, 2^(e+1)) lands in [512, 1024), so a 32-value sum stays below f16's 65504),
//   rounded to f16; XINV[t] = 2^(e − 9). Within each 64-value chunk c, position 16·t4 + 4·i + e2
//   holds value 64c + 16i + 2·t4 + (e2 & 1) + 8·(e2 >> 1): a lane (g, t4) reads its m16n8k16 B
//   fragments of the chunk's 4 tiles as 32 contiguous bytes. XSUM[t][b] / XSUM16[t][b] = f16 of
//   the f32 sum, left to right, of the f16 values of the 32- / 16-value sub-block b.
//
// mvh_{q4h,q6h}_s{4,8,16}: Y[t][r] = (Σ_k f16(q·dsc)·x'_k + Σ_b ndm_b·sum_b) · (XINV[t] · w_inv)
//   over mma.sync.m16n8k16 (f16 in, f32 accumulate). Block = S warps on one 16-row group and 8
//   tokens (blockIdx.y); warp w chains the MMAs of super-blocks w, w + S, w + 2S, … in order (per
//   super-block: loads j = 0..3, tiles i = 0..3, then the min MMA), and warp 0 adds the S chains
//   in warp order. Each output's operations depend on (K, S) only — not on the token count or
//   the other columns — so 1 token and 8 give the same bits; S per matrix is the host's
//   (`Registry::mvh_plan`). Needs n_out % 16 == 0, K % 256 == 0, 16-byte aligned W and XH.

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
// The pair's low / high half in both halves.
__device__ __forceinline__ u32 lo2(u32 v) { return __byte_perm(v, v, 0x1010); }
__device__ __forceinline__ u32 hi2(u32 v) { return __byte_perm(v, v, 0x3232); }

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

#define ACT_H16_THREADS 256

extern "C" __global__ void __launch_bounds__(ACT_H16_THREADS)
    act_h16(const float* X, int ldx, int K, int n_tok, u16* XH, u16* XSUM, u16* XSUM16,
            float* XINV) {
    __shared__ float red[ACT_H16_THREADS / 32];
    PDL_ENTRY()
    const int t = blockIdx.x;
    if (t >= n_tok) return;
    const float* x = X + (size_t)t * ldx;
    float amax = 0.f;
    for (int i = threadIdx.x; i < K; i += blockDim.x) amax = fmaxf(amax, fabsf(x[i]));
    for (int o = 16; o; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = amax;
    __syncthreads();
    amax = red[0];
    for (int w = 1; w < ACT_H16_THREADS / 32; ++w) amax = fmaxf(amax, red[w]);
    int sh = 0;  // the power of two: values times 2^sh
    if (amax > 0.f && amax <= 3.40282347e38f) sh = min(9 - ilogbf(amax), 127);
    const float scale = ldexpf(1.f, sh);
    if (threadIdx.x == 0) XINV[t] = ldexpf(1.f, -sh);
    u16* xh = XH + (size_t)t * K;
    for (int o = threadIdx.x; o < K; o += blockDim.x) {
        const int w = o & 63, t4 = w >> 4, i = (w >> 2) & 3, e2 = w & 3;
        const int k = (o & ~63) + 16 * i + 2 * t4 + (e2 & 1) + 8 * (e2 >> 1);
        xh[o] = f2h(__fmul_rn(x[k], scale));
    }
    for (int b = threadIdx.x; b < K / 16; b += blockDim.x) {
        float s = 0.f;
        for (int j = 0; j < 16; ++j) s = __fadd_rn(s, h2f(f2h(__fmul_rn(x[16 * b + j], scale))));
        XSUM16[(size_t)t * (K / 16) + b] = f2h(s);
        if (b % 2 == 0) {  // the 32-value sum continues left to right
            for (int j = 16; j < 32; ++j)
                s = __fadd_rn(s, h2f(f2h(__fmul_rn(x[16 * b + j], scale))));
            XSUM[(size_t)t * (K / 32) + b / 2] = f2h(s);
        }
    }
}

// ---- The weight formats. A format provides the per-super-block registers (`Regs`, `load`), the
// A fragments of load j's four tiles (`frags`), and the min MMA's A fragment and B words
// (`min_a`, `min_b`). Both formats build each weight as f16(q · dsc) in one FMA: 1024 + q
// (registers 0, 2: rows g) with dsc and −1024·dsc, or 1024 + 16q (registers 1, 3: rows g + 8) with
// dsc/16 and −64·dsc — the same value either way while dsc/16 is a normal f16 (|dsc| ≥ 2^-10,
// i.e. 2^-14 of the matrix's largest: the host's power of two).

// Q4H (muser_cuda::q4h): per (group, super-block) quants [4 loads][32 lanes][16 bytes], dsc and
// ndm as f16 [16 rows][8 sub-blocks of 32]; the mins against the 32-value sums.
struct FmtQ4H {
    struct Regs {
        uint4 q[4], dg, d8;
        u32 mg, m8;
    };
    static __device__ __forceinline__ void load(const u8* W, size_t pieces, size_t base, int lane,
                                                int g, int t4, Regs& r) {
        const uint4* Q = (const uint4*)W;
        const uint4* D = (const uint4*)(W + pieces * 2048);
        const u32* M = (const u32*)(W + pieces * (2048 + 256));
#pragma unroll
        for (int j = 0; j < 4; ++j) r.q[j] = __ldg(Q + (base * 4 + j) * 32 + lane);
        r.dg = __ldg(D + base * 16 + g);
        r.d8 = __ldg(D + base * 16 + g + 8);
        r.mg = __ldg(M + (base * 16 + g) * 4 + t4);
        r.m8 = __ldg(M + (base * 16 + g + 8) * 4 + t4);
    }
    static __device__ __forceinline__ void frags(const Regs& r, int j, u32 (&a)[4][4]) {
        const u32 dgw[4] = {r.dg.x, r.dg.y, r.dg.z, r.dg.w}, d8w[4] = {r.d8.x, r.d8.y, r.d8.z, r.d8.w};
        const u32 w4[4] = {r.q[j].x, r.q[j].y, r.q[j].z, r.q[j].w};
        // Sub-blocks 2j and 2j + 1.
        const u32 Dg = dgw[j], Cg = hmul2(dgw[j], H2_M1024);
        const u32 D8 = hmul2(d8w[j], H2_R16), C8 = hmul2(d8w[j], H2_M64);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const bool hi = i >> 1;
            const u32 dg2 = hi ? hi2(Dg) : lo2(Dg), cg2 = hi ? hi2(Cg) : lo2(Cg);
            const u32 d82 = hi ? hi2(D8) : lo2(D8), c82 = hi ? hi2(C8) : lo2(C8);
            const u32 w = w4[i], w8 = w >> 8;
            a[i][0] = hfma2((w & 0x000F000Fu) | H2_MAGIC, dg2, cg2);
            a[i][1] = hfma2((w & 0x00F000F0u) | H2_MAGIC, d82, c82);
            a[i][2] = hfma2((w8 & 0x000F000Fu) | H2_MAGIC, dg2, cg2);
            a[i][3] = hfma2((w8 & 0x00F000F0u) | H2_MAGIC, d82, c82);
        }
    }
    // A = ndm of sub-blocks 2t4, 2t4 + 1 (rows g, g + 8), zeros at k 8..15; B = 32-value sums.
    static __device__ __forceinline__ void min_a(const Regs& r, int t4, u32 (&am)[4]) {
        am[0] = r.mg;
        am[1] = r.m8;
        am[2] = 0u;
        am[3] = 0u;
    }
    static __device__ __forceinline__ void min_b(const u16* XSUM, const u16* XSUM16, int K,
                                                 int tok, int s, int t4, u32& b0, u32& b1) {
        b0 = __ldg((const u32*)(XSUM + (size_t)tok * (K / 32)) + 4 * s + t4);
        b1 = 0u;
    }
};

// Q6H (muser_cuda::q6h): per (group, super-block) low nibbles [4 loads][32 lanes][16 bytes] as
// Q4H's, high bits [4 loads][32 lanes][8 bytes] (word h of a load: tiles 2h, 2h + 1; tile
// 2h + 1's bits two places above tile 2h's; for register p the first value's two bits at 4 + 4p
// (p < 3) or 0 (p = 3), the second's 16 higher), dsc as f16 [16 rows][16 sub-blocks of 16]; the
// −32 offset as the min MMA: ndm = −32·dsc (exact) against the 16-value sums.
struct FmtQ6H {
    struct Regs {
        uint4 q[4];
        uint2 h[4];
        uint4 dg[2], d8[2];
    };
    static __device__ __forceinline__ void load(const u8* W, size_t pieces, size_t base, int lane,
                                                int g, int t4, Regs& r) {
        const uint4* Q = (const uint4*)W;
        const uint2* H = (const uint2*)(W + pieces * 2048);
        const uint4* D = (const uint4*)(W + pieces * (2048 + 1024));
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            r.q[j] = __ldg(Q + (base * 4 + j) * 32 + lane);
            r.h[j] = __ldg(H + (base * 4 + j) * 32 + lane);
        }
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            r.dg[c] = __ldg(D + (base * 16 + g) * 2 + c);
            r.d8[c] = __ldg(D + (base * 16 + g + 8) * 2 + c);
        }
    }
    // dsc pair word `wi` (sub-blocks 2wi, 2wi + 1) of a row's 16.
    static __device__ __forceinline__ u32 dword(const uint4 (&d)[2], int wi) {
        const uint4 v = d[wi >> 2];
        const int e = wi & 3;
        return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
    }
    static __device__ __forceinline__ void frags(const Regs& r, int j, u32 (&a)[4][4]) {
        const u32 w4[4] = {r.q[j].x, r.q[j].y, r.q[j].z, r.q[j].w};
        const u32 hw[2] = {r.h[j].x, r.h[j].y};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            // Sub-block 4j + i: word 2j + i/2 of the row's dsc pairs, half i % 2.
            const u32 pg = dword(r.dg, 2 * j + (i >> 1)), p8 = dword(r.d8, 2 * j + (i >> 1));
            const u32 Dg = (i & 1) ? hi2(pg) : lo2(pg), D8r = (i & 1) ? hi2(p8) : lo2(p8);
            const u32 Cg = hmul2(Dg, H2_M1024), D8 = hmul2(D8r, H2_R16), C8 = hmul2(D8r, H2_M64);
            const u32 w = w4[i], w8 = w >> 8, h = hw[i >> 1] >> (2 * (i & 1)), h8 = h >> 8;
            a[i][0] = hfma2((w & 0x000F000Fu) | (h & 0x00300030u) | H2_MAGIC, Dg, Cg);
            a[i][1] = hfma2((w & 0x00F000F0u) | (h & 0x03000300u) | H2_MAGIC, D8, C8);
            a[i][2] = hfma2((w8 & 0x000F000Fu) | (h8 & 0x00300030u) | H2_MAGIC, Dg, Cg);
            a[i][3] = hfma2((w8 & 0x00F000F0u) | ((h << 8) & 0x03000300u) | H2_MAGIC, D8, C8);
        }
    }
    // A = −32·dsc of sub-blocks (2t4, 2t4 + 1) and (2t4 + 8, 2t4 + 9), rows g and g + 8; B = the
    // 16-value sums of the same sub-blocks.
    static __device__ __forceinline__ void min_a(const Regs& r, int t4, u32 (&am)[4]) {
        const u32 m32 = 0xD000D000u;  // (−32, −32)
        am[0] = hmul2(dword(r.dg, t4), m32);
        am[1] = hmul2(dword(r.d8, t4), m32);
        am[2] = hmul2(dword(r.dg, t4 + 4), m32);
        am[3] = hmul2(dword(r.d8, t4 + 4), m32);
    }
    static __device__ __forceinline__ void min_b(const u16* XSUM, const u16* XSUM16, int K,
                                                 int tok, int s, int t4, u32& b0, u32& b1) {
        const u32* xs = (const u32*)(XSUM16 + (size_t)tok * (K / 16)) + 8 * s + t4;
        b0 = __ldg(xs);
        b1 = __ldg(xs + 4);
    }
};

// The matmul: S warps per 16-row group, TG groups of 8 tokens per warp (blockIdx.y covers 8·TG
// tokens). Every output's MMA sequence is the same for any TG — one A fragment feeds the TG
// token groups' MMAs — so decode (TG = 1) and prefill (TG = 4) give the same bits.
template <class F, int S, int TG>
__device__ __forceinline__ void mvh_body(const u8* __restrict__ W, int n_out, int K,
                                         const u16* __restrict__ XH, const u16* __restrict__ XSUM,
                                         const u16* __restrict__ XSUM16,
                                         const float* __restrict__ XINV, float w_inv,
                                         float* __restrict__ Y, int ldy, int n_tok) {
    __shared__ float part[S][32][TG][4];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int G = blockIdx.x, nsb = K / 256;
    const size_t pieces = (size_t)(n_out / 16) * nsb;
    const int tok0 = 8 * TG * blockIdx.y;
    float acc[TG][4];
#pragma unroll
    for (int n = 0; n < TG; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
    typename F::Regs r;
    int s = warp;
    if (s < nsb) F::load(W, pieces, (size_t)G * nsb + s, lane, g, t4, r);
    for (; s < nsb; s += S) {
        typename F::Regs rn;
        if (s + S < nsb) F::load(W, pieces, (size_t)G * nsb + s + S, lane, g, t4, rn);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            u32 a[4][4];
            F::frags(r, j, a);
#pragma unroll
            for (int n = 0; n < TG; ++n) {
                const int tok = tok0 + 8 * n + g;  // this lane's B column
                uint4 xa = make_uint4(0, 0, 0, 0), xb = xa;
                if (tok < n_tok) {
                    const uint4* xp = (const uint4*)(XH + (size_t)tok * K) + 2 * t4 + (size_t)(4 * s + j) * 8;
                    xa = __ldg(xp);
                    xb = __ldg(xp + 1);
                }
                const u32 xs[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
                for (int i = 0; i < 4; ++i) mma_h16(acc[n], a[i], xs[2 * i], xs[2 * i + 1]);
            }
        }
        u32 am[4];
        F::min_a(r, t4, am);
#pragma unroll
        for (int n = 0; n < TG; ++n) {
            const int tok = tok0 + 8 * n + g;
            u32 b0 = 0u, b1 = 0u;
            if (tok < n_tok) F::min_b(XSUM, XSUM16, K, tok, s, t4, b0, b1);
            mma_h16(acc[n], am, b0, b1);
        }
        r = rn;
    }
#pragma unroll
    for (int n = 0; n < TG; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) part[warp][lane][n][e] = acc[n][e];
    __syncthreads();
    if (warp != 0) return;
#pragma unroll
    for (int w = 1; w < S; ++w)
#pragma unroll
        for (int n = 0; n < TG; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[n][e] = __fadd_rn(acc[n][e], part[w][lane][n][e]);
    const int r0 = 16 * G + g;
#pragma unroll
    for (int n = 0; n < TG; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int row = r0 + 8 * (e >> 1), t = tok0 + 8 * n + 2 * t4 + (e & 1);
            if (t < n_tok)
                Y[(size_t)t * ldy + row] = __fmul_rn(acc[n][e], __fmul_rn(XINV[t], w_inv));
        }
}

#define MVH_KERNEL(NAME, F, S, TG)                                                               \
    extern "C" __global__ void __launch_bounds__(32 * S)                                         \
        NAME(const u8* W, int n_out, int K, const u16* XH, const u16* XSUM, const u16* XSUM16,   \
             const float* XINV, float w_inv, float* Y, int ldy, int n_tok) {                     \
        PDL_ENTRY()                                                                              \
        mvh_body<F, S, TG>(W, n_out, K, XH, XSUM, XSUM16, XINV, w_inv, Y, ldy, n_tok);           \
    }
// Decode and packed rows: 8 tokens per block row.
MVH_KERNEL(mvh_q4h_s4, FmtQ4H, 4, 1)
MVH_KERNEL(mvh_q4h_s8, FmtQ4H, 8, 1)
MVH_KERNEL(mvh_q4h_s16, FmtQ4H, 16, 1)
MVH_KERNEL(mvh_q6h_s4, FmtQ6H, 4, 1)
MVH_KERNEL(mvh_q6h_s8, FmtQ6H, 8, 1)
MVH_KERNEL(mvh_q6h_s16, FmtQ6H, 16, 1)
// Prefill: 32 tokens per block row (the prototype's best, docs/receipts/cuda-hmma-prototype.txt).
MVH_KERNEL(mmh_q4h_s4, FmtQ4H, 4, 4)
MVH_KERNEL(mmh_q4h_s8, FmtQ4H, 8, 4)
MVH_KERNEL(mmh_q4h_s16, FmtQ4H, 16, 4)
MVH_KERNEL(mmh_q6h_s4, FmtQ6H, 4, 4)
MVH_KERNEL(mmh_q6h_s8, FmtQ6H, 8, 4)
MVH_KERNEL(mmh_q6h_s16, FmtQ6H, 16, 4)
