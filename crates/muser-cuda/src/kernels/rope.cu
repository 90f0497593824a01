// rope.cu — per-head QK-norm, RoPE, and the K/V append into the f16 cache, fused.
// One warp per (token, head) over the n_head query heads, then n_head_kv key heads, then
// n_head_kv value heads; blocks of 4 warps share one token. Angles in f64 (pos * inv_freq[i],
// inv_freq computed on the host in f64), cos/sin rounded once to f32 — like the CPU route —
// and computed once per block into shared memory.
//
// Q: [n_tok][n_head*hd] f32 (in place)   K: [n_tok][n_head_kv*hd] f32 (in place)
// V: [n_tok][n_head_kv*hd_v] f32
// Kc: [n_seq][cap][n_head_kv*hd] f16, Vc: [n_seq][cap][n_head_kv*hd_v] f16; position p of
// sequence s lives at row s * cap + p % cap (step_kv_row).
// mode: 0 = no rope, 1 = NORM (pairs 2i, 2i+1), 2 = NEOX (pairs i, i + hd/2).

#define ROPE_MAX_HD 512

// ROPE_EARLY (`MUSER_CUDA_ROPE_EARLY=1`; off: measured slower, session 35): the block's cos / sin
// table — the step's positions (StepParams, which no kernel writes) and the host's inv_freq
// only — is computed before the PDL wait, so its f64 sincos chain overlaps the kernel before
// (the Q / K / V projection) instead of following it. The same values: the same bits.
#ifndef ROPE_EARLY
#define ROPE_EARLY 0
#endif

// ROPE_OVERLAP (`MUSER_CUDA_ROPE_OVERLAP=1`; 0 by default until measured; not with ROPE_EARLY,
// refused on the host): after the PDL wait each warp first requests its head's row (and its norm
// weights) into registers, then the block computes the cos / sin table, then each warp its
// head's norm into its buffer — so the row's L2 round trip overlaps the f64 sincos chain and the
// norm's f64 reduction overlaps the other warps' table work, where the plain order computes the
// table, waits for the whole block, and only then requests the rows. The same operations in the
// same order per value: the same bits.
#ifndef ROPE_OVERLAP
#define ROPE_OVERLAP 0
#endif
#if ROPE_OVERLAP && ROPE_EARLY
#error "ROPE_OVERLAP and ROPE_EARLY are alternative placements of the table"
#endif

// The block's cos / sin table of position `pos`: angles in f64 (pos * inv_freq[i]), rounded once
// to f32 (threads stride the `half` frequencies).
__device__ __forceinline__ void rope_table(u32 pos, const double* inv_freq, int half,
                                           float* cos_t, float* sin_t) {
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        double sd, cd;
        sincos((double)pos * inv_freq[i], &sd, &cd);
        cos_t[i] = (float)cd;
        sin_t[i] = (float)sd;
    }
}

// V head `hv` of token t into its f16 cache row `crow` (one warp, lane `lane`).
__device__ __forceinline__ void v_append(const float* V, u16* Vc, int t, u64 crow, int hv,
                                         int n_head_kv, int hd_v, int lane) {
    const float* v = V + (size_t)t * n_head_kv * hd_v + hv * hd_v;
    u16* dst = Vc + crow * n_head_kv * hd_v + hv * hd_v;
    for (int i = lane; i < hd_v; i += 32) dst[i] = f2h(v[i]);
}

extern "C" __global__ void qk_norm_rope_kv(float* Q, float* K, const float* V, const float* qn,
                                           const float* kn, float eps, const double* inv_freq,
                                           int mode, int n_head, int n_head_kv, int hd, int hd_v,
                                           u16* Kc, u16* Vc, int cap, const StepParams* sp) {
    __shared__ float buf[4][ROPE_MAX_HD];
    __shared__ float cos_t[ROPE_MAX_HD / 2], sin_t[ROPE_MAX_HD / 2];
#if ROPE_OVERLAP
    PDL_ENTRY()
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int t = blockIdx.y;
    const int head = blockIdx.x * 4 + w;
    if ((u32)t >= sp->n_tok) return;  // the whole block
    const u32 pos = step_pos(sp, t);
    const int half = hd / 2;
    const bool live = head < n_head + 2 * n_head_kv, is_v = head >= n_head + n_head_kv;
    const bool is_q = head < n_head, qk = live && !is_v;
    float* x = !qk  ? nullptr
               : is_q ? Q + (size_t)t * n_head * hd + head * hd
                      : K + (size_t)t * n_head_kv * hd + (head - n_head) * hd;
    const float* wn = is_q ? qn : kn;
    // The row's values i = lane + 32 j, requested before the table's sincos.
    float xr[ROPE_MAX_HD / 32], wr[ROPE_MAX_HD / 32];
#pragma unroll
    for (int j = 0; j < ROPE_MAX_HD / 32; ++j) {
        const int i = lane + 32 * j;
        xr[j] = wr[j] = 0.f;
        if (qk && i < hd) {
            xr[j] = x[i];
            wr[j] = wn[i];
        }
    }
    const u64 crow = step_kv_row(sp, t, pos, cap);
    if (live && is_v) {  // V heads: the cache append needs no table
        v_append(V, Vc, t, crow, head - n_head - n_head_kv, n_head_kv, hd_v, lane);
    }
    if (mode != 0) rope_table(pos, inv_freq, half, cos_t, sin_t);
    float* b = buf[w];
    if (qk) {
        double ss = 0.0;
#pragma unroll
        for (int j = 0; j < ROPE_MAX_HD / 32; ++j)
            if (lane + 32 * j < hd) ss += (double)xr[j] * (double)xr[j];
        ss = warp_sum_f64(ss);
        const float s = (float)(1.0 / sqrt(ss / (double)hd + (double)eps));
#pragma unroll
        for (int j = 0; j < ROPE_MAX_HD / 32; ++j)
            if (lane + 32 * j < hd) b[lane + 32 * j] = (xr[j] * s) * wr[j];
    }
    __syncthreads();  // the table (and each warp's own buffer)
    if (!qk) return;
#else
    if (!ROPE_EARLY) {
        PDL_ENTRY()
    }
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int t = blockIdx.y;
    const int head = blockIdx.x * 4 + w;
    if ((u32)t >= sp->n_tok) {  // the whole block
        if (ROPE_EARLY) {
            PDL_ENTRY()
        }
        return;
    }
    const u32 pos = step_pos(sp, t);
    const int half = hd / 2;
    if (mode != 0) rope_table(pos, inv_freq, half, cos_t, sin_t);
    if (ROPE_EARLY) {
        PDL_ENTRY()
    }
    __syncthreads();
    if (head >= n_head + 2 * n_head_kv) return;
    const u64 crow = step_kv_row(sp, t, pos, cap);
    if (head >= n_head + n_head_kv) {
        v_append(V, Vc, t, crow, head - n_head - n_head_kv, n_head_kv, hd_v, lane);
        return;
    }
    const bool is_q = head < n_head;
    float* x = is_q ? Q + (size_t)t * n_head * hd + head * hd
                    : K + (size_t)t * n_head_kv * hd + (head - n_head) * hd;
    const float* wn = is_q ? qn : kn;
    double ss = 0.0;
    for (int i = lane; i < hd; i += 32) ss += (double)x[i] * (double)x[i];
    ss = warp_sum_f64(ss);
    const float s = (float)(1.0 / sqrt(ss / (double)hd + (double)eps));
    float* b = buf[w];
    for (int i = lane; i < hd; i += 32) b[i] = (x[i] * s) * wn[i];
    __syncwarp();
#endif
    if (mode != 0) {
        for (int i = lane; i < half; i += 32) {
            const float c = cos_t[i], sn = sin_t[i];
            const int a = mode == 1 ? 2 * i : i, bb = mode == 1 ? 2 * i + 1 : i + half;
            const float x0 = b[a], x1 = b[bb];
            x[a] = x0 * c - x1 * sn;
            x[bb] = x0 * sn + x1 * c;
        }
    } else {
        for (int i = lane; i < hd; i += 32) x[i] = b[i];
    }
    __syncwarp();
    if (!is_q) {
        const int hk = head - n_head;
        u16* dst = Kc + crow * n_head_kv * hd + hk * hd;
        for (int i = lane; i < hd; i += 32) dst[i] = f2h(x[i]);
    }
}
