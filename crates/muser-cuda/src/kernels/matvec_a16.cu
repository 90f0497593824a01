// matvec_a16.cu — quantized weights × A16 activations (the CUDA route's default matmul), and
// the activation quantizer. Needs common.cuh + formats_a16.cuh + matvec_pipe.cuh before it.
//
// quant_a16: X [n_tok][ldx] f32 -> XQ [n_tok][K] i16, XS/XSUM [n_tok][K/32]; one warp per group
//   of 32: amax = max|x|, d = amax/32767, q = rint(x * (32767/amax)) clamped (all 0 if amax = 0),
//   XSUM = sum of q (exact). The same definition as muser_quant::a16.
// mva_*: Y[t][r] = sum_k W[r][k] x[t][k]; one warp per output row; lane l takes units l, l+32,
//   ... (see formats_a16.cuh) in that order, chained into its partial; the 32 partials are then
//   summed left to right in lane order (lane_seq_sum). Same per-(row, token) order for every NT
//   and in the tensor-core tiles: results do not depend on how tokens are grouped into launches.

extern "C" __global__ void quant_a16(const float* X, int ldx, int K, int n_tok, short* XQ,
                                     float* XS, int* XSUM) {
    PDL_ENTRY()
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
    PDL_ENTRY()
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

#define MVA_KERNEL(NAME, F, NT, R, BOUNDS)                                                      \
    extern "C" __global__ void BOUNDS                                                           \
        NAME(const u8* W, u64 row_bytes, const short* XQ, const float* XS, const int* XSUM,     \
             int K, float* Y, int ldy, int n_out, int n_tok) {                                  \
        mva_body<F, NT, R>(W, row_bytes, XQ, XS, XSUM, K, Y, ldy, n_out, n_tok);                \
    }

// Pipelined decode kernels for one token (the template and MVA_PIPE_KERNEL: matvec_pipe.cuh).
MVA_PIPE_KERNEL_AH(mvs_q4_k_t1, AQ4K, true, 1, MVA_WSTAGES, MVA_AHEAD)
MVA_PIPE_KERNEL_WS(mvs_q6_k_t1, AQ6K, true, 1, MVA_WSTAGES_Q6)
MVA_PIPE_KERNEL_AH(mvp_q4_k_t1, AQ4K, false, 1, MVA_WSTAGES, MVA_AHEAD)
MVA_PIPE_KERNEL_WS(mvp_q6_k_t1, AQ6K, false, 1, MVA_WSTAGES_Q6)
// Q6_K-P (aligned repack of Q6_K, muser_cuda::q6pad): the same arithmetic as mv*_q6_k_t1.
MVA_PIPE_KERNEL_AH(mvs_q6p_t1, AQ6KP, true, 1, 0, MVA_AHEAD_Q6P)
MVA_PIPE_KERNEL_AH(mvp_q6p_t1, AQ6KP, false, 1, 0, MVA_AHEAD_Q6P)

MVA_KERNEL(mva_q4_k_t1, AQ4K, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_q4_k_t8, AQ4K, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_q5_k_t1, AQ5K, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_q5_k_t8, AQ5K, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_q6_k_t1, AQ6K, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_q6_k_t8, AQ6K, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_q6p_t1, AQ6KP, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_q6p_t8, AQ6KP, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_q8_0_t1, AQ80, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_q8_0_t8, AQ80, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_q5_0_t1, AQ50, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_q5_0_t8, AQ50, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_f16_t1, AF16, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_f16_t8, AF16, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_f32_t1, AF32, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_f32_t8, AF32, 8, 1, __launch_bounds__(32 * MVA_WARPS))
