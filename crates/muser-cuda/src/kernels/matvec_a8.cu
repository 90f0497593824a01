// matvec_a8.cu — the A8 activation side of the decode matvecs (issue 5's A/B of the activation
// format; benchmark and tests only, not in the engine's route yet): the quantizer and the
// Q4_K / Q6_K-P decode kernels. Needs common.cuh + formats_a16.cuh + formats_a8.cuh +
// matvec_pipe.cuh before it.
//
// quant_a8: X [n_tok][ldx] f32 -> XQ [n_tok][K] i8, XS/XSUM [n_tok][K/32]; one warp per group
//   of 32: amax = max|x|; if 0 < amax < inf: q = rint(x * (127/amax)) clamped to ±127 (NaN
//   -> 0), d = amax/127; else all 0. XSUM = sum of q (exact). muser_quant::a8's definition
//   (`quantize_sub_ref`), bit for bit.
// mvs_/mvp_*_a8_t1: one token, mva_pipe (staged / unstaged), as the A16 kernels; mva_*_a8_t8:
//   eight tokens, mva_body — the reference the one-token kernels must equal bit for bit.

__device__ __forceinline__ void a8_group(float v, signed char* q_out, float* d_out, int* sum_out) {
    const int lane = threadIdx.x & 31;
    const float amax = warp_max(fabsf(v));
    int q = 0;
    float d = 0.f;
    if (amax > 0.f && amax <= 3.40282347e38f) {
        const float id = __fdiv_rn(127.0f, amax);
        q = v == v ? (int)fminf(fmaxf(rintf(__fmul_rn(v, id)), -127.f), 127.f) : 0;
        d = __fdiv_rn(amax, 127.0f);
    }
    q_out[lane] = (signed char)q;
    int s = q;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) {
        *d_out = d;
        *sum_out = s;
    }
}

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
