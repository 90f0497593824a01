// mma_int8.cuh — exact int8 tensor-core products of A16 activations, shared by the tensor-core
// matmuls (mmq_a16.cu: prefill chunks) and the narrow ones (mmv_a16.cu: packed decode rows).
// Needs common.cuh. An A16 quant x (int16) is 256·hi + lo with hi = x >> 8 (signed byte) and
// lo = x & 255 (unsigned byte); s8 × s8 (hi) and s8 × u8 (lo) MMAs give exact int32 sums S_hi,
// S_lo, and 256·S_hi + S_lo is the dp2a kernels' integer sum s (|s| < 2^24), converted to
// float exactly (MMQ_CVT): the float the matvec kernels get from (float)s.

#define MMQ_MAGIC 0x4B400000  // 1.5 * 2^23 as float bits
#define MMQ_MAGIC_F 12582912.0f

// One int8 MMA with accumulator input c: s8 weights × s8 (hi bytes) or × u8 (lo bytes, `lo`).
__device__ __forceinline__ void mma_k32(int* d, const u32* a, u32 b0, u32 b1, bool lo, const int* c) {
    if (lo)
        asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%10,%11,%12,%13};"
            : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(c[0]), "r"(c[1]),
              "r"(c[2]), "r"(c[3]));
    else
        asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%10,%11,%12,%13};"
            : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(c[0]), "r"(c[1]),
              "r"(c[2]), "r"(c[3]));
}
__device__ __forceinline__ void mma_k16(int* d, u32 a0, u32 a1, u32 b, bool lo, const int* c) {
    if (lo)
        asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.u8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
            "{%7,%8,%9,%10};"
            : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
            : "r"(a0), "r"(a1), "r"(b), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
            "{%7,%8,%9,%10};"
            : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
            : "r"(a0), "r"(a1), "r"(b), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}
// How a tile's integer sums become floats (the A/B `MUSER_CUDA_MMQ_CVT`, -DMMQ_CVT): 1 (default)
// the hi MMA starts from 0, its sums shifted left by 8 are the lo MMA's accumulator input, so
// the lo MMA returns s itself, converted by one I2FP (sm_90's full-rate conversion) — one shift
// + one conversion; 0: both MMAs start from the bit pattern of 1.5·2^23 (|S| < 2^22), so each
// sum reads off as a float with one subtraction, and (float)(256·S_hi + S_lo) = fma(256, hi, lo)
// (three FP32 operations). Both are exact: the same floats. Measured (mmq_bench, 512 tokens):
// FFN up 1562 -> 1514 us, Q6_K FFN down 3118 -> 2860 us.
#ifndef MMQ_CVT
#define MMQ_CVT 1
#endif
// The hi and lo MMAs of one sub-block (k32) or group (k16) of one 16 × 8 tile; `mma(d, lo, c)`
// runs the hi (lo = false) or lo MMA with accumulator input c. MMQ_CVT 1: dl holds the sums s
// (dh is spent); 0: dh, dl hold the magic-biased S_hi, S_lo.
template <class Mma>
__device__ __forceinline__ void mma_hilo(Mma mma, int* dh, int* dl) {
#if MMQ_CVT
    const int zero[4] = {0, 0, 0, 0};
    mma(dh, false, zero);
    const int c[4] = {(int)((u32)dh[0] << 8), (int)((u32)dh[1] << 8), (int)((u32)dh[2] << 8),
                      (int)((u32)dh[3] << 8)};
    mma(dl, true, c);
#else
    const int bias[4] = {MMQ_MAGIC, MMQ_MAGIC, MMQ_MAGIC, MMQ_MAGIC};
    mma(dh, false, bias);
    mma(dl, true, bias);
#endif
}
// Accumulator element e of mma_hilo's result as the exact float of its integer sum.
__device__ __forceinline__ float mma_hilo_float(const int* dh, const int* dl, int e) {
#if MMQ_CVT
    return __int2float_rn(dl[e]);
#else
    return __fmaf_rn(256.0f, __fsub_rn(__int_as_float(dh[e]), MMQ_MAGIC_F),
                     __fsub_rn(__int_as_float(dl[e]), MMQ_MAGIC_F));
#endif
}
// One sub-block (k32) or group (k16) of one 16 × 8 tile: out[e] = (float)(sum of weights × x).
template <class Mma>
__device__ __forceinline__ void mma_pair(Mma mma, float* out) {
    int dh[4], dl[4];
    mma_hilo(mma, dh, dl);
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = mma_hilo_float(dh, dl, e);
}
// mma_pair's two elements of one row half (rows g: e = 0, 1; rows g + 8: e = 2, 3, `upper`).
template <class Mma>
__device__ __forceinline__ void mma_pair_half(Mma mma, bool upper, float* out) {
    int dh[4], dl[4];
    mma_hilo(mma, dh, dl);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#if MMQ_CVT
        out[j] = __int2float_rn(upper ? dl[2 + j] : dl[j]);
#else
        const int h[1] = {upper ? dh[2 + j] : dh[j]}, l[1] = {upper ? dl[2 + j] : dl[j]};
        out[j] = mma_hilo_float(h, l, 0);
#endif
    }
}
// Four consecutive int16 quants (two words) -> their hi bytes and lo bytes.
__device__ __forceinline__ void split_hilo(u32 w0, u32 w1, u32* hi, u32* lo) {
    *hi = __byte_perm(w0, w1, 0x7531);
    *lo = __byte_perm(w0, w1, 0x6420);
}
