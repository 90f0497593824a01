// matvec_a16.cu — quantized weights × A16 activations (the CUDA route's default matmul), and
// the activation quantizer. Needs common.cuh + formats_a16.cuh + matvec_pipe.cuh before it
// (the bodies mva_body / mva_pipe and their kernel macros).
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
    quant_rows(X, ldx, K, n_tok, XQ, XS, XSUM);
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
