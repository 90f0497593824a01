// attn_h16.cu — the f16 route's attention partials on the tensor cores (MUSER_CUDA_H16_ATTN=mma,
// the f16 route's default): the same split of the key range as attention.cu (super-blocks of
// `super_len` keys, tiles of 32 at absolute boundaries, online softmax tile by tile) and the same
// partial buffers, so attention.cu's combines merge them unchanged. What differs is the
// arithmetic of one tile, done by mma.sync.m16n8k16 (f16 × f16 → f32) on rows of 16 queries:
//
//   q16 = f16(q) (round to nearest); S = q16 · K (f32, the 16-value k-steps in ascending d, each
//   one MMA); s = S · scale; row max over the tile's visible keys; corr = exp(m − m_new);
//   p16 = f16(exp(s − m_new)) (0 for a key the row does not see); l = l · corr + Σ p16 (each
//   lane's 8 values in order, then the quad's butterfly); O = O · corr, then O += P16 · V (the
//   two 16-key k-steps in order).
//
// A row is one (query token, query head) of the block's KV head; the MMA's rows are
// independent, so which rows share a warp or a block is launch only: a query's partial depends on
// its position, its head and the cache alone. Decode (and packed rows: each row its own
// sequence) launches one token per block; prefill `tpb` tokens of one sequence per block, so one
// K/V tile load serves `tpb` · gqa rows. A row that sees none of a tile in a block that loads it
// keeps its state: corr = 1 and P = 0 (its MMA adds exact zeros). Keys a row does not see enter
// its P·V as p = 0 against the tile's rows (zero-filled outside the block's union) — the same
// bits as long as V is finite (device test `attention_h16_decode_and_prefill_agree_bit_for_bit`).
//
// Q:  [n_tok][n_head*HD] f32
// Kc: [n_seq][cap][n_head_kv*HD] f16   Vc: [n_seq][cap][n_head_kv*HDV] f16
// Op: [n_tok][n_head][n_super][HDV] f32; Mp, Lp: [n_tok][n_head][n_super] f32 (attention.cu)
// Grid (n_super, n_head_kv, ceil(n_tok / tpb)), block W warps (16·W/CS >= tpb · gqa rows:
// row R = local token R / gqa, head R % gqa). CS (the `_c4` kernels: 4; else 1) warps share
// each 16 rows, each computing the rows' scores and softmax (the same operations on the same
// values: the same bits in every warp) and a 1/CS share of the output columns' P·V — an output
// column's operations are those of CS = 1, so the partials are the same bits; a decode block's
// 4 warps then split its one tile chain instead of one warp running it alone.
// Shared memory: a ring of `nbuf` (>= 2) K tiles [32][HD + 8], then `nbuf` V tiles
// [32][HDV + 8] f16 (rows 16-byte aligned; the 8-value pad keeps ldmatrix conflict-free); decode
// takes a super-block's tiles in flight at once.

#define AH_TILE 32

// ATTN_EARLY (`MUSER_CUDA_ATTN_EARLY=0|1`, default 1): the block's tiles whose keys all precede
// the step's first written position (one sequence: pos0; packed rows: the block's row's) are
// requested before the PDL wait (common.cuh's invariant: no kernel of the step writes those K / V
// rows — earlier steps did; the step writes its positions from there on, and a visible key's
// ring slot is never one of theirs: the ring holds the window and the chunk) — and the rest right
// after the wait, before Q's loads, so neither waits behind the other. The same tiles into the
// same buffers: the same bits.
#ifndef ATTN_EARLY
#define ATTN_EARLY 0
#endif

// ATTN_FLAT_EXP (`MUSER_CUDA_ATTN_FLAT_EXP=0|1`, default 1): the tile's
// softmax `expf`s without branches. The plain form `x == -inf ? 0 : f2h(expf(x − m))` compiles
// (strict math) to a branch around each `expf`'s ~10-instruction sequence — 18 dependent
// regions per row pair and tile, one `MUFU.EX2` at a time. The flat form selects the argument
// instead (−inf where the plain form writes 0) and runs every `expf`, so the regions interleave:
// expf(−inf) is +0 exactly and f2h(+0) is the plain form's 0, every other argument is the plain
// form's — the same bits. Likewise `corr`: expf(see ? m − m_new : 0), then 1 where !see.
#ifndef ATTN_FLAT_EXP
#define ATTN_FLAT_EXP 0
#endif

// ATTN_ROWCOPY (`MUSER_CUDA_ATTN_ROWCOPY=0|1`, default 1): a tile's copies
// issued row by row — 8 lanes per key row, each lane its 16-byte chunks c, c + 8, … of the K
// row and of the V row, the row's ring slot (`p % cap`) computed once per row — instead of one
// loop iteration per chunk, each with its own signed division by `cap` (static SASS: ~60
// instructions and a `MUFU.RCP` chain per 16 bytes, the loop not unrolled: 32 dependent
// iterations per thread for a decode block's 4 tiles before its computing warp starts). The
// same bytes into the same places (rows outside [u0, u1] zero-filled): the same bits.
#ifndef ATTN_ROWCOPY
#define ATTN_ROWCOPY 0
#endif

// The softmax's weights: P = f16(exp(sc − m_new)), 0 for a key the row does not see (sc = −inf),
// and the rescale exp(m − m_new), 1 for a row that sees none of the tile (ATTN_FLAT_EXP above).
__device__ __forceinline__ u16 ah_p16(float sc, float m_new) {
    if (ATTN_FLAT_EXP) return f2h(expf(sc == -MUSER_INF ? -MUSER_INF : sc - m_new));
    return sc == -MUSER_INF ? (u16)0 : f2h(expf(sc - m_new));
}
__device__ __forceinline__ float ah_corr(bool see, float m, float m_new) {
    if (ATTN_FLAT_EXP) {
        const float ce = expf(see ? m - m_new : 0.f);
        return see ? ce : 1.f;
    }
    return see ? expf(m - m_new) : 1.f;
}

// 16 bytes global → shared, asynchronously; `ok` false writes zeros (cp.async zero fill).
__device__ __forceinline__ void ah_cp16(u32 dst, const void* src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void ldsm_x4(u32 addr, u32 (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(u32 addr, u32 (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
// Two floats as an f16 pair (low half first), each rounded to nearest.
__device__ __forceinline__ u32 ah_pack(float lo, float hi) {
    return (u32)f2h(lo) | ((u32)f2h(hi) << 16);
}

// One tile's K and V rows ts..ts+31 (rows outside [u0, u1] zero-filled) into buffer `buf`.
template <int HD, int HDV>
__device__ __forceinline__ void ah_tile_copy(u32 ks, u32 vs, const u16* Kc, const u16* Vc,
                                             int cap, int kw, int vw, int kvh, int ts, int u0,
                                             int u1) {
    constexpr int KC = HD / 8, VC = HDV / 8;  // 16-byte chunks per row
#if ATTN_ROWCOPY
    static_assert(KC % 8 == 0 && VC % 8 == 0, "8 lanes per row take the chunks in turn");
    const int c8 = threadIdx.x & 7;
    for (int j = threadIdx.x >> 3; j < AH_TILE; j += blockDim.x >> 3) {
        const int p = ts + j;
        const bool ok = p >= u0 && p <= u1;
        const u64 row = ok ? (u64)((u32)p % (u32)cap) : 0;  // p >= u0 >= 0 when ok
        const u16* kr = Kc + row * kw + kvh * HD;
        const u16* vr = Vc + row * vw + kvh * HDV;
        const u32 kd = ks + (u32)(j * (HD + 8)) * 2, vd = vs + (u32)(j * (HDV + 8)) * 2;
#pragma unroll
        for (int ch = c8; ch < KC; ch += 8) ah_cp16(kd + 16 * ch, kr + 8 * ch, ok);
#pragma unroll
        for (int ch = c8; ch < VC; ch += 8) ah_cp16(vd + 16 * ch, vr + 8 * ch, ok);
    }
    cp_async_commit();
    return;
#endif
    for (int i = threadIdx.x; i < AH_TILE * (KC + VC); i += blockDim.x) {
        const bool isk = i < AH_TILE * KC;
        const int ii = isk ? i : i - AH_TILE * KC, cw = isk ? KC : VC;
        const int j = ii / cw, ch = ii % cw, p = ts + j;
        const bool ok = p >= u0 && p <= u1;
        const u64 row = ok ? (u64)(p % cap) : 0;
        if (isk)
            ah_cp16(ks + (u32)(j * (HD + 8) + 8 * ch) * 2, Kc + row * kw + kvh * HD + 8 * ch, ok);
        else
            ah_cp16(vs + (u32)(j * (HDV + 8) + 8 * ch) * 2, Vc + row * vw + kvh * HDV + 8 * ch,
                    ok);
    }
    cp_async_commit();
}

template <int HD, int HDV, int CS>
__device__ __forceinline__ void attn_h16_body(const float* Q, const u16* Kc, const u16* Vc,
                                              int cap, int window, float scale, int n_head,
                                              int n_head_kv, int n_super, int super_len, int tpb,
                                              int nbuf, float* Op, float* Mp, float* Lp,
                                              const StepParams* sp) {
    if (!ATTN_EARLY) {
        pdl_wait();
        pdl_trigger();
    }
    constexpr int KT = HD / 16;   // k-steps of Q·K
    constexpr int NV = HDV / 8;   // 8-column tiles of the output
    constexpr int NW = NV / CS;   // this warp's: tiles cw0 .. cw0 + NW − 1
    static_assert(NW % 2 == 0, "P·V takes the column tiles in pairs");
    constexpr int KST = HD + 8, VST = HDV + 8;
    extern __shared__ __align__(16) u16 ah_smem[];
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const int w = (threadIdx.x >> 5) / CS, cw0 = ((threadIdx.x >> 5) % CS) * NW;  // rows, columns
    const int sb = blockIdx.x, kvh = blockIdx.y, tb = blockIdx.z * tpb;
    const int gqa = n_head / n_head_kv, n_tok = (int)sp->n_tok, S = super_len;
    if (tb >= n_tok) return;
    if (sp->per_row && tpb != 1) __trap();  // packed rows are different sequences: one per block
    if (nbuf < 1 || nbuf > 4) __trap();     // the ring's waits below count up to 3 pending tiles
    const int t_last = min(tb + tpb, n_tok) - 1;
    // The block's union of visible keys in this super-block (consecutive tokens of one sequence:
    // their ranges overlap, so the union is one interval).
    const int pos_f = (int)step_pos(sp, tb), pos_l = (int)step_pos(sp, t_last);
    const int u0 = max(window > 0 ? max(0, pos_f - window + 1) : 0, sb * S);
    const int u1 = min(pos_l, sb * S + S - 1);
    if (u0 > u1) return;  // block-uniform
    const u64 seq_base = (u64)step_seq(sp, tb) * (u64)cap;
    const int kw = n_head_kv * HD, vw = n_head_kv * HDV;
    Kc += seq_base * (u64)kw;
    Vc += seq_base * (u64)vw;
    // This lane's two rows (g and g + 8 of the warp's 16): token, head, visible keys [b0, b1].
    int tok[2], head[2], b0[2], b1[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        const int R = w * 16 + g + 8 * e, i = R / gqa, t = tb + i;
        tok[e] = t;
        head[e] = kvh * gqa + R % gqa;
        b0[e] = 1;
        b1[e] = 0;
        if (i < tpb && t < n_tok) {
            const int pos = (int)step_pos(sp, t);
            const int lo = window > 0 ? max(0, pos - window + 1) : 0;
            b0[e] = max(lo, sb * S);
            b1[e] = min(pos, sb * S + S - 1);
        }
    }
    // Q in f16 A fragments: qa[kk] = rows (g, g + 8), columns 16 kk + 2c (+1) and + 8 (loaded
    // before the first tile's copies, or with ATTN_EARLY after them).
    u32 qa[KT][4];
    auto load_q = [&]() {
#pragma unroll
        for (int kk = 0; kk < KT; ++kk) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float2 lo = make_float2(0.f, 0.f), hi = lo;
                if (b0[e] <= b1[e]) {
                    const float* q = Q + ((size_t)tok[e] * n_head + head[e]) * HD + 16 * kk + 2 * c;
                    lo = *(const float2*)q;
                    hi = *(const float2*)(q + 8);
                }
                qa[kk][e] = ah_pack(lo.x, lo.y);
                qa[kk][2 + e] = ah_pack(hi.x, hi.y);
            }
        }
    };
    if (!ATTN_EARLY) load_q();
    const u32 sbase = (u32)__cvta_generic_to_shared(ah_smem);
    const u32 kbytes = AH_TILE * KST * 2, vbytes = AH_TILE * VST * 2;
    const u32 kbuf0 = sbase, vbuf0 = sbase + nbuf * kbytes;
    const int tA = sb * S + ((u0 - sb * S) / AH_TILE) * AH_TILE;
    const int tB = sb * S + ((u1 - sb * S) / AH_TILE) * AH_TILE;
    const int ntiles = (tB - tA) / AH_TILE + 1;
    // A ring of `nbuf` tiles: tile i in buffer i % nbuf, the first min(nbuf, ntiles) copies in
    // flight at once, each later one issued as soon as its buffer's tile is done.
    int issued = 0;
    if (ATTN_EARLY) {
        // Tiles ending before the step's first written position: before the wait.
        const int safe_end = (int)step_pos(sp, sp->per_row ? tb : 0);
        for (; issued < min(nbuf, ntiles) && tA + issued * AH_TILE + AH_TILE <= safe_end; ++issued)
            ah_tile_copy<HD, HDV>(kbuf0 + issued * kbytes, vbuf0 + issued * vbytes, Kc, Vc, cap,
                                  kw, vw, kvh, tA + issued * AH_TILE, u0, u1);
        pdl_wait();
        pdl_trigger();
    }
    for (; issued < min(nbuf, ntiles); ++issued)
        ah_tile_copy<HD, HDV>(kbuf0 + issued * kbytes, vbuf0 + issued * vbytes, Kc, Vc, cap, kw,
                              vw, kvh, tA + issued * AH_TILE, u0, u1);
    if (ATTN_EARLY) load_q();
    float m[2] = {-MUSER_INF, -MUSER_INF}, l[2] = {0.f, 0.f};
    float acc[NW][4];
#pragma unroll
    for (int j = 0; j < NW; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[j][r] = 0.f;
    // ldmatrix row addresses (bytes within a tile): lane i feeds row i % 8 of matrix i / 8.
    const int mi = lane >> 3, mr = lane & 7;
    // K (non-transposed, B of Q·K): matrix mi = keys 8j + mr, d 16kk + 8 mi (two k-steps per x4).
    const u32 koff = (u32)(mr * KST + 8 * mi) * 2;
    // V (transposed, B of P·V): matrix mi = keys 16kk + mr + 8 (mi & 1), columns 8 (jn + mi / 2).
    const u32 voff = (u32)((mr + 8 * (mi & 1)) * VST + 8 * (mi >> 1)) * 2;
    for (int it = 0; it < ntiles; ++it) {
        const int ts = tA + it * AH_TILE, buf = it % nbuf;
        // Tile `it` has landed once at most (issued − it − 1) later groups are pending.
        switch (min(issued - it - 1, 3)) {
            case 0: cp_async_wait<0>(); break;
            case 1: cp_async_wait<1>(); break;
            case 2: cp_async_wait<2>(); break;
            default: cp_async_wait<3>(); break;
        }
        __syncthreads();
        const u32 ks = kbuf0 + buf * kbytes, vs = vbuf0 + buf * vbytes;
        int k0[2], k1[2];
        bool see[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            k0[e] = max(b0[e], ts);
            k1[e] = min(b1[e], ts + AH_TILE - 1);
            see[e] = k0[e] <= k1[e];
        }
        if (__any_sync(0xffffffffu, see[0] || see[1])) {
            float s[4][4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
#pragma unroll
                for (int r = 0; r < 4; ++r) s[j][r] = 0.f;
#pragma unroll
                for (int kk = 0; kk < KT; kk += 2) {
                    u32 b[4];
                    ldsm_x4(ks + koff + (u32)(8 * j * KST + 16 * kk) * 2, b);
                    mma_h16(s[j], qa[kk], b[0], b[1]);
                    mma_h16(s[j], qa[kk + 1], b[2], b[3]);
                }
            }
            float corr[2];
            u32 pa[2][4];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float mx = -MUSER_INF;
#pragma unroll
                for (int j = 0; j < 4; ++j)
#pragma unroll
                    for (int q = 0; q < 2; ++q) {
                        const int key = ts + 8 * j + 2 * c + q;
                        const bool valid = see[e] && key >= k0[e] && key <= k1[e];
                        const float sc = valid ? s[j][2 * e + q] * scale : -MUSER_INF;
                        s[j][2 * e + q] = sc;
                        mx = fmaxf(mx, sc);
                    }
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float m_new = see[e] ? fmaxf(m[e], mx) : m[e];
                corr[e] = ah_corr(see[e], m[e], m_new);
                float rs = 0.f;
                u16 ph[4][2];
#pragma unroll
                for (int j = 0; j < 4; ++j)
#pragma unroll
                    for (int q = 0; q < 2; ++q) {
                        ph[j][q] = ah_p16(s[j][2 * e + q], m_new);
                        rs += h2f(ph[j][q]);
                    }
                rs += __shfl_xor_sync(0xffffffffu, rs, 1);
                rs += __shfl_xor_sync(0xffffffffu, rs, 2);
                if (see[e]) {
                    l[e] = l[e] * corr[e] + rs;
                    m[e] = m_new;
                }
                // P as the A fragments of P·V: k-step kk2 = keys 16 kk2 + 2c (+1) and + 8.
#pragma unroll
                for (int kk2 = 0; kk2 < 2; ++kk2) {
                    pa[kk2][e] = (u32)ph[2 * kk2][0] | ((u32)ph[2 * kk2][1] << 16);
                    pa[kk2][2 + e] = (u32)ph[2 * kk2 + 1][0] | ((u32)ph[2 * kk2 + 1][1] << 16);
                }
            }
#pragma unroll
            for (int jn = 0; jn < NW; jn += 2) {
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    acc[jn][r] *= corr[r >> 1];
                    acc[jn + 1][r] *= corr[r >> 1];
                }
#pragma unroll
                for (int kk2 = 0; kk2 < 2; ++kk2) {
                    u32 b[4];
                    ldsm_x4_t(vs + voff + (u32)(16 * kk2 * VST + 8 * (cw0 + jn)) * 2, b);
                    mma_h16(acc[jn], pa[kk2], b[0], b[1]);
                    mma_h16(acc[jn + 1], pa[kk2], b[2], b[3]);
                }
            }
        }
        __syncthreads();  // every warp is done with this buffer before it is refilled
        if (issued < ntiles) {
            ah_tile_copy<HD, HDV>(kbuf0 + buf * kbytes, vbuf0 + buf * vbytes, Kc, Vc, cap, kw, vw,
                                  kvh, tA + issued * AH_TILE, u0, u1);
            ++issued;
        }
    }
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        if (b0[e] > b1[e]) continue;
        const size_t slot = ((size_t)tok[e] * n_head + head[e]) * n_super + sb;
#pragma unroll
        for (int jn = 0; jn < NW; ++jn)
            *(float2*)(Op + slot * HDV + 8 * (cw0 + jn) + 2 * c) =
                make_float2(acc[jn][2 * e], acc[jn][2 * e + 1]);
        if (c == 0 && cw0 == 0) {
            Mp[slot] = m[e];
            Lp[slot] = l[e];
        }
    }
}

#define ATTN_H16(NAME, HD, HDV, CS)                                                             \
    extern "C" __global__ void NAME(const float* Q, const u16* Kc, const u16* Vc, int cap,      \
                                    int window, float scale, int n_head, int n_head_kv,          \
                                    int n_super, int super_len, int tpb, int nbuf, float* Op,    \
                                    float* Mp, float* Lp, const StepParams* sp) {                \
        attn_h16_body<HD, HDV, CS>(Q, Kc, Vc, cap, window, scale, n_head, n_head_kv, n_super,    \
                               super_len, tpb, nbuf, Op, Mp, Lp, sp);                            \
    }
ATTN_H16(attn_h16_d64, 64, 64, 1)
ATTN_H16(attn_h16_d128, 128, 128, 1)
// Four warps per 16 rows (`MUSER_CUDA_ATTN_COLS=4`, decode blocks).
ATTN_H16(attn_h16_d64_c4, 64, 64, 4)
ATTN_H16(attn_h16_d128_c4, 128, 128, 4)
