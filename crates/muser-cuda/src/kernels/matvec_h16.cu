// matvec_h16.cu — the f16 tensor-core route's activation step and its matmul of up to 8 tokens per
// row pass (decode, packed rows; more tokens take more blocks along y). Weights in the Q4H layout
// (host: muser_cuda::q4h, whose header defines the numerics; docs/cuda.md, "the f16 route").
//
// act_h16: X [n_tok][K] f32 -> XH [n_tok][K] f16 in fragment order, XSUM [n_tok][K/32] f16,
//   XINV [n_tok] f32. Token t's values times 2^(9 − e) (its largest magnitude in [2^e, 2^(e+1))
//   lands in [512, 1024), so a 32-value sum stays below f16's 65504), rounded to f16; XINV[t]
//   = 2^(e − 9). Within each 64-value chunk c, position 16·t4 + 4·i + e2 holds value
//   64c + 16i + 2·t4 + (e2 & 1) + 8·(e2 >> 1): a lane (g, t4) reads its m16n8k16 B fragments of
//   the chunk's 4 tiles as 32 contiguous bytes. XSUM[t][b] = f16 of the f32 sum, left to right,
//   of the 32 f16 values of sub-block b.
//
// mvh_q4h_s{4,8,16}: Y[t][r] = (Σ_k f16(q·dsc)·x'_k + Σ_b ndm_b·XSUM[t][b]) · (XINV[t] · w_inv) over
//   mma.sync.m16n8k16 (f16 in, f32 accumulate). Block = S warps on one 16-row group and 8 tokens
//   (blockIdx.y); warp w chains the MMAs of super-blocks w, w + S, w + 2S, … in order (per
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
    act_h16(const float* X, int K, int n_tok, u16* XH, u16* XSUM, float* XINV) {
    __shared__ float red[ACT_H16_THREADS / 32];
    PDL_ENTRY()
    const int t = blockIdx.x;
    if (t >= n_tok) return;
    const float* x = X + (size_t)t * K;
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
    for (int b = threadIdx.x; b < K / 32; b += blockDim.x) {
        float s = 0.f;
        for (int j = 0; j < 32; ++j) s = __fadd_rn(s, h2f(f2h(__fmul_rn(x[32 * b + j], scale))));
        XSUM[(size_t)t * (K / 32) + b] = f2h(s);
    }
}

template <int S>
__device__ __forceinline__ void mvh_q4h_body(const u8* __restrict__ W, int n_out, int K,
                                             const u16* __restrict__ XH,
                                             const u16* __restrict__ XSUM,
                                             const float* __restrict__ XINV, float w_inv,
                                             float* __restrict__ Y, int ldy, int n_tok) {
    __shared__ float part[S][32][4];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int G = blockIdx.x, nsb = K / 256, ng = n_out / 16;
    const int tok = 8 * blockIdx.y + g;  // this lane's B column (token)
    const bool has = tok < n_tok;
    const uint4* Q = (const uint4*)W;                                     // [ng][nsb][4][32]
    const uint4* D = (const uint4*)(W + (size_t)ng * nsb * 2048);         // [ng][nsb][16]
    const u32* M = (const u32*)(W + (size_t)ng * nsb * (2048 + 256));     // [ng][nsb][16][4]
    const uint4* xrow = (const uint4*)(XH + (size_t)tok * K) + 2 * t4;    // + 8 per 64 values
    const u32* xsrow = (const u32*)(XSUM + (size_t)tok * (K / 32)) + t4;  // + 4 per super-block
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    uint4 q[4], dg = make_uint4(0, 0, 0, 0), d8 = dg;
    u32 mg = 0, m8 = 0;
    auto load = [&](int s, uint4(&qq)[4], uint4& a, uint4& b, u32& c, u32& d) {
        const size_t base = (size_t)G * nsb + s;
#pragma unroll
        for (int j = 0; j < 4; ++j) qq[j] = __ldg(Q + (base * 4 + j) * 32 + lane);
        a = __ldg(D + base * 16 + g);
        b = __ldg(D + base * 16 + g + 8);
        c = __ldg(M + (base * 16 + g) * 4 + t4);
        d = __ldg(M + (base * 16 + g + 8) * 4 + t4);
    };
    int s = warp;
    if (s < nsb) load(s, q, dg, d8, mg, m8);
    for (; s < nsb; s += S) {
        uint4 qn[4], dgn = make_uint4(0, 0, 0, 0), d8n = dgn;
        u32 mgn = 0, m8n = 0;
        if (s + S < nsb) load(s + S, qn, dgn, d8n, mgn, m8n);
        const u32 dgw[4] = {dg.x, dg.y, dg.z, dg.w}, d8w[4] = {d8.x, d8.y, d8.z, d8.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            uint4 xa = make_uint4(0, 0, 0, 0), xb = xa;
            if (has) {
                const uint4* xp = xrow + (size_t)(4 * s + j) * 8;
                xa = __ldg(xp);
                xb = __ldg(xp + 1);
            }
            const u32 xs[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
            const u32 w4[4] = {q[j].x, q[j].y, q[j].z, q[j].w};
            // Sub-blocks 2j and 2j + 1 of rows g (registers 0, 2: 1024 + q, constants dsc and
            // −1024·dsc) and g + 8 (registers 1, 3: 1024 + 16q, dsc/16 and −64·dsc).
            const u32 Dg = dgw[j], Cg = hmul2(dgw[j], H2_M1024);
            const u32 D8 = hmul2(d8w[j], H2_R16), C8 = hmul2(d8w[j], H2_M64);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const bool hi = i >> 1;
                const u32 dg2 = hi ? hi2(Dg) : lo2(Dg), cg2 = hi ? hi2(Cg) : lo2(Cg);
                const u32 d82 = hi ? hi2(D8) : lo2(D8), c82 = hi ? hi2(C8) : lo2(C8);
                const u32 w = w4[i], w8 = w >> 8;
                u32 a[4];
                a[0] = hfma2((w & 0x000F000Fu) | H2_MAGIC, dg2, cg2);
                a[1] = hfma2((w & 0x00F000F0u) | H2_MAGIC, d82, c82);
                a[2] = hfma2((w8 & 0x000F000Fu) | H2_MAGIC, dg2, cg2);
                a[3] = hfma2((w8 & 0x00F000F0u) | H2_MAGIC, d82, c82);
                mma_h16(acc, a, xs[2 * i], xs[2 * i + 1]);
            }
        }
        // The mins: A = ndm of sub-blocks 2t4, 2t4 + 1 (rows g, g + 8), zeros at k 8..15.
        const u32 am[4] = {mg, m8, 0u, 0u};
        mma_h16(acc, am, has ? __ldg(xsrow + 4 * s) : 0u, 0u);
#pragma unroll
        for (int j = 0; j < 4; ++j) q[j] = qn[j];
        dg = dgn;
        d8 = d8n;
        mg = mgn;
        m8 = m8n;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) part[warp][lane][e] = acc[e];
    __syncthreads();
    if (warp != 0) return;
#pragma unroll
    for (int w = 1; w < S; ++w)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[e] = __fadd_rn(acc[e], part[w][lane][e]);
    const int r0 = 16 * G + g;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const int r = r0 + 8 * (e >> 1), t = 8 * blockIdx.y + 2 * t4 + (e & 1);
        if (t < n_tok) Y[(size_t)t * ldy + r] = __fmul_rn(acc[e], __fmul_rn(XINV[t], w_inv));
    }
}

#define MVH_KERNEL(NAME, S)                                                                      \
    extern "C" __global__ void __launch_bounds__(32 * S)                                         \
        NAME(const u8* W, int n_out, int K, const u16* XH, const u16* XSUM, const float* XINV,   \
             float w_inv, float* Y, int ldy, int n_tok) {                                        \
        PDL_ENTRY()                                                                              \
        mvh_q4h_body<S>(W, n_out, K, XH, XSUM, XINV, w_inv, Y, ldy, n_tok);                      \
    }
MVH_KERNEL(mvh_q4h_s4, 4)
MVH_KERNEL(mvh_q4h_s8, 8)
MVH_KERNEL(mvh_q4h_s16, 16)
