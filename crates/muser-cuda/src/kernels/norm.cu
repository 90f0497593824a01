// norm.cu — RMSNorm family. One block per token row; sums of squares in f64 (like the CPU
// route), combined in a fixed order (block_sum_f64), so a row's result never depends on
// anything but the row.
//
// rmsnorm_rows:       Y[t] = X[t] * s(X[t]) (* W)                   (W may be null)
// embed_finish:       X[t] = rmsnorm(X[t]) if do_norm, then * scale (embedding post-processing)
// residual_norm:      X[t] += (O[t] * s(O[t], eps_post)) * W_post;  H[t] = X[t] * s(X[t], eps) * W_next
// All buffers [n_tok][n] f32, rows contiguous.

#define NORM_THREADS 1024

// Rows are read in runs of 8 consecutive values (two float4): thread t owns runs t, t + T, ...
// (T = blockDim.x), adds its squares in element order, then the fixed block reduction. Needs
// n % 8 == 0 and 16-byte aligned rows (checked on the host).
__device__ __forceinline__ void ld8(const float* p, float* v) {
    const float4 a = ((const float4*)p)[0], b = ((const float4*)p)[1];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}
__device__ __forceinline__ void st8(float* p, const float* v) {
    ((float4*)p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    ((float4*)p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
__device__ __forceinline__ double sumsq8(const float* v, double s) {
#pragma unroll
    for (int j = 0; j < 8; ++j) s += (double)v[j] * (double)v[j];
    return s;
}
__device__ __forceinline__ float rms_of(double sumsq, int n, float eps) {
    return (float)(1.0 / sqrt(sumsq / (double)n + (double)eps));
}

// NORM_RED1 (`MUSER_CUDA_NORM_RED1=0|1`, default 0 until measured): a block reduction's last
// step — the butterfly over the warp totals, then rms_of / the max — run by warp 0 alone and
// broadcast through shared memory, instead of by each of the block's 32 warps. The same tree and
// the same operations, once: the same bits. Why: the last step is a shuffle butterfly (two
// SHFL per f64 level) and the f64 division, square root and reciprocal; 32 warps repeating it
// compete for the SM's one shuffle per clock and its f64 pipe, and session 30's stall samples of
// residual_norm_h16 were 20% SHFL.
#ifndef NORM_RED1
#define NORM_RED1 0
#endif

// The rms scale of a row from each thread's f64 sum of squares `v` (block_sum_f64's tree, then
// rms_of); `red` >= 32 doubles of shared memory; every thread gets the result.
__device__ __forceinline__ float block_rms(double v, int n, float eps, double* red) {
#if NORM_RED1
    __shared__ float bc;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum_f64(v);
    // No barrier before the write: a previous block_rms read `red` in warp 0 only, before its
    // broadcast barrier, and wrote `bc` before it; every warp read `bc` before reaching this
    // call's barrier below, after which warp 0 alone writes `bc` again.
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const float r = rms_of(warp_sum_f64(lane < nw ? red[lane] : 0.0), n, eps);
        if (lane == 0) bc = r;
    }
    __syncthreads();
    return bc;
#else
    return rms_of(block_sum_f64(v, red), n, eps);
#endif
}

// h16_block_max (act_h16.cuh) for the fused norm, with NORM_RED1 its last step in warp 0 alone
// (max is exact in any order: the same value). `redf` >= 32 floats, used by nothing else.
__device__ __forceinline__ float norm_block_max(float v, float* redf) {
#if NORM_RED1
    __shared__ float bcf;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    if (lane == 0) redf[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const float r = warp_max(lane < nw ? redf[lane] : 0.f);
        if (lane == 0) bcf = r;
    }
    __syncthreads();
    return bcf;
#else
    return h16_block_max(v, redf);
#endif
}

__device__ __forceinline__ float rms_scale(const float* x, int n, float eps, double* red) {
    double s = 0.0;
    for (int r = threadIdx.x; r < n / 8; r += blockDim.x) {
        float v[8];
        ld8(x + 8 * r, v);
        s = sumsq8(v, s);
    }
    return block_rms(s, n, eps, red);
}

extern "C" __global__ void __launch_bounds__(NORM_THREADS)
    rmsnorm_rows(const float* X, const float* W, float* Y, int n, float eps, const StepParams* sp) {
    __shared__ double red[32];
    PDL_ENTRY()
    const int t = blockIdx.x;
    if ((u32)t >= sp->n_tok) return;
    const float* x = X + (size_t)t * n;
    float* y = Y + (size_t)t * n;
    const float s = rms_scale(x, n, eps, red);
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = W ? (x[i] * s) * W[i] : x[i] * s;
}

extern "C" __global__ void __launch_bounds__(NORM_THREADS)
    embed_finish(float* X, int n, int do_norm, float eps, float scale, const StepParams* sp) {
    __shared__ double red[32];
    PDL_ENTRY()
    const int t = blockIdx.x;
    if ((u32)t >= sp->n_tok) return;
    float* x = X + (size_t)t * n;
    const float s = do_norm ? rms_scale(x, n, eps, red) : 1.0f;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float v = do_norm ? x[i] * s : x[i];
        if (scale != 1.0f) v *= scale;
        x[i] = v;
    }
}

extern "C" __global__ void __launch_bounds__(NORM_THREADS)
    residual_norm(const float* O, const float* Wpost, float eps_post, float* X, const float* Wnext,
                  float eps, float* H, int n, const StepParams* sp) {
    __shared__ double red[32];
    PDL_ENTRY()
    const int t = blockIdx.x;
    if ((u32)t >= sp->n_tok) return;
    const float* o = O + (size_t)t * n;
    float* x = X + (size_t)t * n;
    const float so = rms_scale(o, n, eps_post, red);
    double s2 = 0.0;
    for (int r = threadIdx.x; r < n / 8; r += blockDim.x) {
        float ov[8], xv[8], wv[8];
        ld8(o + 8 * r, ov);
        ld8(x + 8 * r, xv);
        ld8(Wpost + 8 * r, wv);
#pragma unroll
        for (int j = 0; j < 8; ++j) xv[j] += (ov[j] * so) * wv[j];
        st8(x + 8 * r, xv);
        s2 = sumsq8(xv, s2);
    }
    if (Wnext) {
        const float sx = block_rms(s2, n, eps, red);
        float* h = H + (size_t)t * n;
        for (int r = threadIdx.x; r < n / 8; r += blockDim.x) {
            float xv[8], wv[8];
            ld8(x + 8 * r, xv);  // this thread's own run, written above
            ld8(Wnext + 8 * r, wv);
#pragma unroll
            for (int j = 0; j < 8; ++j) xv[j] = (xv[j] * sx) * wv[j];
            st8(h + 8 * r, xv);
        }
    }
}

// NORM_AMAX_BOUND (`MUSER_CUDA_NORM_BOUND=0|1`, default 0 until measured; the
// cluster twins residual_norm_h16_cl8 / _cl16 only): the f16 shift of H's row from the second
// reduction instead of a third. The shift needs only the exponent of amax = max_i |h_i|, h_i =
// fl(fl(x_i·sx)·wn_i), and that reduction can carry m = max_i |fl(x_i·wn_i)| and w = max_i |wn_i|
// (maxima: exact in any order). Why it decides (u = 2^-24, round to nearest, no FTZ):
// - fl is monotone, so m = fl(B), B = max_i |x_i·wn_i| exact; for m >= 2^-125, B lies within
//   m·(1 ± u), and A = sx·B (the exact max of |x_i·sx·wn_i|) within P·(1 ± 2u), P = sx·m (exact
//   in f64: 24 × 24 bits);
// - an i whose t_i = fl(|x_i|·sx) is normal has |h_i| within |x_i·sx·wn_i|·(1 ± u)^2 while h_i
//   is normal; one whose t_i < 2^-126 has |h_i| <= 2^-126·w·(1 + u); t_i never overflows, as
//   sx = 1/rms(x) gives |x_i|·sx <= sqrt(n)·(1 + 2^-20);
// - so when lo = P·(1 − 2^-20) > max(2^-100, 2^-125·w) and hi = P·(1 + 2^-20) < 2^127, the i
//   of A has a normal t_i and amax lies in [lo, hi] (3u + O(u^2) < 2^-20); if lo and hi share
//   their exponent e, amax has it too: h16_shift(amax) = min(9 − e, 127). (The 2^-100 floor
//   keeps H normal for the argument; below 2^-117 the cap at 127 would decide alike.)
// Otherwise (zero, non-finite or tiny rows, a boundary within 2^-20 of P) H16_SHIFT_UNKNOWN and
// the third reduction runs as before. Every block reduces the same slots in the same tree, so
// the decision is uniform over the cluster (its barriers pair up) and the shift is the exact
// form's: the same bits. Host mirror and its exhaustive edge tests: muser_cuda::norm_bound.
#ifndef NORM_AMAX_BOUND
#define NORM_AMAX_BOUND 0
#endif
#define H16_SHIFT_UNKNOWN 1000
__device__ __forceinline__ int h16_shift_bound(float sx, float m, float w) {
    if (!(sx > 0.f && sx <= 3.40282347e38f) || !(m >= 0x1p-125f && m <= 3.40282347e38f) ||
        !(w <= 3.40282347e38f))
        return H16_SHIFT_UNKNOWN;
    const double p = (double)sx * (double)m;
    const double lo = p * (1.0 - 0x1p-20), hi = p * (1.0 + 0x1p-20);
    if (!(lo > 0x1p-100) || !(lo > 0x1p-125 * (double)w) || !(hi < 0x1p127))
        return H16_SHIFT_UNKNOWN;
    const int e = ilogb(lo);
    return ilogb(hi) == e ? min(9 - e, 127) : H16_SHIFT_UNKNOWN;
}

// The fused kernels' shared front: run r's 8 values of H[t] into `hv` (zeros past the row),
// X[t] updated in place; returns whether the run is in the row. `rms(sumsq, eps, k)` is the
// block's (or cluster's) rms scale of reduction k (0: O's, 1: X's); every thread of the block
// calls it (block reductions).
//
// With BOUND (NORM_AMAX_BOUND's cluster twin, below), the second reduction also carries the
// thread's m = max |fl(x·wn)| and w = max |wn| (rms(s, eps, 1, m, w) reduces them in place) and
// `*shb` gets h16_shift_bound's answer for H's row.
template <bool BOUND = false, class Rms>
__device__ __forceinline__ bool residual_norm_front(const float* O, const float* Wpost,
                                                    float eps_post, float* X, const float* Wnext,
                                                    float eps, int n, int t, int r, Rms rms,
                                                    float (&hv)[8], int* shb = nullptr) {
    const bool mine = r < n / 8;  // whole groups of 4 lanes in or out (n % 32 == 0)
    const float* o = O + (size_t)t * n + 8 * r;
    float* x = X + (size_t)t * n + 8 * r;
    float ov[8], xv[8], wv[8], wn[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) ov[j] = xv[j] = wv[j] = wn[j] = 0.f;
    // The norm vectors are weights (no kernel writes them): requested before the wait (PDL,
    // common.cuh), so their DRAM latency overlaps the previous kernel's tail.
    if (mine) {
        ld8(Wpost + 8 * r, wv);
        ld8(Wnext + 8 * r, wn);
    }
    pdl_wait();
    pdl_trigger();
    if (mine) {
        ld8(o, ov);
        ld8(x, xv);
    }
    const float so = rms(sumsq8(ov, 0.0), eps_post, 0);
#pragma unroll
    for (int j = 0; j < 8; ++j) xv[j] += (ov[j] * so) * wv[j];
    if (mine) st8(x, xv);
    float sx;
    if constexpr (BOUND) {
        float m = 0.f, w = 0.f;  // lanes past the row hold zeros
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            m = fmaxf(m, fabsf(xv[j] * wn[j]));
            w = fmaxf(w, fabsf(wn[j]));
        }
        sx = rms(sumsq8(xv, 0.0), eps, 1, m, w);
        *shb = h16_shift_bound(sx, m, w);
    } else {
        sx = rms(sumsq8(xv, 0.0), eps, 1);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) hv[j] = (xv[j] * sx) * wn[j];
    return mine;
}

// residual_norm_front for one block per token: thread r = threadIdx.x (launch with blockDim.x a
// multiple of 32, every warp whole — NORM_THREADS), block_rms over `red`.
__device__ __forceinline__ bool residual_norm_run(const float* O, const float* Wpost,
                                                  float eps_post, float* X, const float* Wnext,
                                                  float eps, int n, int t, double* red,
                                                  float (&hv)[8]) {
    return residual_norm_front(O, Wpost, eps_post, X, Wnext, eps, n, t, (int)threadIdx.x,
                               [&](double s, float e, int) { return block_rms(s, n, e, red); },
                               hv);
}

// residual_norm fused with the quantization of H (the default; MUSER_CUDA_FUSE=0 for A/B; A16:
// residual_norm_q, A8: residual_norm_q8): the same arithmetic as residual_norm followed by
// quant_a16 / quant_a8 — bit-identical outputs — with
// the thread's run held in registers and one launch instead of two. A group of 32 is the runs
// of four consecutive lanes: max and quant sum over 8 values, then two shuffle rounds.
// Needs n <= 8 * NORM_THREADS, n % 32 == 0 (checked on the host) and a non-null Wnext (the
// last layer uses residual_norm: its h is quantized by the output projection); block =
// NORM_THREADS.
template <class XE>
__device__ __forceinline__ void residual_norm_q_body(const float* O, const float* Wpost,
                                                     float eps_post, float* X, const float* Wnext,
                                                     float eps, float* H, int n, XE* XQ, float* XS,
                                                     int* XSUM, const StepParams* sp) {
    constexpr bool A8 = sizeof(XE) == 1;
    __shared__ double red[32];
    const int t = blockIdx.x;
    if ((u32)t >= sp->n_tok) return;
    const int r = threadIdx.x;
    float hv[8];
    const bool mine = residual_norm_run(O, Wpost, eps_post, X, Wnext, eps, n, t, red, hv);
    // Every lane takes part in the shuffles (a lane past the row holds zeros, in a group of
    // its own); only lanes of the row store.
    float amax = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(hv[j]));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    int q[8], qs = 0;
    float d = 0.f;
    if (A8 ? (amax > 0.f && amax <= 3.40282347e38f) : amax > 0.f) {
        // A16: a16_group's arithmetic; A8: a8_group's (common.cuh).
        if (A8) {
            const float id = __fdiv_rn(127.0f, amax);
#pragma unroll
            for (int j = 0; j < 8; ++j)
                q[j] = hv[j] == hv[j] ? (int)fminf(fmaxf(rintf(__fmul_rn(hv[j], id)), -127.f), 127.f)
                                      : 0;
            d = __fdiv_rn(amax, 127.0f);
        } else {
            const float id = 32767.0f / amax;
#pragma unroll
            for (int j = 0; j < 8; ++j)
                q[j] = (int)fminf(fmaxf(rintf(hv[j] * id), -32767.f), 32767.f);
            d = amax / 32767.0f;
        }
    } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) q[j] = 0;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) qs += q[j];
    qs += __shfl_xor_sync(0xffffffffu, qs, 1);
    qs += __shfl_xor_sync(0xffffffffu, qs, 2);
    if (!mine) return;
    st8(H + (size_t)t * n + 8 * r, hv);
    if (A8) {
        uint2 pk;
        pk.x = (u32)(u8)q[0] | ((u32)(u8)q[1] << 8) | ((u32)(u8)q[2] << 16) | ((u32)(u8)q[3] << 24);
        pk.y = (u32)(u8)q[4] | ((u32)(u8)q[5] << 8) | ((u32)(u8)q[6] << 16) | ((u32)(u8)q[7] << 24);
        *(uint2*)(XQ + (size_t)t * n + 8 * r) = pk;
    } else {
        uint4 pk;
        pk.x = (u32)(u16)q[0] | ((u32)(u16)q[1] << 16);
        pk.y = (u32)(u16)q[2] | ((u32)(u16)q[3] << 16);
        pk.z = (u32)(u16)q[4] | ((u32)(u16)q[5] << 16);
        pk.w = (u32)(u16)q[6] | ((u32)(u16)q[7] << 16);
        *(uint4*)(XQ + (size_t)t * n + 8 * r) = pk;
    }
    if ((r & 3) == 0) {
        XS[(size_t)t * (n / 32) + r / 4] = d;
        XSUM[(size_t)t * (n / 32) + r / 4] = qs;
    }
}

extern "C" __global__ void __launch_bounds__(NORM_THREADS)
    residual_norm_q(const float* O, const float* Wpost, float eps_post, float* X,
                    const float* Wnext, float eps, float* H, int n, short* XQ, float* XS,
                    int* XSUM, const StepParams* sp) {
    residual_norm_q_body(O, Wpost, eps_post, X, Wnext, eps, H, n, XQ, XS, XSUM, sp);
}
// The same with the A8 quantization (`MUSER_CUDA_ACTS=a8`).
extern "C" __global__ void __launch_bounds__(NORM_THREADS)
    residual_norm_q8(const float* O, const float* Wpost, float eps_post, float* X,
                     const float* Wnext, float eps, float* H, int n, signed char* XQ, float* XS,
                     int* XSUM, const StepParams* sp) {
    residual_norm_q_body(O, Wpost, eps_post, X, Wnext, eps, H, n, XQ, XS, XSUM, sp);
}

// NORM_H16 (`MUSER_CUDA_NORM_H16`) — how residual_norm_h16 shapes the same arithmetic:
//   0 `shfl` (default body): a thread per run of 8 (NORM_THREADS threads), each 32-value unit
//     gathered onto its first lane by 24 shuffles;
//   1 `smem`: the same threads, the units gathered through shared memory;
//   2 `unit`: a thread per 32-value unit (n / 32 threads rounded up to whole warps — the host
//     launches it so, `muser_cuda::step_switches::NormH16::block`), no gather, 7 warps at each
//     barrier instead of 32.
// Beside it, always compiled, residual_norm_h16_cl8: `shfl`'s 1024 threads as a thread-block
// cluster of 8 blocks of 128 per token (grid (8, n_tok), cluster (8, 1, 1): the host's
// `launch_cluster`) — block c runs `shfl`'s threads 128c .. 128c + 127, so its 4 warps are
// `shfl`'s warps 4c .. 4c + 3 with the same runs; a block reduction's warp totals go to slot
// 4c + w of every block's scratch through distributed shared memory, one cluster barrier, then
// each block runs `shfl`'s second butterfly over the same 32 slots. Why: one SM moves the whole
// row (~130 KB in and out at 6656 values) and runs 32 warps' shuffles; eight share it. The host
// launches it for launches of few tokens (`MUSER_CUDA_NORM_H16=auto`, the default: decode) or
// for all (`cl8`).
// All give the same bits (norm_unit_sum below replays the f64 tree of block_sum_f64; the
// cluster form fills block_sum_f64's 32 slots with the same warp totals).
// Session 31 (H200, tg128 full forge): `smem` level with `shfl`, `unit` 4.3% slower (its four
// runs' loads per thread take longer than one run in each of 1024 threads). Session 36: `cl8`
// tg128 +2.0 / +2.1 / +2.8 / +2.7% at depth 0 / 2048 / 8192 / 32768, pp512 −0.9 / −0.9 / −0.1 /
// +0.1% — hence decode only by default.
#ifndef NORM_H16
#define NORM_H16 0
#endif
// Its launch bound: with a thread per unit at most 8 * NORM_THREADS / 32 = 256 threads, so the
// unit's 4 × 32 values stay in registers (the 1024-thread bound caps them at 64 and spills).
#if NORM_H16 == 2
#define NORM_H16_THREADS (NORM_THREADS / 4)
#else
#define NORM_H16_THREADS NORM_THREADS
#endif

// NORM_H16 == 2: the block's f64 sum of the runs' sums s[j] (thread u holds runs 4u + j) in
// exactly block_sum_f64's tree over a thread per run: run r = 4u + j sits on that form's lane
// (r & 31) = 4(u & 7) + j of warp u >> 3, so its butterfly's levels 16, 8, 4 are this block's
// lane distances 4, 2, 1 (per j) and its levels 2, 1 the adds within the thread; the totals
// of the groups of 8 threads are that form's warp totals, summed by the same second butterfly
// (zeros past the last group, as past the last warp there). Needs n <= 8 * NORM_THREADS.
__device__ __forceinline__ double norm_unit_sum(const double (&s)[4], double* red) {
    const int lane = threadIdx.x & 31, ng = (int)(blockDim.x >> 3);
    double a[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) a[j] = s[j];
#pragma unroll
    for (int o = 4; o > 0; o >>= 1)
#pragma unroll
        for (int j = 0; j < 4; ++j) a[j] += __shfl_xor_sync(0xffffffffu, a[j], o);
    const double tw = (a[0] + a[2]) + (a[1] + a[3]);
    __syncthreads();  // red may still be read by a previous reduction
    if ((lane & 7) == 0) red[threadIdx.x >> 3] = tw;
    __syncthreads();
    return warp_sum_f64(lane < ng ? red[lane] : 0.0);
}

// Unit m = the runs r = 4m .. 4m + 3 of four consecutive lanes: lane 4m gathers its 32 values
// by shuffles (every lane takes part; lanes past the row hold zeros and store nothing) and
// writes the unit's f16 values and sums (h16_unit_vals) at scale 2^sh.
__device__ __forceinline__ void h16_units_of_runs(const float (&hv)[8], u32 r, bool mine, int sh,
                                                  u16* xh, u16* xsum, u16* xsum16) {
    float v[32];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        v[j] = hv[j];
#pragma unroll
        for (int l = 1; l < 4; ++l) v[8 * l + j] = __shfl_down_sync(0xffffffffu, hv[j], l);
    }
    if (mine && (r & 3) == 0) h16_unit_vals(v, (int)(r >> 2), ldexpf(1.f, sh), xh, xsum, xsum16);
}

// A block reduction over the cluster's 32 warps (32 / CL per block, CL blocks) by the warp
// reduction `wr`: warp w of block c puts its warp's result in slot (32 / CL)·c + w of every
// block's `red` (lane j writes block j's), one cluster barrier, then every warp reduces the 32
// slots — block_sum_f64's tree with warp_sum_f64 (cl_sum_f64), h16_block_max's with warp_max
// (cl_max; max is exact in any order). `red` is this reduction's own array (no block writes it
// again), so no barrier is needed before the writes.
template <int CL, class T, class WR>
__device__ __forceinline__ T cl_reduce(T v, T* red, u32 rank, WR wr) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = wr(v);
    if (lane < CL) cl_st(cl_map(red + (32 / CL) * rank + w, (u32)lane), v);
    cl_arrive();
    cl_wait();
    return wr(red[lane]);
}
template <int CL>
__device__ __forceinline__ double cl_sum_f64(double v, double* red, u32 rank) {
    return cl_reduce<CL>(v, red, rank, [](double x) { return warp_sum_f64(x); });
}
template <int CL>
__device__ __forceinline__ float cl_max(float v, float* red, u32 rank) {
    return cl_reduce<CL>(v, red, rank, [](float x) { return warp_max(x); });
}
// cl_sum_f64 of `v` with the maxima of `m` and `w` (each in place) in the same exchange: three
// slots per warp, one cluster barrier (NORM_AMAX_BOUND). The sum's tree is cl_sum_f64's.
template <int CL>
__device__ __forceinline__ double cl_sum_max2(double v, float& m, float& w, double* red,
                                              float* redm, float* redw, u32 rank) {
    const int lane = threadIdx.x & 31, wi = threadIdx.x >> 5;
    v = warp_sum_f64(v);
    m = warp_max(m);
    w = warp_max(w);
    if (lane < CL) {
        const u32 slot = (32 / CL) * rank + wi;
        cl_st(cl_map(red + slot, (u32)lane), v);
        cl_st(cl_map(redm + slot, (u32)lane), m);
        cl_st(cl_map(redw + slot, (u32)lane), w);
    }
    cl_arrive();
    cl_wait();
    m = warp_max(redm[lane]);
    w = warp_max(redw[lane]);
    return warp_sum_f64(red[lane]);
}

// The cluster twins' rms scales under NORM_AMAX_BOUND: the first reduction cl_sum_f64's (after
// the wait that pairs with the kernel's first arrive), the second cl_sum_max2's.
template <int CL>
struct ClRmsBound {
    double *red1, *red2;
    float *redm2, *redw;
    u32 rank;
    int n;
    __device__ __forceinline__ float operator()(double s, float e, int) const {
        cl_wait();
        return rms_of(cl_sum_f64<CL>(s, red1, rank), n, e);
    }
    __device__ __forceinline__ float operator()(double s, float e, int, float& m,
                                                float& w) const {
        return rms_of(cl_sum_max2<CL>(s, m, w, red2, redm2, redw, rank), n, e);
    }
};

// residual_norm fused with the f16 route's activation step (`MUSER_CUDA_ACTS=f16`): H as
// residual_norm writes it, then act_h16's outputs for it (act_h16.cuh's unit on the registers
// of four lanes) — the same bits as residual_norm followed by act_h16. Needs n % 64 == 0,
// n <= 8 * NORM_THREADS and a non-null Wnext (checked on the host); block = NORM_THREADS, or
// with NORM_H16 == 2 n / 32 rounded up to a multiple of 32.
extern "C" __global__ void __launch_bounds__(NORM_H16_THREADS)
    residual_norm_h16(const float* O, const float* Wpost, float eps_post, float* X,
                      const float* Wnext, float eps, float* H, int n, u16* XH, u16* XSUM,
                      u16* XSUM16, float* XINV, const StepParams* sp) {
#if NORM_H16 == 2
    __shared__ double red[32];
    __shared__ float redf[32];
    const int t = blockIdx.x;
    if ((u32)t >= sp->n_tok) return;
    const int u = threadIdx.x;
    const bool mine = u < n / 32;
    const float* o = O + (size_t)t * n + 32 * u;
    float* x = X + (size_t)t * n + 32 * u;
    float ov[32], xv[32], wv[32], wn[32];  // the unit's 32 values, runs j = 0..3 at 8j
#pragma unroll
    for (int i = 0; i < 32; ++i) ov[i] = xv[i] = wv[i] = wn[i] = 0.f;
    // Weights before the PDL wait, as residual_norm_run.
    if (mine) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            ld8(Wpost + 32 * u + 8 * j, wv + 8 * j);
            ld8(Wnext + 32 * u + 8 * j, wn + 8 * j);
        }
    }
    pdl_wait();
    pdl_trigger();
    if (mine) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            ld8(o + 8 * j, ov + 8 * j);
            ld8(x + 8 * j, xv + 8 * j);
        }
    }
    double s[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) s[j] = sumsq8(ov + 8 * j, 0.0);
    const float so = rms_of(norm_unit_sum(s, red), n, eps_post);
#pragma unroll
    for (int i = 0; i < 32; ++i) xv[i] += (ov[i] * so) * wv[i];
    if (mine) {
#pragma unroll
        for (int j = 0; j < 4; ++j) st8(x + 8 * j, xv + 8 * j);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) s[j] = sumsq8(xv + 8 * j, 0.0);
    const float sx = rms_of(norm_unit_sum(s, red), n, eps);
    float hv[32];
    float amax = 0.f;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        hv[i] = (xv[i] * sx) * wn[i];
        amax = fmaxf(amax, fabsf(hv[i]));
    }
    const int sh = h16_shift(h16_block_max(amax, redf));
    if (threadIdx.x == 0) XINV[t] = ldexpf(1.f, -sh);
    if (!mine) return;
#pragma unroll
    for (int j = 0; j < 4; ++j) st8(H + (size_t)t * n + 32 * u + 8 * j, hv + 8 * j);
    h16_unit_vals(hv, u, ldexpf(1.f, sh), XH + (size_t)t * n, XSUM + (size_t)t * (n / 32),
                  XSUM16 + (size_t)t * (n / 16));
#else
    __shared__ double red[32];
    __shared__ float redf[32];
    const int t = blockIdx.x;
    if ((u32)t >= sp->n_tok) return;
    float hv[8];
    const bool mine = residual_norm_run(O, Wpost, eps_post, X, Wnext, eps, n, t, red, hv);
    float amax = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(hv[j]));
#if NORM_H16 == 1
    // Unit m's 32 values at hs[36m ..], run r = 8 of them at 36(r/4) + 8(r%4): four floats of
    // padding per unit put the 16-byte reads of consecutive units in different banks.
    __shared__ __align__(16) float hs[NORM_THREADS / 4 * 36];
    if (mine) st8(hs + 36 * (threadIdx.x >> 2) + 8 * (threadIdx.x & 3), hv);
#endif
    const int sh = h16_shift(norm_block_max(amax, redf));  // its barriers publish hs
    if (mine) st8(H + (size_t)t * n + 8 * threadIdx.x, hv);
    if (threadIdx.x == 0) XINV[t] = ldexpf(1.f, -sh);
#if NORM_H16 == 1
    // One thread per unit (the first n / 32 threads), its values from shared memory.
    if (threadIdx.x < n / 32) {
        const int u = threadIdx.x;
        float v[32];
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            const float4 f = ((const float4*)(hs + 36 * u))[q];
            v[4 * q] = f.x, v[4 * q + 1] = f.y, v[4 * q + 2] = f.z, v[4 * q + 3] = f.w;
        }
        h16_unit_vals(v, u, ldexpf(1.f, sh), XH + (size_t)t * n, XSUM + (size_t)t * (n / 32),
                      XSUM16 + (size_t)t * (n / 16));
    }
#else
    h16_units_of_runs(hv, threadIdx.x, mine, sh, XH + (size_t)t * n,
                      XSUM + (size_t)t * (n / 32), XSUM16 + (size_t)t * (n / 16));
#endif
#endif  // NORM_H16
}

// residual_norm_h16 as a cluster of CL blocks of NORM_THREADS / CL per token (grid (CL, n_tok),
// cluster (CL, 1, 1)); the same arguments, needs and bits. CL = 8 (`residual_norm_h16_cl8`,
// the portable cluster size) or 16 (`residual_norm_h16_cl16`: a non-portable size, allowed on
// the function by the registry).
template <int CL>
__device__ __forceinline__ void residual_norm_h16_cluster(const float* O, const float* Wpost,
                                                          float eps_post, float* X,
                                                          const float* Wnext, float eps, float* H,
                                                          int n, u16* XH, u16* XSUM, u16* XSUM16,
                                                          float* XINV, const StepParams* sp) {
    __shared__ double red1[32], red2[32];  // one array per reduction (remote writes, no reuse)
    __shared__ float redm[32];
#if NORM_AMAX_BOUND
    __shared__ float redm2[32], redw[32];  // the second reduction's maxima
#endif
    const int t = blockIdx.y;
    if ((u32)t >= sp->n_tok) return;  // the whole cluster (it spans x only)
    const u32 rank = cl_rank();
    // `shfl`'s thread r = residual_norm_run's threadIdx.x: its run of 8 values. Every block of
    // the cluster must have started before any writes into its shared memory: this arrive pairs
    // with the wait before the first exchange.
    const int r = NORM_THREADS / CL * (int)rank + (int)threadIdx.x;
    cl_arrive();
    float hv[8];
    int shb = H16_SHIFT_UNKNOWN;  // the exact form: always the third exchange
#if NORM_AMAX_BOUND
    // The second exchange carries the maxima; the third runs only where they do not decide.
    const bool mine = residual_norm_front<true>(O, Wpost, eps_post, X, Wnext, eps, n, t, r,
                                                ClRmsBound<CL>{red1, red2, redm2, redw, rank, n},
                                                hv, &shb);
#else
    const bool mine = residual_norm_front(
        O, Wpost, eps_post, X, Wnext, eps, n, t, r,
        [&](double s, float e, int k) {
            if (k == 0) cl_wait();
            return rms_of(cl_sum_f64<CL>(s, k == 0 ? red1 : red2, rank), n, e);
        },
        hv);
#endif
    int sh;
    if (shb != H16_SHIFT_UNKNOWN) {
        sh = shb;
    } else {
        float amax = 0.f;
#pragma unroll
        for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(hv[j]));
        // The last exchange: after its barrier no block touches another's shared memory, so
        // each may run to its end (with the bound deciding, the second exchange was the last).
        sh = h16_shift(cl_max<CL>(amax, redm, rank));
    }
    if (mine) st8(H + (size_t)t * n + 8 * r, hv);
    if (r == 0) XINV[t] = ldexpf(1.f, -sh);
    h16_units_of_runs(hv, (u32)r, mine, sh, XH + (size_t)t * n, XSUM + (size_t)t * (n / 32),
                      XSUM16 + (size_t)t * (n / 16));
}
extern "C" __global__ void __launch_bounds__(NORM_THREADS / 8)
    residual_norm_h16_cl8(const float* O, const float* Wpost, float eps_post, float* X,
                          const float* Wnext, float eps, float* H, int n, u16* XH, u16* XSUM,
                          u16* XSUM16, float* XINV, const StepParams* sp) {
    residual_norm_h16_cluster<8>(O, Wpost, eps_post, X, Wnext, eps, H, n, XH, XSUM, XSUM16, XINV,
                                 sp);
}
extern "C" __global__ void __launch_bounds__(NORM_THREADS / 16)
    residual_norm_h16_cl16(const float* O, const float* Wpost, float eps_post, float* X,
                           const float* Wnext, float eps, float* H, int n, u16* XH, u16* XSUM,
                           u16* XSUM16, float* XINV, const StepParams* sp) {
    residual_norm_h16_cluster<16>(O, Wpost, eps_post, X, Wnext, eps, H, n, XH, XSUM, XSUM16,
                                  XINV, sp);
}
