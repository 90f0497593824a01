// mmv_a16.cu — packed decode rows on the int8 tensor cores: up to 8 tokens (one per sequence)
// × Q4_K weights, one m16n8k32 tile per unit (16 rows × 8 token columns). Needs common.cuh +
// formats_a16.cuh + mma_int8.cuh.
//
// Same floats as decode: every (row, token) output is mva_pipe's operation sequence — virtual
// lane v chains units v, v+32, v+64, … into its partial with k4_step (sub-block 2c, then 2c+1),
// and the 32 partials are summed left to right — so a row decoded in a packed step equals the
// same row decoded alone, bit for bit (device test `kernels.rs`). The integer sums come from
// the tensor cores (exact: mma_int8.cuh); which 8 values of a 32-value sub-block a thread feeds
// is a permutation of k applied to both operands, so the sums do not change.
//
// Block: MMV_WARPS warps on the same 16 rows; warp w chains the virtual lanes v ≡ w (mod
// MMV_WARPS), each unit's weights and activations fetched one unit ahead; the partials meet in
// shared memory and four warps sum them in lane order (one accumulator element each).
// Fragment of thread (g = lane / 4, q = lane % 4): rows g and g + 8; B column (token) g; values
// 8q .. 8q+7 of each sub-block (k slots 4q.. and 16+4q..); accumulator columns 2q, 2q + 1.
//
//   W: [n_out][row_bytes]   XQ: [n_tok][K] i16   XS, XSUM: [n_tok][K/32]   Y: [n_tok][ldy] f32
//   K % 256 == 0, 1 <= n_tok <= 8 (token columns past n_tok read the last token, not written).

#define MMV_WARPS 8

// One unit's global data for one thread.
struct MmvQ4KIn {
    uint4 ha, hb;  // block headers of rows g, g + 8 (d, dmin, 12 scale bytes)
    uint2 qa, qb;  // quant bytes 8q .. 8q+7 of the unit's 32, rows g, g + 8
    uint4 x0, x1;  // token g: quants 8q .. 8q+7 of sub-blocks 0, 1
    float2 s0, s1; // tokens 2q, 2q+1: the unit's two group scales
    int2 m0, m1;   // tokens 2q, 2q+1: the unit's two group quant sums
};

__device__ __forceinline__ void mmv_q4k_fetch(const u8* wa, const u8* wb, const short* xg,
                                              const float* s0, const float* s1, const int* m0,
                                              const int* m1, int u, int q, MmvQ4KIn& in) {
    const int blk = u >> 2, c = u & 3;
    const u64 bo = (u64)blk * 144;
    in.ha = __ldg((const uint4*)(wa + bo));
    in.hb = __ldg((const uint4*)(wb + bo));
    in.qa = __ldg((const uint2*)(wa + bo + 16 + 32 * c + 8 * q));
    in.qb = __ldg((const uint2*)(wb + bo + 16 + 32 * c + 8 * q));
    in.x0 = *(const uint4*)(xg + 64 * u + 8 * q);
    in.x1 = *(const uint4*)(xg + 64 * u + 32 + 8 * q);
    in.s0 = *(const float2*)(s0 + 2 * u);
    in.s1 = *(const float2*)(s1 + 2 * u);
    in.m0 = *(const int2*)(m0 + 2 * u);
    in.m1 = *(const int2*)(m1 + 2 * u);
}

// Chain unit u (sub-blocks 0 then 1) into the four accumulator elements' partials.
__device__ __forceinline__ void mmv_q4k_step(const MmvQ4KIn& in, int u, float* p) {
    const int c = u & 3;
    const u32 swa[3] = {in.ha.y, in.ha.z, in.ha.w}, swb[3] = {in.hb.y, in.hb.z, in.hb.w};
    const K4Factors fa = k4_factors(in.ha.x, swa, c), fb = k4_factors(in.hb.x, swb, c);
#pragma unroll
    for (int s = 0; s < 2; ++s) {
        const u32 a[4] = {(in.qa.x >> (4 * s)) & 0x0F0F0F0Fu, (in.qb.x >> (4 * s)) & 0x0F0F0F0Fu,
                          (in.qa.y >> (4 * s)) & 0x0F0F0F0Fu, (in.qb.y >> (4 * s)) & 0x0F0F0F0Fu};
        const uint4 x = s ? in.x1 : in.x0;
        u32 bh0, bl0, bh1, bl1;
        split_hilo(x.x, x.y, &bh0, &bl0);
        split_hilo(x.z, x.w, &bh1, &bl1);
        float fs[4];
        mma_pair([&](int* d, bool lo, const int* cc) { mma_k32(d, a, lo ? bl0 : bh0, lo ? bl1 : bh1, lo, cc); },
                 fs);
        // Token factors of columns 2q (e even) and 2q + 1 (e odd) for sub-block s.
        const float xs0 = s ? in.s0.y : in.s0.x, xs1 = s ? in.s1.y : in.s1.x;
        const float xm0 = a16_xsm(xs0, s ? in.m0.y : in.m0.x);
        const float xm1 = a16_xsm(xs1, s ? in.m1.y : in.m1.x);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const K4Factors& f = (e >> 1) ? fb : fa;
            const float ra = s ? f.a1 : f.a0, rnb = s ? f.nb1 : f.nb0;
            p[e] = k4_step(p[e], ra, rnb, (e & 1) ? xs1 : xs0, fs[e], (e & 1) ? xm1 : xm0);
        }
    }
}

extern "C" __global__ void __launch_bounds__(32 * MMV_WARPS)
    mmv_q4_k(const u8* __restrict__ W, u64 row_bytes, const short* __restrict__ XQ,
             const float* __restrict__ XS, const int* __restrict__ XSUM, int K,
             float* __restrict__ Y, int ldy, int n_out, int n_tok) {
    __shared__ __align__(16) float red[32][32][4];  // [virtual lane][thread][element]
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int row0 = blockIdx.x * 16;
    const u8* wa = W + (u64)min(row0 + g, n_out - 1) * row_bytes;
    const u8* wb = W + (u64)min(row0 + g + 8, n_out - 1) * row_bytes;
    const int kg = K / 32;
    const short* xg = XQ + (size_t)min(g, n_tok - 1) * K;
    const int t0 = min(2 * q, n_tok - 1), t1 = min(2 * q + 1, n_tok - 1);
    const float *s0 = XS + (size_t)t0 * kg, *s1 = XS + (size_t)t1 * kg;
    const int *m0 = XSUM + (size_t)t0 * kg, *m1 = XSUM + (size_t)t1 * kg;
    const int n_units = K / 64;
    // This warp's units in order: v = warp, warp + MMV_WARPS, …; for each, u = v, v + 32, …
    // (v = u % 32). Virtual lanes without units (K < 2048) have partial 0.
    for (int v = warp; v < 32; v += MMV_WARPS)
        if (v >= n_units) *(float4*)red[v][lane] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (warp < n_units) {
        auto next = [&](int u) {
            const int v = u & 31;
            return u + 32 < n_units ? u + 32 : (v + MMV_WARPS < min(32, n_units) ? v + MMV_WARPS : -1);
        };
        float p[4] = {0.f, 0.f, 0.f, 0.f};
        // Chain unit u; after a virtual lane's last unit its partial goes to shared memory.
        auto consume = [&](const MmvQ4KIn& in, int u) {
            mmv_q4k_step(in, u, p);
            if (u + 32 >= n_units) {
                *(float4*)red[u & 31][lane] = make_float4(p[0], p[1], p[2], p[3]);
#pragma unroll
                for (int e = 0; e < 4; ++e) p[e] = 0.f;
            }
        };
        // Two buffers in turn: the next unit's loads in flight during this unit's MMAs (after
        // the last unit, this one's again: a cache hit, so the loads stay unconditional).
        MmvQ4KIn a, b;
        int u = warp;
        mmv_q4k_fetch(wa, wb, xg, s0, s1, m0, m1, u, q, a);
        for (;;) {
            int un = next(u);
            mmv_q4k_fetch(wa, wb, xg, s0, s1, m0, m1, un >= 0 ? un : u, q, b);
            consume(a, u);
            if (un < 0) break;
            u = un;
            un = next(u);
            mmv_q4k_fetch(wa, wb, xg, s0, s1, m0, m1, un >= 0 ? un : u, q, a);
            consume(b, u);
            if (un < 0) break;
            u = un;
        }
    }
    __syncthreads();
    if (warp < 4) {
        const int e = warp;
        float total = red[0][lane][e];
        for (int j = 1; j < 32; ++j) total = __fadd_rn(total, red[j][lane][e]);
        const int row = row0 + g + 8 * (e >> 1), t = 2 * q + (e & 1);
        if (row < n_out && t < n_tok) Y[(size_t)t * ldy + row] = total;
    }
}
