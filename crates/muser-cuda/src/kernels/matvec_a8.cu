// matvec_a8.cu — the A8 activation side of the decode matvecs (issue 5's A/B of the activation
// format; benchmark and tests only, not in the engine's route yet): the quantizer and the
// Q4_K / Q6_K-P decode kernels. Needs common.cuh + formats_a16.cuh + formats_a8.cuh +
// matvec_pipe.cuh before it.
//
// quant_a8: X [n_tok][ldx] f32 -> XQ [n_tok][K] i8, XS/XSUM [n_tok][K/32]; one warp per group
//   of 32: amax = max|x|; if 0 < amax < inf: q = rint(x * (127/amax)) clamped to ±127 (NaN
//   -> 0), d = amax/127; else all 0. XSUM = sum of q (exact). muser_quant::a8's definition
//   (`quantize_sub_ref`), bit for bit (a8_group, common.cuh).
// mvs_/mvp_*_a8_t1: one token, mva_pipe (staged / unstaged), as the A16 kernels; mva_*_a8_t8:
//   eight tokens, mva_body — the reference the one-token kernels must equal bit for bit.

extern "C" __global__ void quant_a8(const float* X, int ldx, int K, int n_tok, signed char* XQ,
                                    float* XS, int* XSUM) {
    PDL_ENTRY()
    const int grp = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int t = blockIdx.y;
    if (grp >= K / 32 || t >= n_tok) return;
    const float v = X[(size_t)t * ldx + 32 * grp + (threadIdx.x & 31)];
    a8_group(v, XQ + (size_t)t * K + 32 * grp, XS + (size_t)t * (K / 32) + grp,
             XSUM + (size_t)t * (K / 32) + grp);
}

MVA_PIPE_KERNEL(mvs_q4_k_a8_t1, AQ4K8, true, 1)
MVA_PIPE_KERNEL(mvp_q4_k_a8_t1, AQ4K8, false, 1)
MVA_PIPE_KERNEL(mvs_q6p_a8_t1, AQ6KP8, true, 1)
MVA_PIPE_KERNEL(mvp_q6p_a8_t1, AQ6KP8, false, 1)
MVA_KERNEL(mva_q4_k_a8_t8, AQ4K8, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_q6p_a8_t8, AQ6KP8, 8, 1, __launch_bounds__(32 * MVA_WARPS))
