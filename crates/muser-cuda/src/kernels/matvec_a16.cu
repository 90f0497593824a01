// matvec_a16.cu — quantized weights × A16 activations (the CUDA route's default matmul), and
// the activation quantizer. Needs common.cuh + formats_a16.cuh before it.
//
// quant_a16: X [n_tok][ldx] f32 -> XQ [n_tok][K] i16, XS/XSUM [n_tok][K/32]; one warp per group
//   of 32: amax = max|x|, d = amax/32767, q = rint(x * (32767/amax)) clamped (all 0 if amax = 0),
//   XSUM = sum of q (exact). The same definition as muser_quant::a16.
// mva_*: Y[t][r] = sum_k W[r][k] x[t][k]; one warp per output row; lane l takes units l, l+32,
//   ... (see formats_a16.cuh) in that order, chained into its partial; the 32 partials are then
//   summed left to right in lane order (lane_seq_sum). Same per-(row, token) order for every NT
//   and in the tensor-core tiles: results do not depend on how tokens are grouped into launches.

// Warps per block (-DMVA_WARPS=N from `MUSER_CUDA_MVA_WARPS`; the host launches 32 * N threads).
#ifndef MVA_WARPS
#define MVA_WARPS 4
#endif

// Each warp's lane_seq_sum scratch for N outputs: N * 36 floats (static shared memory, which
// the staged decode kernels' dynamic activation copy shares the 48 KiB default limit with: the
// host (forward.rs, `mv`) counts MVA_WARPS * MVA_R1 * 36 * 4 bytes for it).
#define MVA_RED_DECL(N) __shared__ __align__(16) float mva_red[MVA_WARPS * (N) * 36]
#define MVA_RED(N) (mva_red + (threadIdx.x >> 5) * (N) * 36)

extern "C" __global__ void quant_a16(const float* X, int ldx, int K, int n_tok, short* XQ,
                                     float* XS, int* XSUM) {
    const int grp = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int t = blockIdx.y;
    if (grp >= K / 32 || t >= n_tok) return;
    const float v = X[(size_t)t * ldx + 32 * grp + (threadIdx.x & 31)];
    a16_group(v, XQ + (size_t)t * K + 32 * grp, XS + (size_t)t * (K / 32) + grp,
              XSUM + (size_t)t * (K / 32) + grp);
}

// R rows per warp (their loads overlap), NT tokens per launch row-pass. Neither changes the
// operation sequence of one (row, token) output.
template <class F, int NT, int R>
__device__ __forceinline__ void mva_body(const u8* __restrict__ W, u64 row_bytes,
                                         const short* __restrict__ XQ, const float* __restrict__ XS,
                                         const int* __restrict__ XSUM, int K,
                                         float* __restrict__ Y, int ldy, int n_out, int n_tok) {
    static_assert(R * NT <= 8, "mva_body: at most 8 outputs per warp");
    MVA_RED_DECL(R * NT);
    const int lane = threadIdx.x & 31;
    const int row0 = (blockIdx.x * MVA_WARPS + (threadIdx.x >> 5)) * R;
    const int t0 = blockIdx.y * NT;
    if (row0 >= n_out) return;
    const int nt = min(NT, n_tok - t0);
    const short* xq = XQ + (size_t)t0 * K;
    const float* xs = XS + (size_t)t0 * (K / 32);
    const int* xsum = XSUM + (size_t)t0 * (K / 32);
    const int n_units = (K / F::BLOCK_VALS) * F::UNITS;
    const int gpb = F::BLOCK_VALS / 32;  // activation groups per weight block
    const u8* wr[R];
#pragma unroll
    for (int i = 0; i < R; ++i) wr[i] = W + (u64)min(row0 + i, n_out - 1) * row_bytes;
    float acc[R][NT];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[i][t] = 0.f;
    if (nt == NT) {
        for (int g = lane; g < n_units; g += 32) {
            const int blk = g / F::UNITS, u = g % F::UNITS;
#pragma unroll
            for (int i = 0; i < R; ++i)
                F::template dot<NT>(wr[i] + (u64)blk * F::BLOCK_BYTES, u, xq + blk * F::BLOCK_VALS,
                                    xs + blk * gpb, xsum + blk * gpb, K, acc[i]);
        }
    } else {
        for (int g = lane; g < n_units; g += 32) {
            const int blk = g / F::UNITS, u = g % F::UNITS;
            for (int t = 0; t < nt; ++t) {
#pragma unroll
                for (int i = 0; i < R; ++i) {
                    float a1[1] = {acc[i][t]};
                    F::template dot<1>(wr[i] + (u64)blk * F::BLOCK_BYTES, u,
                                       xq + (size_t)t * K + blk * F::BLOCK_VALS,
                                       xs + (size_t)t * (K / 32) + blk * gpb,
                                       xsum + (size_t)t * (K / 32) + blk * gpb, K, a1);
                    acc[i][t] = a1[0];
                }
            }
        }
    }
    // Lane j sums output j = (row i, token t) = (j / NT, j % NT).
    const float s = lane_seq_sum<R * NT>(&acc[0][0], MVA_RED(R * NT));
    const int i = lane / NT, t = lane % NT;
    if (lane < R * NT && t < nt && row0 + i < n_out) Y[(size_t)(t0 + t) * ldy + row0 + i] = s;
}

// Decode body for formats with a load/compute split (Q4_K, Q6_K): R rows per warp, and the next
// unit's weights loaded while the current one is computed (software pipeline); each unit's
// activations are read once for all R rows.
// Packed tail: a row has n_units = 32*full + tail units. The `full` iterations give every lane
// one unit of every row; the tail's R*tail (row, unit) pairs are then spread over the lanes
// (pair f on lane f % 32, step f / 32) instead of running R rows on `tail` lanes: the lane
// that owns the unit in mva_body's order (virtual lane v of row i) hands its partial to the
// lane computing the pair, which chains the unit onto it and hands it back. The tail unit is
// the last of its virtual lane, so per (row, token) the arithmetic is exactly `dot<1>` in the
// same unit order and final sum: results equal mva_body's bit for bit.
// STAGE: the activation quants are first copied once per block into shared memory in the
// padded layout (xoff<72>; dynamic shared memory (K/64)*72 shorts, K % 64 == 0). In the global
// layout every 16-byte activation read of a warp touches 32 cache lines (lanes are 128 bytes
// apart); the staging copy is coalesced, and the first unit's weights are requested before it.
template <class F, int R, bool STAGE>
__device__ __forceinline__ void mva_pipe(const u8* __restrict__ W, u64 row_bytes,
                                         const short* __restrict__ XQ, const float* __restrict__ XS,
                                         const int* __restrict__ XSUM, int K,
                                         float* __restrict__ Y, int n_out) {
    extern __shared__ __align__(16) short xsh[];
    MVA_RED_DECL(R);
    constexpr int XP = STAGE ? 72 : 64;
    const int lane = threadIdx.x & 31;
    const int row0 = (blockIdx.x * MVA_WARPS + (threadIdx.x >> 5)) * R;
    const bool active = row0 < n_out;
    const int n_units = (K / F::BLOCK_VALS) * F::UNITS;
    const int full = n_units / 32, tail = n_units % 32, n_pairs = R * tail;
    const int gpb = F::BLOCK_VALS / 32;
    const u8* wr[R];
#pragma unroll
    for (int i = 0; i < R; ++i) wr[i] = W + (u64)min(row0 + i, n_out - 1) * row_bytes;
    typename F::W cur[R];
    typename F::Raw nxt[R];  // the next unit's weights in flight (F::finish makes them a W)
    // The weights of this lane's tail pairs (step s: pair lane + 32 s) into dst[s].
    auto load_tail = [&](typename F::Raw* dst) {
#pragma unroll
        for (int s = 0; s < R; ++s) {
            const int f = lane + 32 * s;
            if (f < n_pairs) {
                const int i = f / tail, gt = 32 * full + (f - i * tail);
                F::load_raw(W + (u64)min(row0 + i, n_out - 1) * row_bytes +
                                (u64)(gt / F::UNITS) * F::BLOCK_BYTES,
                            gt % F::UNITS, dst[s]);
            }
        }
    };
    if (active) {
        if (full > 0) {
#pragma unroll
            for (int i = 0; i < R; ++i)
                F::load(wr[i] + (u64)(lane / F::UNITS) * F::BLOCK_BYTES, lane % F::UNITS, cur[i]);
        } else {
            load_tail(nxt);
#pragma unroll
            for (int i = 0; i < R; ++i) F::finish(nxt[i], cur[i]);
        }
    }
    if (STAGE) {
        // Eight 16-byte loads in flight per thread before their stores: the copy costs one
        // or a few L2 round trips, not one per 16 bytes.
        const int n16 = K / 8;
        for (int base = 0; base < n16; base += 8 * (int)blockDim.x) {
            uint4 v[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const int i = base + threadIdx.x + u * blockDim.x;
                if (i < n16) v[u] = ((const uint4*)XQ)[i];
            }
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const int i = base + threadIdx.x + u * blockDim.x;
                if (i < n16) *(uint4*)(xsh + xoff<72>(8 * i)) = v[u];
            }
        }
        __syncthreads();
    }
    if (!active) return;
    const short* xsrc = STAGE ? xsh : XQ;
    float acc[R];
#pragma unroll
    for (int i = 0; i < R; ++i) acc[i] = 0.f;
    for (int it = 0; it < full; ++it) {
        const int g = lane + 32 * it, g2 = g + 32;
        if (it + 1 < full) {
#pragma unroll
            for (int i = 0; i < R; ++i)
                F::load_raw(wr[i] + (u64)(g2 / F::UNITS) * F::BLOCK_BYTES, g2 % F::UNITS, nxt[i]);
        } else {
            load_tail(nxt);
        }
        const int blk = g / F::UNITS, u = g % F::UNITS;
        typename F::X x;
        F::template loadx<XP>(u, xsrc + xoff<XP>(blk * F::BLOCK_VALS), XS + blk * gpb,
                              XSUM + blk * gpb, x);
#pragma unroll
        for (int i = 0; i < R; ++i) F::compute_x(cur[i], u, x, &acc[i]);
#pragma unroll
        for (int i = 0; i < R; ++i) F::finish(nxt[i], cur[i]);
    }
    // Tail: cur[s] holds pair f = lane + 32 s = (row i, virtual lane v): fetch lane v's partial
    // of row i, chain the unit onto it, and hand it back.
    const int steps = (n_pairs + 31) / 32;
    float tv[R];
#pragma unroll
    for (int s = 0; s < R; ++s) {
        const int f = lane + 32 * s;
        const int i = f < n_pairs ? f / tail : 0, v = f < n_pairs ? f - i * tail : 0;
        float home = 0.f;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const float a = __shfl_sync(0xffffffffu, acc[r], v);
            if (r == i) home = a;
        }
        tv[s] = home;
        if (f < n_pairs) {
            const int gt = 32 * full + v;
            const int blk = gt / F::UNITS, u = gt % F::UNITS;
            typename F::X x;
            F::template loadx<XP>(u, xsrc + xoff<XP>(blk * F::BLOCK_VALS), XS + blk * gpb,
                                  XSUM + blk * gpb, x);
            F::compute_x(cur[s], u, x, &tv[s]);
        }
    }
#pragma unroll
    for (int i = 0; i < R; ++i) {
        const int src = i * tail + lane;  // pair index of (row i, virtual lane `lane`)
#pragma unroll
        for (int s = 0; s < R; ++s) {
            if (s < steps) {
                const float t = __shfl_sync(0xffffffffu, tv[s], src & 31);
                if (lane < tail && (src >> 5) == s) acc[i] = t;
            }
        }
    }
    // Lane j sums row j's partials (one token: row 0 of Y).
    const float s = lane_seq_sum<R>(acc, MVA_RED(R));
    if (lane < R && row0 + lane < n_out) Y[row0 + lane] = s;
}

// Rows per warp: MVA_R1 for one token (decode), 1 for eight (prefill). MVA_R1 is set by the
// registry (-DMVA_R1=N, `MUSER_CUDA_MVA_ROWS`), which tells the host the same number.
#ifndef MVA_R1
#define MVA_R1 2
#endif
// Minimum resident blocks per SM asked of the compiler for the decode kernels (caps their
// registers; -DMVA_MINB=N from `MUSER_CUDA_MVA_MINB`, 0 = no cap).
#ifndef MVA_MINB
#define MVA_MINB 0
#endif
#if MVA_MINB > 0
#define MVA_BOUNDS_T1 __launch_bounds__(32 * MVA_WARPS, MVA_MINB)
#else
#define MVA_BOUNDS_T1 __launch_bounds__(32 * MVA_WARPS)
#endif

#define MVA_KERNEL(NAME, F, NT, R, BOUNDS)                                                      \
    extern "C" __global__ void BOUNDS                                                           \
        NAME(const u8* W, u64 row_bytes, const short* XQ, const float* XS, const int* XSUM,     \
             int K, float* Y, int ldy, int n_out, int n_tok) {                                  \
        mva_body<F, NT, R>(W, row_bytes, XQ, XS, XSUM, K, Y, ldy, n_out, n_tok);                \
    }

// Pipelined decode kernels: STAGE = true stages the activations in shared memory (mvs_*).
#define MVA_PIPE_KERNEL(NAME, F, STAGE)                                                         \
    extern "C" __global__ void MVA_BOUNDS_T1                                                    \
        NAME(const u8* W, u64 row_bytes, const short* XQ, const float* XS, const int* XSUM,     \
             int K, float* Y, int ldy, int n_out, int n_tok) {                                  \
        mva_pipe<F, MVA_R1, STAGE>(W, row_bytes, XQ, XS, XSUM, K, Y, n_out);                    \
    }

MVA_PIPE_KERNEL(mvs_q4_k_t1, AQ4K, true)
MVA_PIPE_KERNEL(mvs_q6_k_t1, AQ6K, true)
MVA_PIPE_KERNEL(mvp_q4_k_t1, AQ4K, false)
MVA_PIPE_KERNEL(mvp_q6_k_t1, AQ6K, false)
MVA_KERNEL(mva_q4_k_t1, AQ4K, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_q4_k_t8, AQ4K, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_q5_k_t1, AQ5K, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_q5_k_t8, AQ5K, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_q6_k_t1, AQ6K, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_q6_k_t8, AQ6K, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_q8_0_t1, AQ80, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_q8_0_t8, AQ80, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_q5_0_t1, AQ50, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_q5_0_t8, AQ50, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_f16_t1, AF16, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_f16_t8, AF16, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_f32_t1, AF32, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_f32_t8, AF32, 8, 1, __launch_bounds__(32 * MVA_WARPS))
