// matvec_pipe.cuh — the decode matvec's launch constants, its plain body (mva_body, every
// format) and its pipelined body (mva_pipe: Q4_K, Q6_K, Q6_K-P), shared by matvec_a16.cu (one
// token), matvec_packed.cu (packed decode rows of several sequences) and matvec_a8.cu (the A8
// activation side). Needs common.cuh + formats_a16.cuh (+ formats_a8.cuh) before it.

// Warps per block (-DMVA_WARPS=N from `MUSER_CUDA_MVA_WARPS`; the host launches 32 * N threads).
#ifndef MVA_WARPS
#define MVA_WARPS 4
#endif

// Each warp's lane_seq_sum scratch for N outputs: N * 36 floats (static shared memory, which
// the staged decode kernels' dynamic activation copy shares the 48 KiB default limit with: the
// host (forward.rs, `mv`) counts MVA_WARPS * outputs per warp * 36 * 4 bytes for it).
#define MVA_RED_DECL(N) __shared__ __align__(16) float mva_red[MVA_WARPS * (N) * 36]
#define MVA_RED(N) (mva_red + (threadIdx.x >> 5) * (N) * 36)

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
// How the staged kernels copy the activations into shared memory: 1 = cp.async (every chunk
// in flight at once), 0 = through registers, eight chunks per round (-DMVA_STAGE_ASYNC from
// `MUSER_CUDA_STAGE_ASYNC`; the same bytes either way).
#ifndef MVA_STAGE_ASYNC
#define MVA_STAGE_ASYNC 0
#endif
// Weight ring of the one-token decode kernels (-DMVA_WSTAGES=N for Q4_K, -DMVA_WSTAGES_Q6=N for
// Q6_K, from `MUSER_CUDA_MVA_WSTAGES` / `MUSER_CUDA_MVA_WSTAGES_Q6`): 0 = the next unit's weights
// in flight in registers (one unit ahead); N >= 2 = each lane's units copied by cp.async into an
// N-stage ring in dynamic shared memory (after the staged activations), N - 1 units ahead, no
// registers held for them. Each lane reads back only what it copied itself, so the ring needs
// no barrier, only cp.async.wait_group. The same bytes reach the same arithmetic.
#ifndef MVA_WSTAGES
#define MVA_WSTAGES 0
#endif
#ifndef MVA_WSTAGES_Q6
#define MVA_WSTAGES_Q6 0
#endif
__device__ __forceinline__ void mva_cp16(const void* dst, const void* src) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}
__device__ __forceinline__ void mva_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void mva_cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

#if MVA_MINB > 0
#define MVA_BOUNDS_T1 __launch_bounds__(32 * MVA_WARPS, MVA_MINB)
#else
#define MVA_BOUNDS_T1 __launch_bounds__(32 * MVA_WARPS)
#endif

// The activation quantizers (quant_a16, quant_a8): row t, group grp of X [n_tok][ldx] into
// XQ [n_tok][K] (the format XQ names: quant_group, common.cuh), XS/XSUM [n_tok][K/32]; one
// warp per group of 32.
template <class XE>
__device__ __forceinline__ void quant_rows(const float* X, int ldx, int K, int n_tok, XE* XQ,
                                           float* XS, int* XSUM) {
    PDL_ENTRY()
    const int grp = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int t = blockIdx.y;
    if (grp >= K / 32 || t >= n_tok) return;
    const float v = X[(size_t)t * ldx + 32 * grp + (threadIdx.x & 31)];
    quant_group(v, XQ + (size_t)t * K + 32 * grp, XS + (size_t)t * (K / 32) + grp,
                XSUM + (size_t)t * (K / 32) + grp);
}

// The plain body (every format, through its dot<NT>; activations of XType<F>): R rows per warp
// (their loads overlap), NT tokens per launch row-pass. Neither changes the operation sequence
// of one (row, token) output.
template <class F, int NT, int R>
__device__ __forceinline__ void mva_body(const u8* __restrict__ W, u64 row_bytes,
                                         const typename XType<F>::T* __restrict__ XQ,
                                         const float* __restrict__ XS,
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
    const typename XType<F>::T* xq = XQ + (size_t)t0 * K;
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
        NAME(const u8* W, u64 row_bytes, const XType<F>::T* XQ, const float* XS,                \
             const int* XSUM, int K, float* Y, int ldy, int n_out, int n_tok) {                 \
        mva_body<F, NT, R>(W, row_bytes, XQ, XS, XSUM, K, Y, ldy, n_out, n_tok);                \
    }

// Decode body for formats with a load/compute split (Q4_K, Q6_K): R rows per warp, and the next
// unit's weights loaded while the current one is computed (software pipeline); each unit's
// weights are loaded once for all NT tokens (packed decode rows of several sequences) and each
// unit's activations once for all R rows.
// Packed tail: a row has n_units = 32*full + tail units. The `full` iterations give every lane
// one unit of every row; the tail's R*tail (row, unit) pairs are then spread over the lanes
// (pair f on lane f % 32, step f / 32) instead of running R rows on `tail` lanes: the lane
// that owns the unit in mva_body's order (virtual lane v of row i) hands its partial to the
// lane computing the pair, which chains the unit onto it and hands it back. The tail unit is
// the last of its virtual lane, so per (row, token) the arithmetic is exactly `dot<1>` in the
// same unit order and final sum: results equal mva_body's bit for bit, for every NT.
// STAGE: the activation quants of the NT tokens are first copied once per block into shared
// memory in the padded layout (xoff<P>, P = XType<F>::PAD: dynamic shared memory NT*(K/64)*P
// quants — A16 72 shorts, A8 80 bytes per 64 values — K % 64 == 0, token t at t*(K/64)*P). In
// the global layout every 16-byte activation read of a warp touches 32 cache lines (lanes are
// 128 / 64 bytes apart); the staging copy is coalesced, and the first unit's weights are
// requested before it.
// AH: how many units ahead the weights are requested in registers (WS == 0): 1 = the next
// unit (the default); 2 = the next two (MVA_AHEAD for Q4_K, MVA_AHEAD_Q6P for Q6_K-P: more
// bytes in flight per lane for R more Raw registers per extra unit). Same units, same order.
template <class F, int R, bool STAGE, int NT, int WS, int AH = 1>
__device__ __forceinline__ void mva_pipe(const u8* __restrict__ W, u64 row_bytes,
                                         const typename XType<F>::T* __restrict__ XQ,
                                         const float* __restrict__ XS,
                                         const int* __restrict__ XSUM, int K,
                                         float* __restrict__ Y, int ldy, int n_out) {
    static_assert(R * NT <= 8, "mva_pipe: at most 8 outputs per warp");
    static_assert(WS == 0 || (WS >= 2 && NT == 1), "mva_pipe: weight ring of >= 2 stages, one token");
    static_assert(AH == 1 || (AH == 2 && WS == 0), "mva_pipe: one or two units ahead, no ring");
    typedef typename XType<F>::T XE;  // activation quant (short: A16, signed char: A8)
    extern __shared__ __align__(16) short xsh_raw[];
    XE* const xsh = (XE*)xsh_raw;
    MVA_RED_DECL(R * NT);
    constexpr int XPS = XType<F>::PAD;  // staged stride per 64 values
    constexpr int EPC = 16 / sizeof(XE);  // quants per 16-byte chunk
    constexpr int XP = STAGE ? XPS : 64;
    const int lane = threadIdx.x & 31;
    const int row0 = (blockIdx.x * MVA_WARPS + (threadIdx.x >> 5)) * R;
    const bool active = row0 < n_out;
    const int n_units = (K / F::BLOCK_VALS) * F::UNITS;
    const int full = n_units / 32, tail = n_units % 32, n_pairs = R * tail;
    const int gpb = F::BLOCK_VALS / 32;
    // Token t's activations: quants at xsrc + t * xt (staged or global), scales/sums at t * K/32.
    const int xt = STAGE ? (K / 64) * XPS : K;
    const u8* wr[R];
#pragma unroll
    for (int i = 0; i < R; ++i) wr[i] = W + (u64)min(row0 + i, n_out - 1) * row_bytes;
    typename F::W cur[R];
    typename F::Raw nxt[R];  // the next unit's weights in flight (F::finish makes them a W)
    typename F::Raw nx2[R];  // AH == 2: the unit after it
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
    // Stage st's weights into dst (AH == 2): the rows' unit lane + 32 st, the tail pairs at
    // st == full, nothing past it.
    auto load_stage = [&](int st, typename F::Raw* dst) {
        if (st < full) {
            const int gs = lane + 32 * st;
#pragma unroll
            for (int i = 0; i < R; ++i)
                F::load_raw(wr[i] + (u64)(gs / F::UNITS) * F::BLOCK_BYTES, gs % F::UNITS, dst[i]);
        } else if (st == full) {
            load_tail(dst);
        }
    };
    // Weight ring (WS > 0): this warp's WS stages × R slots × F::NCH chunks × 32 lanes of 16
    // bytes, after the staged activations. Stage `st` < full holds unit lane + 32 st of each row
    // (slot = row); stage `full` holds the tail pairs (slot s = pair lane + 32 s).
    uint4* ring = nullptr;
    if (WS > 0)
        ring = (uint4*)(xsh + (STAGE ? NT * xt : 0)) + (threadIdx.x >> 5) * (WS * R * F::NCH * 32);
    auto slot = [&](int st, int i) { return ring + ((st % (WS > 0 ? WS : 1)) * R + i) * F::NCH * 32 + lane; };
    // The (row, unit) of slot i of stage st, if it holds one.
    auto unit_of = [&](int st, int i, const u8*& b, int& u) {
        if (st < full) {
            const int g = lane + 32 * st;
            b = wr[i] + (u64)(g / F::UNITS) * F::BLOCK_BYTES;
            u = g % F::UNITS;
            return true;
        }
        const int f = lane + 32 * i;
        if (st > full || f >= n_pairs) return false;
        const int r = f / tail, gt = 32 * full + (f - r * tail);
        b = W + (u64)min(row0 + r, n_out - 1) * row_bytes + (u64)(gt / F::UNITS) * F::BLOCK_BYTES;
        u = gt % F::UNITS;
        return true;
    };
    auto issue = [&](int st) {
#pragma unroll
        for (int i = 0; i < R; ++i) {
            const u8* b;
            int u;
            if (unit_of(st, i, b, u)) {
#pragma unroll
                for (int j = 0; j < F::NCH; ++j) mva_cp16(slot(st, i) + 32 * j, F::chunk(b, u, j));
            }
        }
        mva_cp_commit();
    };
    auto take = [&](int st, int i, typename F::W& w) {
        const u8* b;
        int u;
        if (unit_of(st, i, b, u)) F::from_chunks(slot(st, i), b, u, w);
    };
    if (WS > 0 && active) {
#pragma unroll
        for (int st = 0; st < WS - 1; ++st) issue(st);
    }
    if (WS == 0 && active) {
        if (full > 0) {
#pragma unroll
            for (int i = 0; i < R; ++i)
                F::load(wr[i] + (u64)(lane / F::UNITS) * F::BLOCK_BYTES, lane % F::UNITS, cur[i]);
        } else {
            load_tail(nxt);
#pragma unroll
            for (int i = 0; i < R; ++i) F::finish(nxt[i], cur[i]);
        }
        if (AH == 2) load_stage(1, nxt);
    }
    // The weights above are no kernel's output: everything after reads or writes the step's
    // buffers (PDL, common.cuh).
    pdl_wait();
    pdl_trigger();
    if (STAGE) {
        const int n16 = K / EPC;
        // The block is 32 * MVA_WARPS threads (the launch always is): with the constant, a
        // thread's chunks i = tid + 128 u (at 4 warps) have fixed i % 8, so the padded
        // offsets step linearly and the index arithmetic folds away (and the Q4_K one-token
        // kernel needs 80 registers instead of 95).
        constexpr int BT = 32 * MVA_WARPS;
#if MVA_STAGE_ASYNC
        // cp.async: every 16-byte chunk requested at once, straight into shared memory (no
        // registers held, no load/store rounds).
        for (int i = threadIdx.x; i < NT * n16; i += BT) {
            const int t = NT == 1 ? 0 : i / n16, j = i - t * n16;
            const unsigned d = (unsigned)__cvta_generic_to_shared(xsh + t * xt + xoff<XPS>(EPC * j));
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d),
                         "l"((const uint4*)XQ + i));
        }
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 0;\n" ::);
#else
        // Eight 16-byte loads in flight per thread before their stores: the copy costs one
        // or a few L2 round trips, not one per 16 bytes.
        for (int base = 0; base < NT * n16; base += 8 * BT) {
            uint4 v[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const int i = base + threadIdx.x + u * BT;
                if (i < NT * n16) v[u] = ((const uint4*)XQ)[i];
            }
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const int i = base + threadIdx.x + u * BT;
                if (i < NT * n16) {
                    // One token: no division (the decode kernel's code stays as it was).
                    const int t = NT == 1 ? 0 : i / n16, j = i - t * n16;
                    *(uint4*)(xsh + t * xt + xoff<XPS>(EPC * j)) = v[u];
                }
            }
        }
#endif
        __syncthreads();
    }
    if (!active) return;
    const XE* xsrc = STAGE ? xsh : XQ;
    float acc[R][NT];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[i][t] = 0.f;
    for (int it = 0; it < full; ++it) {
        const int g = lane + 32 * it, g2 = g + 32;
        if (WS > 0) {
            // Stage it has landed (later stages may still be in flight); its slot's previous
            // contents (stage it - WS) were consumed an iteration ago, so refill the slot of
            // stage it - 1 with stage it + WS - 1.
            mva_cp_wait<(WS > 1 ? WS - 2 : 0)>();
#pragma unroll
            for (int i = 0; i < R; ++i) take(it, i, cur[i]);
            issue(it + WS - 1);
        } else if (AH == 2) {
            load_stage(it + 2, nx2);
        } else if (it + 1 < full) {
#pragma unroll
            for (int i = 0; i < R; ++i)
                F::load_raw(wr[i] + (u64)(g2 / F::UNITS) * F::BLOCK_BYTES, g2 % F::UNITS, nxt[i]);
        } else {
            load_tail(nxt);
        }
        const int blk = g / F::UNITS, u = g % F::UNITS;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            typename F::X x;
            F::template loadx<XP>(u, xsrc + t * xt + xoff<XP>(blk * F::BLOCK_VALS),
                                  XS + t * (K / 32) + blk * gpb, XSUM + t * (K / 32) + blk * gpb,
                                  x);
#pragma unroll
            for (int i = 0; i < R; ++i) F::compute_x(cur[i], u, x, &acc[i][t]);
        }
        if (WS == 0) {
#pragma unroll
            for (int i = 0; i < R; ++i) F::finish(nxt[i], cur[i]);
            if (AH == 2) {
#pragma unroll
                for (int i = 0; i < R; ++i) nxt[i] = nx2[i];
            }
        }
    }
    if (WS > 0) {
        mva_cp_wait<0>();
#pragma unroll
        for (int s = 0; s < R; ++s) take(full, s, cur[s]);
    }
    // Tail: cur[s] holds pair f = lane + 32 s = (row i, virtual lane v): fetch lane v's partial
    // of row i (each token), chain the unit onto it, and hand it back.
    const int steps = (n_pairs + 31) / 32;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        float tv[R];
#pragma unroll
        for (int s = 0; s < R; ++s) {
            const int f = lane + 32 * s;
            const int i = f < n_pairs ? f / tail : 0, v = f < n_pairs ? f - i * tail : 0;
            float home = 0.f;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const float a = __shfl_sync(0xffffffffu, acc[r][t], v);
                if (r == i) home = a;
            }
            tv[s] = home;
            if (f < n_pairs) {
                const int gt = 32 * full + v;
                const int blk = gt / F::UNITS, u = gt % F::UNITS;
                typename F::X x;
                F::template loadx<XP>(u, xsrc + t * xt + xoff<XP>(blk * F::BLOCK_VALS),
                                      XS + t * (K / 32) + blk * gpb,
                                      XSUM + t * (K / 32) + blk * gpb, x);
                F::compute_x(cur[s], u, x, &tv[s]);
            }
        }
#pragma unroll
        for (int i = 0; i < R; ++i) {
            const int src = i * tail + lane;  // pair index of (row i, virtual lane `lane`)
#pragma unroll
            for (int s = 0; s < R; ++s) {
                if (s < steps) {
                    const float tt = __shfl_sync(0xffffffffu, tv[s], src & 31);
                    if (lane < tail && (src >> 5) == s) acc[i][t] = tt;
                }
            }
        }
    }
    // Lane j sums output j = (row i, token t) = (j / NT, j % NT).
    const float s = lane_seq_sum<R * NT>(&acc[0][0], MVA_RED(R * NT));
    const int i = lane / NT, t = lane % NT;
    if (lane < R * NT && row0 + i < n_out) (Y + (size_t)t * ldy)[row0 + i] = s;
}

// Pipelined decode kernels: STAGE = true stages the activations in shared memory (mvs_*).
// NT tokens per launch (the host launches exactly NT): t1 is single-sequence decode; t2/t4/t8
// are packed decode rows (rows per warp MVA_R1, at most 8 / NT).
// WS: the weight ring's stages (MVA_WSTAGES / MVA_WSTAGES_Q6 for the one-token kernels, 0 for
// packed rows).
#define MVA_PIPE_KERNEL_AH(NAME, F, STAGE, NT, WS, AH)                                          \
    extern "C" __global__ void MVA_BOUNDS_T1                                                    \
        NAME(const u8* W, u64 row_bytes, const XType<F>::T* XQ, const float* XS,                \
             const int* XSUM, int K, float* Y, int ldy, int n_out, int n_tok) {                 \
        mva_pipe<F, (MVA_R1 * NT <= 8 ? MVA_R1 : 8 / NT), STAGE, NT, WS, AH>(                  \
            W, row_bytes, XQ, XS, XSUM, K, Y, ldy, n_out);                                      \
    }
#define MVA_PIPE_KERNEL_WS(NAME, F, STAGE, NT, WS) MVA_PIPE_KERNEL_AH(NAME, F, STAGE, NT, WS, 1)
#define MVA_PIPE_KERNEL(NAME, F, STAGE, NT) MVA_PIPE_KERNEL_WS(NAME, F, STAGE, NT, 0)
// Units ahead of the one-token Q4_K and Q6_K-P kernels (-DMVA_AHEAD / -DMVA_AHEAD_Q6P from
// `MUSER_CUDA_MVA_AHEAD` / `MUSER_CUDA_MVA_AHEAD_Q6P`; 1 or 2; 2 needs no weight ring).
#ifndef MVA_AHEAD
#define MVA_AHEAD 1
#endif
#ifndef MVA_AHEAD_Q6P
#define MVA_AHEAD_Q6P 1
#endif

