// matvec_a8.cu — the A8 activation side of the decode matvecs (`MUSER_CUDA_ACTS=a8`): the
// quantizer, the Q4_K / Q6_K-P decode kernels (pipelined and register-resident) and the plain
// kernels of Q5_K, Q8_0 and Q5_0. Needs common.cuh + formats_a16.cuh + formats_a8.cuh +
// matvec_pipe.cuh before it.
//
// quant_a8: X [n_tok][ldx] f32 -> XQ [n_tok][K] i8, XS/XSUM [n_tok][K/32]; one warp per group
//   of 32: amax = max|x|; if 0 < amax < inf: q = rint(x * (127/amax)) clamped to ±127 (NaN
//   -> 0), d = amax/127; else all 0. XSUM = sum of q (exact). muser_quant::a8's definition
//   (`quantize_sub_ref`), bit for bit (a8_group, common.cuh).
// mvs_/mvp_*_a8_t1: one token, mva_pipe (staged / unstaged), as the A16 kernels; mva_*_a8_t8:
//   eight tokens, mva_body — the reference the one-token kernels must equal bit for bit.
// mva_{q5_k,q8_0,q5_0}_a8_t1 / _t8: the plain body only (as these formats' A16 kernels), one
//   token (MVA_R1 rows per warp) and eight.

extern "C" __global__ void quant_a8(const float* X, int ldx, int K, int n_tok, signed char* XQ,
                                    float* XS, int* XSUM) {
    quant_rows(X, ldx, K, n_tok, XQ, XS, XSUM);
}

MVA_PIPE_KERNEL(mvs_q4_k_a8_t1, AQ4K8, true, 1)
MVA_PIPE_KERNEL(mvp_q4_k_a8_t1, AQ4K8, false, 1)
MVA_PIPE_KERNEL(mvs_q6p_a8_t1, AQ6KP8, true, 1)
MVA_PIPE_KERNEL(mvp_q6p_a8_t1, AQ6KP8, false, 1)
MVA_KERNEL(mva_q4_k_a8_t8, AQ4K8, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_q6p_a8_t8, AQ6KP8, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_q5_k_a8_t1, AQ5K8, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_q5_k_a8_t8, AQ5K8, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_q8_0_a8_t1, AQ808, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_q8_0_a8_t8, AQ808, 8, 1, __launch_bounds__(32 * MVA_WARPS))
MVA_KERNEL(mva_q5_0_a8_t1, AQ508, 1, MVA_R1, MVA_BOUNDS_T1)
MVA_KERNEL(mva_q5_0_a8_t8, AQ508, 8, 1, __launch_bounds__(32 * MVA_WARPS))

// ---- Register-resident activations (mvr_*_a8_t1; A/B against the staged pipeline above): A8
// makes a unit's activations 64 bytes — 16 words — so a lane can hold all of its units' for
// K <= 64 · 32 · MVR_UNITS in registers, loaded once per warp from global memory. The warp then
// streams MVR_ROWS rows through them: per row, each lane loads its units' weights (all in
// flight at once) and chains them onto the row's partial in unit order (lane l: units l,
// l + 32, …), then lane_seq_sum — mva_body's operation sequence, so the outputs equal
// mva_*_a8_t8's bit for bit. No shared-memory reads in the unit loop (what the staged kernels
// wait on). -DMVR_ROWS (`MUSER_CUDA_MVR_ROWS`, rows per warp), -DMVR_AHEAD (1: the next row's
// weights requested before the current row's arithmetic, twice the weight registers; 0: not).
#ifndef MVR_UNITS
#define MVR_UNITS 4
#endif
#ifndef MVR_ROWS
#define MVR_ROWS 4
#endif
#ifndef MVR_AHEAD
#define MVR_AHEAD 0
#endif
template <class F, int UN, int RW, bool AHEAD>
__device__ __forceinline__ void mvr_body(const u8* __restrict__ W, u64 row_bytes,
                                         const signed char* __restrict__ XQ,
                                         const float* __restrict__ XS,
                                         const int* __restrict__ XSUM, int K,
                                         float* __restrict__ Y, int n_out) {
    MVA_RED_DECL(1);
    const int lane = threadIdx.x & 31;
    const int row0 = (blockIdx.x * MVA_WARPS + (threadIdx.x >> 5)) * RW;
    const int n_units = (K / F::BLOCK_VALS) * F::UNITS;
    const int gpb = F::BLOCK_VALS / 32;
    if (row0 >= n_out) {
        pdl_wait();
        pdl_trigger();
        return;
    }
    // Unit i of this lane: lane + 32 i (present while < n_units).
    auto unit_w = [&](int row, int i, typename F::W& w) {
        const int g = lane + 32 * i;
        if (g < n_units)
            F::load(W + (u64)min(row, n_out - 1) * row_bytes + (u64)(g / F::UNITS) * F::BLOCK_BYTES,
                    g % F::UNITS, w);
    };
    typename F::W cur[UN], nxt[AHEAD ? UN : 1];
    // The first row's weights are no kernel's output: requested before the wait (PDL).
#pragma unroll
    for (int i = 0; i < UN; ++i) unit_w(row0, i, cur[i]);
    pdl_wait();
    pdl_trigger();
    typename F::X x[UN];
#pragma unroll
    for (int i = 0; i < UN; ++i) {
        const int g = lane + 32 * i;
        if (g < n_units) {
            const int blk = g / F::UNITS;
            F::template loadx<64>(g % F::UNITS, XQ + (size_t)blk * F::BLOCK_VALS, XS + blk * gpb,
                                  XSUM + blk * gpb, x[i]);
        }
    }
#pragma unroll 1
    for (int r = 0; r < RW && row0 + r < n_out; ++r) {
        if (r > 0 && !AHEAD) {
#pragma unroll
            for (int i = 0; i < UN; ++i) unit_w(row0 + r, i, cur[i]);
        }
        if (AHEAD && r + 1 < RW && row0 + r + 1 < n_out) {
#pragma unroll
            for (int i = 0; i < UN; ++i) unit_w(row0 + r + 1, i, nxt[AHEAD ? i : 0]);
        }
        float p = 0.f;
#pragma unroll
        for (int i = 0; i < UN; ++i)
            if (lane + 32 * i < n_units) F::compute_x(cur[i], (lane + 32 * i) % F::UNITS, x[i], &p);
        const float s = lane_seq_sum<1>(&p, MVA_RED(1));
        if (lane == 0) Y[row0 + r] = s;
        if (AHEAD) {
#pragma unroll
            for (int i = 0; i < UN; ++i) cur[i] = nxt[AHEAD ? i : 0];
        }
    }
}

#define MVR_KERNEL(NAME, F)                                                                     \
    extern "C" __global__ void MVA_BOUNDS_T1                                                    \
        NAME(const u8* W, u64 row_bytes, const signed char* XQ, const float* XS,                \
             const int* XSUM, int K, float* Y, int ldy, int n_out, int n_tok) {                 \
        mvr_body<F, MVR_UNITS, MVR_ROWS, MVR_AHEAD != 0>(W, row_bytes, XQ, XS, XSUM, K, Y,     \
                                                         n_out);                                \
    }
MVR_KERNEL(mvr_q4_k_a8_t1, AQ4K8)
MVR_KERNEL(mvr_q6p_a8_t1, AQ6KP8)
