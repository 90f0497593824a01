// attention.cu — causal attention over the f16 KV cache, split over key ranges and combined in a
// fixed order (deterministic flash-decoding). Decode and prefill use the same kernels and the
// same absolute key partition, so a query's result depends only on its position and the cache.
//
// Q:  [n_tok][n_head*hd] f32
// Kc: [n_seq][cap][n_head_kv*hd] f16   Vc: [n_seq][cap][n_head_kv*hd_v] f16
// Op: [n_tok][n_head][n_super][hd_v] f32 (unnormalised partial outputs)
// Mp, Lp: [n_tok][n_head][n_super] f32 (running max and sum of each partial)
// A:  [n_tok][n_head*hd_v] f32
// Query t sits at pos = step_pos(t) (pos0 + t, or its packed row's own position) and sees keys
// lo..=pos, lo = window ? max(0, pos-window+1) : 0. Key p of the query's sequence s lives at
// cache row s * cap + p % cap (the caller guarantees rows lo..=pos are all present).
//
// attn_partial: grid (n_super, n_head / HPB, n_tok), block = HPB warps (HPB divides the GQA
// ratio, so one block's heads share one KV head and its K/V tiles), one warp per query head.
// Block b owns keys [b*S, (b+1)*S) (S = `super_len`, a multiple of 32), processed in tiles of
// 32 (tile boundaries absolute), online softmax in f32, tiles in order. HPB only changes which
// warps share a tile load, never a head's arithmetic; S fixes the partition (numerics).
// attn_combine: grid (n_head, n_tok), 32 threads or one warp per 32-value group of a head's
// output (hd_v threads; the same numbers); merges the partials of the visible blocks in
// block order. attn_combine_q: the same, then the output gate (G non-null: A / (1 + exp(-G)),
// the sigmoid_gate formula) and the A16 quantization of the row (a16_group per 32 values) —
// bit-identical to attn_combine → sigmoid_gate_q (strict math) or → quant_a16.

#define TILE 32

// 8 bytes global → shared, asynchronously; `ok` false writes zeros instead (cp.async zero fill).
__device__ __forceinline__ void cp_async8(void* dst, const void* src, bool ok) {
    const u32 d = (u32)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src),
                 "r"(ok ? 8 : 0));
}

// attn_partial's tiles: K [TILE][hd + 4] and V [TILE][hd_v + 4] f16 (the +4 pads keep the
// 8-byte row reads of 32 lanes on distinct banks), `nbuf` (1 or 2) of them so the next tile's
// copy overlaps this tile's arithmetic. Rows a query does not see are zero-filled.
__device__ __forceinline__ void attn_tile_copy(u16* Ks, u16* Vs, const u16* Kc, const u16* Vc,
                                               int cap, int kw, int vw, int kvh, int hd,
                                               int hd_v, int ts, int k0, int k1) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int j = w; j < TILE; j += nw) {  // one warp per row, 8 bytes per lane
        const int p = ts + j;
        const bool ok = p >= k0 && p <= k1;
        const u64 row = ok ? (u64)(p % cap) : 0;
        for (int c = lane; c < hd / 4; c += 32)
            cp_async8(Ks + j * (hd + 4) + 4 * c, Kc + row * kw + kvh * hd + 4 * c, ok);
        for (int c = lane; c < hd_v / 4; c += 32)
            cp_async8(Vs + j * (hd_v + 4) + 4 * c, Vc + row * vw + kvh * hd_v + 4 * c, ok);
    }
    cp_async_commit();
}

extern "C" __global__ void attn_partial(const float* Q, const u16* Kc, const u16* Vc, int cap,
                                        int window, float scale, int n_head, int n_head_kv,
                                        int hd, int hd_v, int n_super, int super_len, float* Op,
                                        float* Mp, float* Lp, const StepParams* sp, int nbuf) {
    PDL_ENTRY()
    extern __shared__ float smem[];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int G = blockDim.x >> 5;  // heads in this block (HPB)
    const int sb = blockIdx.x, t = blockIdx.z;
    const int h = blockIdx.y * G + w;
    const int kvh = h / (n_head / n_head_kv);
    if ((u32)t >= sp->n_tok) return;
    const int pos = (int)step_pos(sp, t);
    // This token's sequence: its ring is rows [seq * cap, seq * cap + cap) of the cache.
    const u64 seq_base = (u64)step_seq(sp, t) * (u64)cap;
    Kc += seq_base * (u64)(n_head_kv * hd);
    Vc += seq_base * (u64)(n_head_kv * hd_v);
    const int lo = window > 0 ? max(0, pos - window + 1) : 0;
    const int SUPER = super_len;
    const int b0 = max(lo, sb * SUPER), b1 = min(pos, sb * SUPER + SUPER - 1);
    if (b0 > b1) return;
    const int kst = hd + 4, vst = hd_v + 4;
    float* qs = smem;                       // [G][hd]
    float* ps = qs + G * hd;                // [G][TILE] the tile's probabilities per head
    u16* tiles = (u16*)(ps + G * TILE);     // [nbuf][TILE][kst] K, then [nbuf][TILE][vst] V
    const int kbuf = TILE * kst, vbuf = TILE * vst;
    const float* q = Q + (size_t)t * n_head * hd + (size_t)h * hd;
    for (int d = lane; d < hd; d += 32) qs[w * hd + d] = q[d];
    const int kw = n_head_kv * hd, vw = n_head_kv * hd_v;
    // The tiles holding b0..=b1 (absolute boundaries, as attn_partial_mt's).
    const int tA = sb * SUPER + ((b0 - sb * SUPER) / TILE) * TILE;
    const int tB = sb * SUPER + ((b1 - sb * SUPER) / TILE) * TILE;
    attn_tile_copy(tiles, tiles + nbuf * kbuf, Kc, Vc, cap, kw, vw, kvh, hd, hd_v, tA,
                   max(b0, tA), min(b1, tA + TILE - 1));
    float m = -MUSER_INF, l = 0.f;
    float acc[8];
#pragma unroll
    for (int r = 0; r < 8; ++r) acc[r] = 0.f;
    const float* qw = qs + w * hd;
    float* pw = ps + w * TILE;
    for (int ts = tA, it = 0; ts <= tB; ts += TILE, ++it) {
        const int k0 = max(b0, ts), k1 = min(b1, ts + TILE - 1);
        const int buf = nbuf == 2 ? (it & 1) : 0;
        const u16* Ks = tiles + buf * kbuf;
        const u16* Vs = tiles + nbuf * kbuf + buf * vbuf;
        if (nbuf == 2 && ts + TILE <= tB) {
            const int tn = ts + TILE;
            attn_tile_copy(tiles + (buf ^ 1) * kbuf, tiles + nbuf * kbuf + (buf ^ 1) * vbuf, Kc,
                           Vc, cap, kw, vw, kvh, hd, hd_v, tn, tn, min(b1, tn + TILE - 1));
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const int p = ts + lane;
        const bool valid = p >= k0 && p <= k1;
        float s = -MUSER_INF;
        if (valid) {
            float dot = 0.f;
            const u16* kr = Ks + lane * kst;
#pragma unroll 8
            for (int d = 0; d < hd; d += 4) {
                const uint2 k4 = *(const uint2*)(kr + d);
                const float4 q4 = *(const float4*)(qw + d);
                dot = fmaf(q4.x, h2f((u16)(k4.x & 0xFFFF)), dot);
                dot = fmaf(q4.y, h2f((u16)(k4.x >> 16)), dot);
                dot = fmaf(q4.z, h2f((u16)(k4.y & 0xFFFF)), dot);
                dot = fmaf(q4.w, h2f((u16)(k4.y >> 16)), dot);
            }
            s = dot * scale;
        }
        const float m_new = fmaxf(m, warp_max(s));
        const float corr = expf(m - m_new);
        const float pj = valid ? expf(s - m_new) : 0.f;
        l = l * corr + warp_sum(pj);
        pw[lane] = pj;
        __syncwarp();
        // Lane owns columns 128 g + 4 lane + r (r < 4): one 8-byte V read per row.
#pragma unroll
        for (int g = 0; g < 2; ++g) {
            const int c0 = 128 * g + 4 * lane;
            if (c0 < hd_v) {
                float a[4];
#pragma unroll
                for (int r = 0; r < 4; ++r) a[r] = acc[4 * g + r] * corr;
#pragma unroll
                for (int j = 0; j < TILE; j += 4) {
                    const float4 p4 = *(const float4*)(pw + j);
                    const float pj4[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
                    for (int jj = 0; jj < 4; ++jj) {
                        const uint2 v4 = *(const uint2*)(Vs + (j + jj) * vst + c0);
                        a[0] = fmaf(pj4[jj], h2f((u16)(v4.x & 0xFFFF)), a[0]);
                        a[1] = fmaf(pj4[jj], h2f((u16)(v4.x >> 16)), a[1]);
                        a[2] = fmaf(pj4[jj], h2f((u16)(v4.y & 0xFFFF)), a[2]);
                        a[3] = fmaf(pj4[jj], h2f((u16)(v4.y >> 16)), a[3]);
                    }
                }
#pragma unroll
                for (int r = 0; r < 4; ++r) acc[4 * g + r] = a[r];
            }
        }
        m = m_new;
        __syncthreads();  // every warp is done with this buffer (and pw) before it is refilled
        if (nbuf == 1 && ts + TILE <= tB) {
            const int tn = ts + TILE;
            attn_tile_copy(tiles, tiles + kbuf, Kc, Vc, cap, kw, vw, kvh, hd, hd_v, tn, tn,
                           min(b1, tn + TILE - 1));
        }
    }
    const size_t slot = ((size_t)t * n_head + h) * n_super + sb;
#pragma unroll
    for (int g = 0; g < 2; ++g) {
        const int c0 = 128 * g + 4 * lane;
        if (c0 < hd_v) {
#pragma unroll
            for (int r = 0; r < 4; ++r) Op[slot * hd_v + c0 + r] = acc[4 * g + r];
        }
    }
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
// its V chain as 0, exactly as attn_partial's zero-filled rows do. Same argument list as
// attn_partial (its last, `nbuf`, is unused here).
#define ATQ 8

extern "C" __global__ void attn_partial_mt(const float* Q, const u16* Kc, const u16* Vc, int cap,
                                           int window, float scale, int n_head, int n_head_kv,
                                           int hd, int hd_v, int n_super, int super_len,
                                           float* Op, float* Mp, float* Lp,
                                           const StepParams* sp, int nbuf_unused) {
    PDL_ENTRY()
    extern __shared__ float smem[];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int G = blockDim.x >> 5;
    const int sb = blockIdx.x, t0 = blockIdx.z * ATQ;
    const int h = blockIdx.y * G + w;
    const int kvh = h / (n_head / n_head_kv);
    const int n_tok = (int)sp->n_tok;
    const int SUPER = super_len;
    // One sequence per step (the host never launches this kernel on packed decode rows).
    Kc += (u64)sp->seq0 * (u64)cap * (u64)(n_head_kv * hd);
    Vc += (u64)sp->seq0 * (u64)cap * (u64)(n_head_kv * hd_v);
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

// COMBINE_WIDE (`MUSER_CUDA_COMBINE_WIDE=N`, N > 0; the host's default 8): combine_head's
// one-group-per-warp path below for heads of at least N visible partials (0: never) — in the
// WIDE instances only (attn_combine_m_wide, the f16 route's decode launches): compiled into the
// prefill's combine it cost pp512 1.3% at depth 0, where no head reaches 8 partials (session 33).
#ifndef COMBINE_WIDE
#define COMBINE_WIDE 0
#endif
// COMBINE_PIPE (`MUSER_CUDA_COMBINE_PIPE=1`, with the wide path): the next chunk's partials are
// requested before the current chunk's multiply-adds, so a head of 256 partials (depth 32768,
// 128-key partials) pays about one load round trip instead of eight. The same bits.
#ifndef COMBINE_PIPE
#define COMBINE_PIPE 0
#endif

// Lane j's partial of a chunk of `cnt` from partial c0 (0 past the chunk): its weight
// expf(Mp − M) and its L — one definition for both paths of combine_head (the same bits).
__device__ __forceinline__ void combine_weights(const float* __restrict__ Mp,
                                                const float* __restrict__ Lp, size_t base, int c0,
                                                int cnt, float M, float& ck, float& lk) {
    const int lane = threadIdx.x & 31;
    ck = 0.f, lk = 0.f;
    if (lane < cnt) {
        ck = expf(Mp[base + c0 + lane] - M);
        lk = Lp[base + c0 + lane];
    }
}

// The wide path's multiply-adds of one chunk of `cnt` partials (lane j's weight ck and L lk,
// every lane's outputs o[j] of its group), in partial order.
__device__ __forceinline__ void combine_chunk(float ck, float lk, const float (&o)[32], int cnt,
                                              float& L, float& a) {
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        const float c = __shfl_sync(0xffffffffu, ck, j);
        const float l = __shfl_sync(0xffffffffu, lk, j);
        if (j < cnt) {
            L = fmaf(c, l, L);
            a = fmaf(c, o[j], a);
        }
    }
}

// The merged (unnormalised acc, 1/L) of one head's visible partials, in block order. Called by
// a whole warp. The maximum M is order-free (fmaxf is exact), so lanes scan strided shares and a
// butterfly finishes; each partial's weight expf(Mp - M) is computed by one lane and shuffled to
// the others; L and acc then take the partials' fused multiply-adds strictly in block order, as
// a one-lane scan would. Partials' outputs are loaded four at a time before their (dependent)
// multiply-adds, so the loads overlap instead of forming one latency chain per partial. Only
// the 32-value groups r with bit r of `rmask` set are computed (`combine_groups`).
template <bool WIDE>
__device__ __forceinline__ float combine_head(const float* __restrict__ Op,
                                              const float* __restrict__ Mp,
                                              const float* __restrict__ Lp, int window, int hd_v,
                                              int n_super, int super_len, int pos, size_t base,
                                              unsigned rmask, float* acc) {
    const int lane = threadIdx.x & 31;
    const int lo = window > 0 ? max(0, pos - window + 1) : 0;
    const int s0 = lo / super_len, s1 = pos / super_len;
    if (s1 >= n_super) __trap();  // the host sized the partials for fewer positions: fail loudly
    float M = -MUSER_INF;
    for (int s = s0 + lane; s <= s1; s += 32) M = fmaxf(M, Mp[base + s]);
    M = warp_max(M);
    float L = 0.f;
#pragma unroll
    for (int r = 0; r < 8; ++r) acc[r] = 0.f;
#if COMBINE_WIDE
    // One group per warp (hd_v threads per block, the engine's launch): each chunk's 32
    // partials are loaded at once — one round trip per 32 partials instead of per 4 — then the
    // same multiply-adds in the same order (the same bits).
    if (WIDE && __popc(rmask) == 1 && s1 - s0 + 1 >= COMBINE_WIDE) {  // warp-uniform
        const int r = __ffs(rmask) - 1;
        float a = 0.f;
        // Chunk c0's weights and outputs (0 past the chunk).
        auto fetch = [&](int c0, float& ck, float& lk, float (&o)[32]) {
            const int cnt = min(32, s1 - c0 + 1);  // warp-uniform
            combine_weights(Mp, Lp, base, c0, cnt, M, ck, lk);
#pragma unroll
            for (int j = 0; j < 32; ++j)
                o[j] = j < cnt ? Op[(base + c0 + j) * hd_v + lane + 32 * r] : 0.f;
        };
#if COMBINE_PIPE
        // The next chunk's are requested before this one's multiply-adds (the same values into
        // the same operations).
        float ck, lk, o[32];
        fetch(s0, ck, lk, o);
        for (int c0 = s0; c0 <= s1; c0 += 32) {
            const int cnt = min(32, s1 - c0 + 1);  // warp-uniform
            float nck = 0.f, nlk = 0.f, no[32];
            if (c0 + 32 <= s1) fetch(c0 + 32, nck, nlk, no);
            combine_chunk(ck, lk, o, cnt, L, a);
            ck = nck, lk = nlk;
#pragma unroll
            for (int j = 0; j < 32; ++j) o[j] = no[j];
        }
#else
        for (int c0 = s0; c0 <= s1; c0 += 32) {
            float ck, lk, o[32];
            fetch(c0, ck, lk, o);
            combine_chunk(ck, lk, o, min(32, s1 - c0 + 1), L, a);
        }
#endif
#pragma unroll
        for (int q = 0; q < 8; ++q)
            if (q == r) acc[q] = a;
        return 1.0f / L;
    }
#endif
    for (int c0 = s0; c0 <= s1; c0 += 32) {
        const int cnt = min(32, s1 - c0 + 1);  // warp-uniform
        float ck, lk;
        combine_weights(Mp, Lp, base, c0, cnt, M, ck, lk);
        for (int k = 0; k < cnt; k += 4) {
            float o[4][8];
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int r = 0; r < 8; ++r)
                    o[j][r] = (((rmask >> r) & 1u) && k + j < cnt)
                                  ? Op[(base + c0 + k + j) * hd_v + lane + 32 * r]
                                  : 0.f;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float c = __shfl_sync(0xffffffffu, ck, (k + j) & 31);
                const float l = __shfl_sync(0xffffffffu, lk, (k + j) & 31);
                if (k + j < cnt) {
                    L = fmaf(c, l, L);
#pragma unroll
                    for (int r = 0; r < 8; ++r)
                        if ((rmask >> r) & 1u) acc[r] = fmaf(c, o[j][r], acc[r]);
                }
            }
        }
    }
    return 1.0f / L;
}

// The 32-value groups of a head's output this warp computes: warp w of a block of `nw` warps
// takes groups w, w + nw, … (one warp per group with hd_v threads, all groups with 32). Every
// group's numbers are the same whichever warp computes it.
__device__ __forceinline__ unsigned combine_groups(int hd_v) {
    const int w = threadIdx.x >> 5, nw = blockDim.x >> 5, nr = hd_v / 32;
    unsigned m = 0;
    for (int r = w; r < nr; r += nw) m |= 1u << r;
    return m;
}

// This block's merged head (blockIdx.x) of token blockIdx.y: its 32-value groups `rmask`, the
// unnormalised sums `acc` and 1/L `inv`; false when the token is past the step.
template <bool WIDE = false>
__device__ __forceinline__ bool combine_block(const float* Op, const float* Mp, const float* Lp,
                                              int window, int n_head, int hd_v, int n_super,
                                              int super_len, const StepParams* sp,
                                              unsigned& rmask, float (&acc)[8], float& inv) {
    const int h = blockIdx.x, t = blockIdx.y;
    if ((u32)t >= sp->n_tok) return false;
    const int pos = (int)step_pos(sp, t);
    const size_t base = ((size_t)t * n_head + h) * n_super;
    rmask = combine_groups(hd_v);
    inv = combine_head<WIDE>(Op, Mp, Lp, window, hd_v, n_super, super_len, pos, base, rmask,
                             acc);
    return true;
}

// One merged output value, gated when G is given: sigmoid_gate's formula (bit-identical to it
// in strict math).
__device__ __forceinline__ float combine_out(float acc, float inv, const float* G, size_t i) {
    const float v = acc * inv;
    return G ? ew_sigmoid_gate(v, G[i]) : v;
}

extern "C" __global__ void attn_combine(const float* Op, const float* Mp, const float* Lp,
                                        int window, int n_head, int hd_v, int n_super,
                                        int super_len, float* A, const StepParams* sp) {
    PDL_ENTRY()
    const int h = blockIdx.x, t = blockIdx.y, lane = threadIdx.x & 31;
    unsigned rmask;
    float acc[8], inv;
    if (!combine_block(Op, Mp, Lp, window, n_head, hd_v, n_super, super_len, sp, rmask, acc, inv))
        return;
#pragma unroll
    for (int r = 0; r < 8; ++r)
        if ((rmask >> r) & 1u)
            A[(size_t)t * n_head * hd_v + (size_t)h * hd_v + lane + 32 * r] = acc[r] * inv;
}

// attn_combine and, with G, the output gate (ew_sigmoid_gate: bit-identical to sigmoid_gate in
// strict math), also folding each token's largest magnitude over its row of n_head * hd_v
// values into M[t] (atomicMax on the bits, a NaN as 0: exact in any order; M zeroed before the
// step) — the f16 route's row maxima (MUSER_CUDA_H16_ROWMAX, on by default), the same numbers
// as attn_combine → sigmoid_gate_m. Needs hd_v % 32 == 0.
// The body of attn_combine_m: false when the token is past the step.
template <bool WIDE = false>
__device__ __forceinline__ bool combine_m_body(const float* Op, const float* Mp, const float* Lp,
                                               int window, int n_head, int hd_v, int n_super,
                                               int super_len, float* A, const float* G,
                                               const StepParams* sp, u32* M) {
    const int h = blockIdx.x, t = blockIdx.y, lane = threadIdx.x & 31;
    unsigned rmask;
    float acc[8], inv;
    if (!combine_block<WIDE>(Op, Mp, Lp, window, n_head, hd_v, n_super, super_len, sp, rmask, acc,
                             inv))
        return false;
    const size_t width = (size_t)n_head * hd_v;
    float amax = 0.f;
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        if ((rmask >> r) & 1u) {
            const size_t i = (size_t)t * width + (size_t)h * hd_v + 32 * r + lane;
            const float v = combine_out(acc[r], inv, G, i);
            A[i] = v;
            amax = fmaxf(amax, v == v ? fabsf(v) : 0.f);
        }
    }
    amax = warp_max(amax);
    if (lane == 0) atomicMax(M + t, __float_as_uint(amax));
    return true;
}

extern "C" __global__ void attn_combine_m(const float* Op, const float* Mp, const float* Lp,
                                          int window, int n_head, int hd_v, int n_super,
                                          int super_len, float* A, const float* G,
                                          const StepParams* sp, u32* M) {
    PDL_ENTRY()
    combine_m_body(Op, Mp, Lp, window, n_head, hd_v, n_super, super_len, A, G, sp, M);
}
// attn_combine_m with the wide path (COMBINE_WIDE above): the same bits; the engine launches it
// for decode steps (one token, or packed rows).
extern "C" __global__ void attn_combine_m_wide(const float* Op, const float* Mp, const float* Lp,
                                               int window, int n_head, int hd_v, int n_super,
                                               int super_len, float* A, const float* G,
                                               const StepParams* sp, u32* M) {
    PDL_ENTRY()
    combine_m_body<true>(Op, Mp, Lp, window, n_head, hd_v, n_super, super_len, A, G, sp, M);
}

// attn_combine_m, then the f16 route's activations of the token's row in the token's last block
// to finish (`MUSER_CUDA_H16_COMBINE_ACT=1`): every block fences its writes of A and M and takes
// a ticket from T[t] (zeroed before the step, like M); the block taking ticket n_head − 1 reads
// the row and M[t] through L2 and writes XH / XSUM / XSUM16 / XINV with act_h16_m's arithmetic
// (h16_shift of M[t], h16_unit_vals per 32-value unit) — the same bits as attn_combine_m followed
// by act_h16_m, one launch fewer. Grid (n_head, n_tok), any multiple of 32 threads; needs
// hd_v % 32 == 0 (the host's check for every combine).
extern "C" __global__ void attn_combine_h16(const float* Op, const float* Mp, const float* Lp,
                                            int window, int n_head, int hd_v, int n_super,
                                            int super_len, float* A, const float* G,
                                            const StepParams* sp, u32* M, u32* T, u16* XH,
                                            u16* XSUM, u16* XSUM16, float* XINV) {
    __shared__ int last;
    PDL_ENTRY()
    const int t = blockIdx.y;
    if (!combine_m_body(Op, Mp, Lp, window, n_head, hd_v, n_super, super_len, A, G, sp, M))
        return;  // the whole block: t is past the step
    __threadfence();  // this thread's A and M writes before the block's ticket
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(T + t, 1u) == (u32)gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();  // the other blocks' writes (their tickets came first) before the reads
    const int K = n_head * hd_v;
    const int sh = h16_shift(__uint_as_float(__ldcg(M + t)));
    if (threadIdx.x == 0) XINV[t] = ldexpf(1.f, -sh);
    const float* x = A + (size_t)t * K;
    for (int u = threadIdx.x; u < K / 32; u += blockDim.x) {
        float v[32];
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            const float4 f = __ldcg((const float4*)(x + 32 * u) + q);
            v[4 * q] = f.x, v[4 * q + 1] = f.y, v[4 * q + 2] = f.z, v[4 * q + 3] = f.w;
        }
        h16_unit_vals(v, u, ldexpf(1.f, sh), XH + (size_t)t * K, XSUM + (size_t)t * (K / 32),
                      XSUM16 + (size_t)t * (K / 16));
    }
}

// attn_combine_m_wide followed by act_h16_m as one launch (`MUSER_CUDA_COMBINE_CL=1`, decode
// steps): each token's heads as one thread-block cluster of C = gridDim.x blocks (grid (C,
// n_tok), cluster (C, 1, 1); C <= 8 divides n_head), block c merging heads c·hpb .. c·hpb + hpb
// − 1 (hpb = n_head / C) with one warp per 32-value group (blockDim = hpb · hd_v), so every
// group's numbers are attn_combine_m_wide's (combine_head does not depend on which warp runs
// it). The row's largest magnitude — act_h16_m's M[t], exact in any order — is each block's
// maximum, exchanged through distributed shared memory (slot c of every block), one cluster
// barrier; then each block converts its own hpb · hd_v values (its own writes of A, after a
// block barrier) with act_h16_m's arithmetic (h16_shift of the maximum, h16_unit per 32-value
// unit). The same bits as attn_combine_m_wide → act_h16_m, one launch fewer; M is not written.
extern "C" __global__ void attn_combine_h16_cl(const float* Op, const float* Mp, const float* Lp,
                                               int window, int n_head, int hd_v, int n_super,
                                               int super_len, float* A, const float* G,
                                               const StepParams* sp, u16* XH, u16* XSUM,
                                               u16* XSUM16, float* XINV) {
    __shared__ float redw[32];  // the block's warp maxima
    __shared__ float redc[8];   // the cluster's block maxima, slot c from block c
    const int t = blockIdx.y;
    if ((u32)t >= sp->n_tok) return;  // the whole cluster (it spans x only)
    const u32 rank = cl_rank(), C = gridDim.x;
    // Every block of the cluster must have started before any writes into its shared memory:
    // this arrive pairs with the wait before the exchange.
    cl_arrive();
    PDL_ENTRY()
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int ng = hd_v / 32, hpb = n_head / (int)C;
    const int h = (int)rank * hpb + w / ng, r = w % ng;  // this warp's head and group
    const int pos = (int)step_pos(sp, t);
    const size_t base = ((size_t)t * n_head + h) * n_super;
    float acc[8];
    const float inv = combine_head<true>(Op, Mp, Lp, window, hd_v, n_super, super_len, pos, base,
                                         1u << r, acc);
    const int K = n_head * hd_v;
    const size_t i = (size_t)t * K + (size_t)h * hd_v + 32 * r + lane;
    const float v = combine_out(acc[r], inv, G, i);
    A[i] = v;
    const float m = warp_max(v == v ? fabsf(v) : 0.f);
    if (lane == 0) redw[w] = m;
    __syncthreads();  // redw, and this block's A values for the conversion below
    cl_wait();
    if (w == 0) {
        const float bm = warp_max(lane < nw ? redw[lane] : 0.f);
        if (lane < (int)C) cl_st(cl_map(redc + rank, (u32)lane), bm);
    }
    cl_arrive();
    cl_wait();
    const int sh = h16_shift(warp_max(lane < (int)C ? redc[lane] : 0.f));
    if (rank == 0 && threadIdx.x == 0) XINV[t] = ldexpf(1.f, -sh);
    const int nu = hpb * hd_v / 32, u = (int)rank * nu + (int)threadIdx.x;  // this block's units
    if ((int)threadIdx.x < nu)
        h16_unit(A + (size_t)t * K, u, ldexpf(1.f, sh), XH + (size_t)t * K,
                 XSUM + (size_t)t * (K / 32), XSUM16 + (size_t)t * (K / 16));
}

// Needs hd_v % 32 == 0 (checked on the host). XQ/XS/XSUM rows are n_head*hd_v wide; the
// quantization is the format XQ names (attn_combine_q: A16, attn_combine_q8: A8).
template <class XE>
__device__ __forceinline__ void attn_combine_q_body(const float* Op, const float* Mp,
                                                    const float* Lp, int window, int n_head,
                                                    int hd_v, int n_super, int super_len,
                                                    float* A, const float* G,
                                                    const StepParams* sp, XE* XQ, float* XS,
                                                    int* XSUM) {
    PDL_ENTRY()
    const int h = blockIdx.x, t = blockIdx.y, lane = threadIdx.x & 31;
    unsigned rmask;
    float acc[8], inv;
    if (!combine_block(Op, Mp, Lp, window, n_head, hd_v, n_super, super_len, sp, rmask, acc, inv))
        return;
    const size_t width = (size_t)n_head * hd_v;
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        if ((rmask >> r) & 1u) {
            const size_t i0 = (size_t)h * hd_v + 32 * r;  // this group's first value in the row
            const size_t i = (size_t)t * width + i0 + lane;
            const float v = combine_out(acc[r], inv, G, i);
            A[i] = v;
            quant_group(v, XQ + (size_t)t * width + i0, XS + (size_t)t * (width / 32) + i0 / 32,
                        XSUM + (size_t)t * (width / 32) + i0 / 32);
        }
    }
}
extern "C" __global__ void attn_combine_q(const float* Op, const float* Mp, const float* Lp,
                                          int window, int n_head, int hd_v, int n_super,
                                          int super_len, float* A, const float* G,
                                          const StepParams* sp, short* XQ, float* XS,
                                          int* XSUM) {
    attn_combine_q_body(Op, Mp, Lp, window, n_head, hd_v, n_super, super_len, A, G, sp, XQ, XS,
                        XSUM);
}
extern "C" __global__ void attn_combine_q8(const float* Op, const float* Mp, const float* Lp,
                                           int window, int n_head, int hd_v, int n_super,
                                           int super_len, float* A, const float* G,
                                           const StepParams* sp, signed char* XQ, float* XS,
                                           int* XSUM) {
    attn_combine_q_body(Op, Mp, Lp, window, n_head, hd_v, n_super, super_len, A, G, sp, XQ, XS,
                        XSUM);
}
