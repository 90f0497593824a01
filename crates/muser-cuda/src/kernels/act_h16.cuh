// act_h16.cuh — the f16 route's activation format, one definition for every kernel that writes
// it: `act_h16` (matvec_h16.cu) and the fused `residual_norm_h16` (norm.cu), so the fused and
// the separate step give the same bits. Host mirror: muser_cuda::h16::act_reference.
//
// A token row of K values (K % 64 == 0) becomes XH [K] f16 in fragment order, XSUM [K/32] and
// XSUM16 [K/16] f16 sums, XINV f32: the row times 2^sh, sh = 9 − ⌊log2 amax⌋ (capped at 127;
// 0 for an all-zero or non-finite amax), so its largest magnitude lands in [512, 1024) and a
// 32-value sum stays below f16's 65504; XINV = 2^−sh. Within each 64-value chunk, position
// 16·t4 + 4·i + e2 holds value 16i + 2·t4 + (e2 & 1) + 8·(e2 >> 1) (an m16n8k16 B fragment's
// order: lane (g, t4) reads its chunk's four tiles as 32 contiguous bytes). The sums are f16 of
// the f32 sum, left to right, of the sub-block's f16 values; the 32-value sum continues the
// first 16-value sum.

// The power of two for a row's largest magnitude.
__device__ __forceinline__ int h16_shift(float amax) {
    return (amax > 0.f && amax <= 3.40282347e38f) ? min(9 - ilogbf(amax), 127) : 0;
}

// Block-wide max of non-negative floats (fmaxf: exact, any order gives the same value); `red`
// holds >= 32 floats of shared memory; every thread gets the result.
__device__ __forceinline__ float h16_block_max(float v, float* red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();  // red may still be read by a previous reduction
    if (lane == 0) red[warp] = v;
    __syncthreads();
    return warp_max(lane < nw ? red[lane] : 0.f);
}

// Unit u of a row (its 32 values `v`, 32u .. 32u + 31) times `scale` = 2^sh into the row's XH `xh`, XSUM `xsum` and XSUM16 `xsum16`. One thread per unit.
__device__ __forceinline__ void h16_unit_vals(const float (&v)[32], int u, float scale, u16* xh,
                                              u16* xsum, u16* xsum16) {
    u16 h[32];
#pragma unroll
    for (int j = 0; j < 32; ++j) h[j] = f2h(__fmul_rn(v[j], scale));
    float s0 = 0.f, s1 = 0.f;  // the two 16-value sums, interleaved chains
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        s0 = __fadd_rn(s0, h2f(h[j]));
        s1 = __fadd_rn(s1, h2f(h[16 + j]));
    }
    float s = s0;  // the 32-value sum continues the first 16-value one
#pragma unroll
    for (int j = 16; j < 32; ++j) s = __fadd_rn(s, h2f(h[j]));
    xsum16[2 * u] = f2h(s0);
    xsum16[2 * u + 1] = f2h(s1);
    xsum[u] = f2h(s);
    // Value kl = 32·(u & 1) + 16·ii + r of the chunk (i = 2·(u & 1) + ii, r = 2·t4 + (e2 & 1) +
    // 8·(e2 >> 1)): the four values of one (i, t4) fill positions 16·t4 + 4·i + 0..3.
    u16* chunk = xh + 64 * (u >> 1);
#pragma unroll
    for (int ii = 0; ii < 2; ++ii)
#pragma unroll
        for (int t4 = 0; t4 < 4; ++t4) {
            const int b = 16 * ii + 2 * t4, i = 2 * (u & 1) + ii;
            uint2 w;
            w.x = (u32)h[b] | ((u32)h[b + 1] << 16);
            w.y = (u32)h[b + 8] | ((u32)h[b + 9] << 16);
            *(uint2*)(chunk + 16 * t4 + 4 * i) = w;
        }
}

// The same for unit u of a row `x` in memory (16-byte aligned).
__device__ __forceinline__ void h16_unit(const float* x, int u, float scale, u16* xh, u16* xsum,
                                         u16* xsum16) {
    float v[32];
#pragma unroll
    for (int q = 0; q < 8; ++q) {
        const float4 f = ((const float4*)(x + 32 * u))[q];
        v[4 * q] = f.x, v[4 * q + 1] = f.y, v[4 * q + 2] = f.z, v[4 * q + 3] = f.w;
    }
    h16_unit_vals(v, u, scale, xh, xsum, xsum16);
}
