// attention.cu — causal attention over the f16 KV cache, split over key ranges and combined in a
// fixed order (deterministic flash-decoding). Decode and prefill use the same kernels and the
// same absolute key partition, so a query's result depends only on its position and the cache.
//
// Q:  [n_tok][n_head*hd] f32          Kc: [cap][n_head_kv*hd] f16   Vc: [cap][n_head_kv*hd_v] f16
// Op: [n_tok][n_head][n_super][hd_v] f32 (unnormalised partial outputs)
// Mp, Lp: [n_tok][n_head][n_super] f32 (running max and sum of each partial)
// A:  [n_tok][n_head*hd_v] f32
// Query t sits at pos = pos0 + t and sees keys lo..=pos, lo = window ? max(0, pos-window+1) : 0.
// Key p lives at cache row p % cap (the caller guarantees rows lo..=pos are all present).
//
// attn_partial: grid (n_super, n_head / HPB, n_tok), block = HPB warps (HPB divides the GQA
// ratio, so one block's heads share one KV head and its K/V tiles), one warp per query head.
// Block b owns keys [b*S, (b+1)*S) (S = `super_len`, a multiple of 32), processed in tiles of
// 32 (tile boundaries absolute), online softmax in f32, tiles in order. HPB only changes which
// warps share a tile load, never a head's arithmetic; S fixes the partition (numerics).
// attn_combine: grid (n_head, n_tok), 32 threads; merges the partials of the visible blocks in
// block order. attn_combine_q: the same, then the output gate (G non-null: A / (1 + exp(-G)),
// the sigmoid_gate formula) and the A16 quantization of the row (a16_group per 32 values) —
// bit-identical to attn_combine → sigmoid_gate_q (strict math) or → quant_a16.

#define TILE 32

extern "C" __global__ void attn_partial(const float* Q, const u16* Kc, const u16* Vc, int cap,
                                        int window, float scale, int n_head, int n_head_kv,
                                        int hd, int hd_v, int n_super, int super_len, float* Op,
                                        float* Mp, float* Lp, const StepParams* sp) {
    extern __shared__ float smem[];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int G = blockDim.x >> 5;  // heads in this block (HPB)
    const int sb = blockIdx.x, t = blockIdx.z;
    const int h = blockIdx.y * G + w;
    const int kvh = h / (n_head / n_head_kv);
    if ((u32)t >= sp->n_tok) return;
    const int pos = (int)(sp->pos0 + t);
    const int lo = window > 0 ? max(0, pos - window + 1) : 0;
    const int SUPER = super_len;
    const int b0 = max(lo, sb * SUPER), b1 = min(pos, sb * SUPER + SUPER - 1);
    if (b0 > b1) return;
    const int kst = hd + 2, vst = hd_v + 2;  // padded f16 row strides (bank spread)
    float* qs = smem;                           // [G][hd]
    u16* Ks = (u16*)(smem + G * hd);            // [TILE][kst]
    u16* Vs = Ks + TILE * kst;                  // [TILE][vst]
    const float* q = Q + (size_t)t * n_head * hd + (size_t)h * hd;
    for (int d = lane; d < hd; d += 32) qs[w * hd + d] = q[d];
    const int kw = n_head_kv * hd, vw = n_head_kv * hd_v;
    float m = -MUSER_INF, l = 0.f;
    float acc[8];
#pragma unroll
    for (int r = 0; r < 8; ++r) acc[r] = 0.f;
    const int nr = hd_v / 32;
    for (int ts = sb * SUPER; ts < sb * SUPER + SUPER; ts += TILE) {
        const int k0 = max(b0, ts), k1 = min(b1, ts + TILE - 1);
        if (k0 > k1) continue;
        __syncthreads();
        // K and V rows of the tile into shared memory: every thread issues its (up to) 4 + 4
        // loads before the first store, so the tile costs one memory round trip.
        const int nk = TILE * (hd / 2), nv = TILE * (hd_v / 2);
        for (int base = 0; base < max(nk, nv); base += 4 * (int)blockDim.x) {
            u32 kv[4], vv[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int idx = base + threadIdx.x + u * blockDim.x;
                kv[u] = 0;
                vv[u] = 0;
                if (idx < nk) {
                    const int j = idx / (hd / 2), d2 = idx % (hd / 2), p = ts + j;
                    if (p >= k0 && p <= k1)
                        kv[u] = *(const u32*)(Kc + (u64)(p % cap) * kw + kvh * hd + 2 * d2);
                }
                if (idx < nv) {
                    const int j = idx / (hd_v / 2), d2 = idx % (hd_v / 2), p = ts + j;
                    if (p >= k0 && p <= k1)
                        vv[u] = *(const u32*)(Vc + (u64)(p % cap) * vw + kvh * hd_v + 2 * d2);
                }
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int idx = base + threadIdx.x + u * blockDim.x;
                if (idx < nk) {
                    const int j = idx / (hd / 2), d2 = idx % (hd / 2);
                    Ks[j * kst + 2 * d2] = (u16)(kv[u] & 0xFFFF);
                    Ks[j * kst + 2 * d2 + 1] = (u16)(kv[u] >> 16);
                }
                if (idx < nv) {
                    const int j = idx / (hd_v / 2), d2 = idx % (hd_v / 2);
                    Vs[j * vst + 2 * d2] = (u16)(vv[u] & 0xFFFF);
                    Vs[j * vst + 2 * d2 + 1] = (u16)(vv[u] >> 16);
                }
            }
        }
        __syncthreads();
        const int p = ts + lane;
        const bool valid = p >= k0 && p <= k1;
        float s = -MUSER_INF;
        if (valid) {
            float dot = 0.f;
            const u16* kr = Ks + lane * kst;
            const float* qw = qs + w * hd;
            for (int d = 0; d < hd; ++d) dot = fmaf(qw[d], h2f(kr[d]), dot);
            s = dot * scale;
        }
        const float m_new = fmaxf(m, warp_max(s));
        const float corr = expf(m - m_new);
        const float pj = valid ? expf(s - m_new) : 0.f;
        l = l * corr + warp_sum(pj);
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            if (r < nr) {
                float a = acc[r] * corr;
                const int d = lane + 32 * r;
                for (int j = 0; j < TILE; ++j) {
                    const float pb = __shfl_sync(0xffffffffu, pj, j);
                    a = fmaf(pb, h2f(Vs[j * vst + d]), a);
                }
                acc[r] = a;
            }
        }
        m = m_new;
    }
    const size_t slot = ((size_t)t * n_head + h) * n_super + sb;
#pragma unroll
    for (int r = 0; r < 8; ++r)
        if (r < nr) Op[slot * hd_v + lane + 32 * r] = acc[r];
    if (lane == 0) {
        Mp[slot] = m;
        Lp[slot] = l;
    }
}

// attn_partial_mt: attn_partial for prefill, ATQ consecutive query tokens per block, so one K/V
// tile load serves G heads x ATQ tokens instead of G heads. Grid (n_super, n_head / G,
// ceil(n_tok / ATQ)), block = G warps (G divides the GQA ratio; the host picks it so the shared
// memory fits). Each (token, head) follows attn_partial's arithmetic exactly — same absolute
// tiles, same fmaf chain per score, same online-softmax updates, same j-ascending V chain
// starting from acc * corr, and a tile the token sees none of leaves its state untouched — so
// its Op/Mp/Lp are bit-identical to attn_partial's (device test
// `attention_prefill_kernel_is_bit_identical_to_decode`). The tile holds the union of the
// block's visible rows; where a token sees only part of a tile, the rows it does not see enter
// its V chain as 0, exactly as attn_partial's zero-filled rows do.
#define ATQ 8

extern "C" __global__ void attn_partial_mt(const float* Q, const u16* Kc, const u16* Vc, int cap,
                                           int window, float scale, int n_head, int n_head_kv,
                                           int hd, int hd_v, int n_super, int super_len,
                                           float* Op, float* Mp, float* Lp,
                                           const StepParams* sp) {
    extern __shared__ float smem[];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int G = blockDim.x >> 5;
    const int sb = blockIdx.x, t0 = blockIdx.z * ATQ;
    const int h = blockIdx.y * G + w;
    const int kvh = h / (n_head / n_head_kv);
    const int n_tok = (int)sp->n_tok;
    const int SUPER = super_len;
    // Each token's visible keys inside this block's range (b0 > b1: none), and their union.
    int b0[ATQ], b1[ATQ];
    int u0 = 0x7fffffff, u1 = -1;
#pragma unroll
    for (int i = 0; i < ATQ; ++i) {
        b0[i] = 1;
        b1[i] = 0;
        if (t0 + i < n_tok) {
            const int pos = (int)(sp->pos0 + t0 + i);
            const int lo = window > 0 ? max(0, pos - window + 1) : 0;
            b0[i] = max(lo, sb * SUPER);
            b1[i] = min(pos, sb * SUPER + SUPER - 1);
        }
        if (b0[i] <= b1[i]) {
            u0 = min(u0, b0[i]);
            u1 = max(u1, b1[i]);
        }
    }
    if (u0 > u1) return;  // block-uniform
    const int kst = hd + 2, vst = hd_v + 2;
    float* qs = smem;                          // [G][ATQ][hd]
    float* ps = qs + G * ATQ * hd;             // [G][ATQ][TILE] probabilities of the tile
    u16* Ks = (u16*)(ps + G * ATQ * TILE);     // [TILE][kst]
    u16* Vs = Ks + TILE * kst;                 // [TILE][vst]
    float* qw = qs + w * ATQ * hd;
    float* pw = ps + w * ATQ * TILE;
    for (int i = 0; i < ATQ; ++i) {
        const float* q = Q + ((size_t)(t0 + i) * n_head + h) * hd;
        for (int d = lane; d < hd; d += 32) qw[i * hd + d] = t0 + i < n_tok ? q[d] : 0.f;
    }
    const int kw = n_head_kv * hd, vw = n_head_kv * hd_v;
    const int nr = hd_v / 32;
    float m[ATQ], l[ATQ], acc[ATQ][8];
#pragma unroll
    for (int i = 0; i < ATQ; ++i) {
        m[i] = -MUSER_INF;
        l[i] = 0.f;
#pragma unroll
        for (int r = 0; r < 8; ++r) acc[i][r] = 0.f;
    }
    for (int ts = sb * SUPER; ts < sb * SUPER + SUPER; ts += TILE) {
        const int k0u = max(u0, ts), k1u = min(u1, ts + TILE - 1);
        if (k0u > k1u) continue;  // block-uniform
        __syncthreads();
        const int nk = TILE * (hd / 2), nv = TILE * (hd_v / 2);
        for (int base = 0; base < max(nk, nv); base += 4 * (int)blockDim.x) {
            u32 kv[4], vv[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int idx = base + threadIdx.x + u * blockDim.x;
                kv[u] = 0;
                vv[u] = 0;
                if (idx < nk) {
                    const int j = idx / (hd / 2), d2 = idx % (hd / 2), p = ts + j;
                    if (p >= k0u && p <= k1u)
                        kv[u] = *(const u32*)(Kc + (u64)(p % cap) * kw + kvh * hd + 2 * d2);
                }
                if (idx < nv) {
                    const int j = idx / (hd_v / 2), d2 = idx % (hd_v / 2), p = ts + j;
                    if (p >= k0u && p <= k1u)
                        vv[u] = *(const u32*)(Vc + (u64)(p % cap) * vw + kvh * hd_v + 2 * d2);
                }
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int idx = base + threadIdx.x + u * blockDim.x;
                if (idx < nk) {
                    const int j = idx / (hd / 2), d2 = idx % (hd / 2);
                    *(u32*)(Ks + j * kst + 2 * d2) = kv[u];
                }
                if (idx < nv) {
                    const int j = idx / (hd_v / 2), d2 = idx % (hd_v / 2);
                    *(u32*)(Vs + j * vst + 2 * d2) = vv[u];
                }
            }
        }
        __syncthreads();
        // Scores: lane = key, every token's fmaf chain over d in order (rows a token does
        // not see are computed and discarded).
        float dot[ATQ];
#pragma unroll
        for (int i = 0; i < ATQ; ++i) dot[i] = 0.f;
        const u16* kr = Ks + lane * kst;
        for (int d = 0; d < hd; d += 2) {
            const u32 k2 = *(const u32*)(kr + d);
            const float ka = h2f((u16)(k2 & 0xFFFF)), kb = h2f((u16)(k2 >> 16));
#pragma unroll
            for (int i = 0; i < ATQ; ++i) {
                const float2 q2 = *(const float2*)(qw + i * hd + d);
                dot[i] = fmaf(q2.x, ka, dot[i]);
                dot[i] = fmaf(q2.y, kb, dot[i]);
            }
        }
        const int p = ts + lane;
        bool all_full = true;  // block-uniform: every token sees the whole tile
        float corr[ATQ];
#pragma unroll
        for (int i = 0; i < ATQ; ++i) {
            const int k0 = max(b0[i], ts), k1 = min(b1[i], ts + TILE - 1);
            all_full = all_full && k0 == ts && k1 == ts + TILE - 1;
            corr[i] = 1.f;
            if (k0 > k1) continue;
            const bool valid = p >= k0 && p <= k1;
            const float s = valid ? dot[i] * scale : -MUSER_INF;
            const float m_new = fmaxf(m[i], warp_max(s));
            corr[i] = expf(m[i] - m_new);
            const float pj = valid ? expf(s - m_new) : 0.f;
            l[i] = l[i] * corr[i] + warp_sum(pj);
            m[i] = m_new;
            pw[i * TILE + lane] = pj;
        }
        __syncwarp();
        if (all_full) {
            // One V load per (row, column) serves every token.
#pragma unroll
            for (int r = 0; r < 8; ++r) {
                if (r < nr) {
                    const int d = lane + 32 * r;
                    float a[ATQ];
#pragma unroll
                    for (int i = 0; i < ATQ; ++i) a[i] = acc[i][r] * corr[i];
                    for (int j = 0; j < TILE; j += 4) {
                        float v[4];
#pragma unroll
                        for (int jj = 0; jj < 4; ++jj) v[jj] = h2f(Vs[(j + jj) * vst + d]);
#pragma unroll
                        for (int i = 0; i < ATQ; ++i) {
                            const float4 p4 = *(const float4*)(pw + i * TILE + j);
                            a[i] = fmaf(p4.x, v[0], a[i]);
                            a[i] = fmaf(p4.y, v[1], a[i]);
                            a[i] = fmaf(p4.z, v[2], a[i]);
                            a[i] = fmaf(p4.w, v[3], a[i]);
                        }
                    }
#pragma unroll
                    for (int i = 0; i < ATQ; ++i) acc[i][r] = a[i];
                }
            }
        } else {
            // Edge tile: per token, rows it does not see enter as 0 (attn_partial's zero fill).
#pragma unroll
            for (int i = 0; i < ATQ; ++i) {
                const int k0 = max(b0[i], ts), k1 = min(b1[i], ts + TILE - 1);
                if (k0 > k1) continue;
                const int j0 = k0 - ts, j1 = k1 - ts;
#pragma unroll
                for (int r = 0; r < 8; ++r) {
                    if (r < nr) {
                        const int d = lane + 32 * r;
                        float a = acc[i][r] * corr[i];
                        for (int j = 0; j < TILE; ++j) {
                            const float v = (j >= j0 && j <= j1) ? h2f(Vs[j * vst + d]) : 0.f;
                            a = fmaf(pw[i * TILE + j], v, a);
                        }
                        acc[i][r] = a;
                    }
                }
            }
        }
        __syncwarp();
    }
#pragma unroll
    for (int i = 0; i < ATQ; ++i) {
        if (b0[i] > b1[i]) continue;
        const size_t slot = ((size_t)(t0 + i) * n_head + h) * n_super + sb;
#pragma unroll
        for (int r = 0; r < 8; ++r)
            if (r < nr) Op[slot * hd_v + lane + 32 * r] = acc[i][r];
        if (lane == 0) {
            Mp[slot] = m[i];
            Lp[slot] = l[i];
        }
    }
}

// The merged (unnormalised acc, 1/L) of one head's visible partials, in block order.
__device__ __forceinline__ float combine_head(const float* Op, const float* Mp, const float* Lp,
                                              int window, int hd_v, int n_super, int super_len,
                                              int pos, size_t base, float* acc) {
    const int lane = threadIdx.x & 31;
    const int lo = window > 0 ? max(0, pos - window + 1) : 0;
    const int s0 = lo / super_len, s1 = pos / super_len;
    if (s1 >= n_super) __trap();  // the host sized the partials for fewer positions: fail loudly
    float M = -MUSER_INF;
#pragma unroll 4
    for (int s = s0; s <= s1; ++s) M = fmaxf(M, Mp[base + s]);
    float L = 0.f;
#pragma unroll
    for (int r = 0; r < 8; ++r) acc[r] = 0.f;
    const int nr = hd_v / 32;
#pragma unroll 4
    for (int s = s0; s <= s1; ++s) {
        const float c = expf(Mp[base + s] - M);
        L = fmaf(c, Lp[base + s], L);
#pragma unroll
        for (int r = 0; r < 8; ++r)
            if (r < nr) acc[r] = fmaf(c, Op[(base + s) * hd_v + lane + 32 * r], acc[r]);
    }
    return 1.0f / L;
}

extern "C" __global__ void attn_combine(const float* Op, const float* Mp, const float* Lp,
                                        int window, int n_head, int hd_v, int n_super,
                                        int super_len, float* A, const StepParams* sp) {
    const int h = blockIdx.x, t = blockIdx.y, lane = threadIdx.x;
    if ((u32)t >= sp->n_tok) return;
    const int pos = (int)(sp->pos0 + t);
    const size_t base = ((size_t)t * n_head + h) * n_super;
    float acc[8];
    const float inv =
        combine_head(Op, Mp, Lp, window, hd_v, n_super, super_len, pos, base, acc);
    const int nr = hd_v / 32;
#pragma unroll
    for (int r = 0; r < 8; ++r)
        if (r < nr) A[(size_t)t * n_head * hd_v + (size_t)h * hd_v + lane + 32 * r] = acc[r] * inv;
}

// Needs hd_v % 32 == 0 (checked on the host). XQ/XS/XSUM rows are n_head*hd_v wide.
extern "C" __global__ void attn_combine_q(const float* Op, const float* Mp, const float* Lp,
                                          int window, int n_head, int hd_v, int n_super,
                                          int super_len, float* A, const float* G,
                                          const StepParams* sp, short* XQ, float* XS,
                                          int* XSUM) {
    const int h = blockIdx.x, t = blockIdx.y, lane = threadIdx.x;
    if ((u32)t >= sp->n_tok) return;
    const int pos = (int)(sp->pos0 + t);
    const size_t base = ((size_t)t * n_head + h) * n_super;
    float acc[8];
    const float inv =
        combine_head(Op, Mp, Lp, window, hd_v, n_super, super_len, pos, base, acc);
    const int nr = hd_v / 32;
    const size_t width = (size_t)n_head * hd_v;
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        if (r < nr) {
            const size_t i0 = (size_t)h * hd_v + 32 * r;  // this group's first value in the row
            const size_t i = (size_t)t * width + i0 + lane;
            float v = acc[r] * inv;
            if (G) v = v / (1.0f + expf(-G[i]));
            A[i] = v;
            a16_group(v, XQ + (size_t)t * width + i0, XS + (size_t)t * (width / 32) + i0 / 32,
                      XSUM + (size_t)t * (width / 32) + i0 / 32);
        }
    }
}
