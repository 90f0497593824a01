// mmq.cuh — the tensor-core matmul's tile, body and weight staging (prefill chunks), shared by
// the activation formats' staging structs: mmq_a16.cu (A16) and mmq_a8.cu (A8). Needs
// common.cuh + formats_a16.cuh + mma_int8.cuh.
//
// Same floats as decode: every (row, token) output is the operation sequence of mva_body /
// mva_pipe — virtual lane v takes units v, v+32, v+64, ..., each chained into its partial by
// the shared step functions (k4_step, q6_step), and the 32 partials are summed left to right
// (lane_seq_sum). The tile visits the units in that order (v outer) and keeps one partial and
// one running total per output. Decode, prefill and packed rows agree bit for bit.
//
// Tile: 8 warps (4 along rows × 2 along tokens); block 128 rows × MMQ_BN tokens; warp 32 rows ×
// 8·MMQ_WN tokens (2 × MMQ_WN MMA tiles; -DMMQ_WN=4 default, 2 for the A/B `MUSER_CUDA_MMQ_WN`,
// with -DMMQ_MINB blocks per SM asked of the register allocator). Per unit the block stages the
// unit's weights (quant bytes + per-row float factors) and the tokens' activation quants (+ per-
// token factors) in shared memory; the next unit's global loads are issued before the current
// unit's MMAs and consumed only after them.
//
// A staging struct M provides: XE (activation quant type), WW / XW (shared-memory row words of
// a weight row / token row), Regs, fetch (global -> registers, unit u), commit (registers ->
// shared memory) and compute (one unit of the warp's tiles into p).
//
//   W: [n_out][row_bytes]   XQ: [n_tok][K] M::XE   XS, XSUM: [n_tok][K/32]   Y: [n_tok][ldy] f32
//   K % 256 == 0.

#ifndef MMQ_WN
#define MMQ_WN 4
#endif
#ifndef MMQ_MINB
#define MMQ_MINB 1
#endif
// Staging buffers (-DMMQ_DB from `MUSER_CUDA_MMQ_DB`): 0 = one unit's weights and activations
// in shared memory, two barriers per unit (the next unit is committed only after every warp
// has read the current one); 1 = two buffers in turn, one barrier per unit (the next unit is
// committed into the other buffer while this one is read). The same units in the same order
// through the same arithmetic: the same floats.
#ifndef MMQ_DB
#define MMQ_DB 0
#endif
#define MMQ_BM 128
#define MMQ_BN (16 * MMQ_WN)
#define MMQ_THREADS 256
#define MMQ_XPIECES (8 * MMQ_BN / MMQ_THREADS)  // 16-byte activation pieces per thread

// ---- Staging: one unit of the weights (MMQ_BM rows) and of the activations (MMQ_BN tokens).
// Each thread fetches two weight pieces, 16-byte activation pieces and at most one token-factor
// item into registers (`fetch`), then writes them to shared memory (`commit`). Every warp has
// one role per piece (which part of a row, header or quants), so no warp diverges on it.

// ---- Weight staging shared by the activation formats (mmq_a16.cu, mmq_a8.cu): a unit's
// weight pieces into registers (fetch_w), then into the block's shared-memory weight rows
// (commit_w), WW words per row.

// Q4_K: weight row = the unit's 32 quant bytes | a0 nb0 a1 nb1 (12 words).
struct MmqW4K {
    static const int WW = 12;
    // The unit's weight pieces (any activation format): quants, thread t: row t / 2, half
    // t % 2 of the unit's 32 bytes; header (d, dmin, scales), threads < MMQ_BM: row t.
    static __device__ __forceinline__ void fetch_w(const u8* W, u64 row_bytes, int n_out, int u,
                                                   int row0, uint4 (&w)[2]) {
        const int tid = threadIdx.x, blk = u >> 2, c = u & 3;
        {
            const int row = min(row0 + (tid >> 1), n_out - 1);
            w[0] = *(const uint4*)(W + (u64)row * row_bytes + (u64)blk * 144 + 16 + 32 * c +
                                   16 * (tid & 1));
        }
        if (tid < MMQ_BM) {
            const int row = min(row0 + tid, n_out - 1);
            w[1] = *(const uint4*)(W + (u64)row * row_bytes + (u64)blk * 144);
        }
    }
    // Weight row t: the quants, then (a0, nb0, a1, nb1) of unit u's sub-blocks.
    static __device__ __forceinline__ void commit_w(int u, const uint4 (&w)[2], u32* wsh) {
        const int tid = threadIdx.x, c = u & 3;
        *(uint4*)(wsh + WW * (tid >> 1) + 4 * (tid & 1)) = w[0];
        if (tid < MMQ_BM) {
            const u32 sw[3] = {w[1].y, w[1].z, w[1].w};
            const K4Factors f = k4_factors(w[1].x, sw, c);
            *(float4*)(wsh + WW * tid + 8) = make_float4(f.a0, f.nb0, f.a1, f.nb1);
        }
    }
};

// Q6_K-P (muser_cuda::q6pad): a unit's runs are three aligned 16-byte loads, its scales one
// word in group order, d beside them. Weight row = A[4] | B[4] | H[4] | the four group scales
// d · s | pad (20 words: MmqQ6K's row). Threads < MMQ_BM: runs A and H of row t; the others:
// run B and the scale word + d of row t - 128.
struct MmqW6P {
    static const int WW = 20;
    // Unit u's weight pieces.
    static __device__ __forceinline__ void fetch_w(const u8* W, u64 row_bytes, int n_out, int u,
                                                   int row0, uint4& w0, uint4& w1) {
        const int tid = threadIdx.x, blk = u >> 2, c = u & 3, e = blk & 1;
        const u8* p = W + (u64)min(row0 + (tid & (MMQ_BM - 1)), n_out - 1) * row_bytes +
                      (u64)(blk >> 1) * 432;
        const uint4* run = (const uint4*)(p + 192 * e + 48 * c);
        if (tid < MMQ_BM) {
            w0 = __ldg(run);
            w1 = __ldg(run + 2);
        } else {
            w0 = __ldg(run + 1);
            w1 = make_uint4(__ldg((const u32*)(p + 384 + 16 * e + 4 * c)),
                            (u32)__ldg((const unsigned short*)(p + 416 + 2 * e)), 0u, 0u);
        }
    }
    // Weight row t (MmqQ6K's layout): A | B | H | the four group scales d · s.
    static __device__ __forceinline__ void commit_w(const uint4& w0, const uint4& w1, u32* wsh) {
        const int tid = threadIdx.x;
        u32* dst = wsh + WW * (tid & (MMQ_BM - 1));
        if (tid < MMQ_BM) {
            *(uint4*)dst = w0;
            *(uint4*)(dst + 8) = w1;
        } else {
            *(uint4*)(dst + 4) = w0;
            const float d = h2f((u16)w1.y);
            const u32 s = w1.x;
            *(float4*)(dst + 12) = make_float4(
                q6_scale(d, (i8)(s & 0xFF)), q6_scale(d, (i8)((s >> 8) & 0xFF)),
                q6_scale(d, (i8)((s >> 16) & 0xFF)), q6_scale(d, (i8)(s >> 24)));
        }
    }
};

// ---- A warp's side of one unit, shared by the activation formats: its weight fragments
// (rows wr + 16 mt + 8 h + g of the tiles mt, halves h) read from the staged rows, the A
// operands built from them, and the float chain per accumulator element (decode's order).

// Q4_K (MmqW4K rows): quant words q and 4 + q, and the row factors (a0, nb0, a1, nb1).
struct Frags4K {
    u32 wq[2][2][2];  // [mt][row half][word q | word 4 + q]
    float4 rf[2][2];  // [mt][row half]
    __device__ __forceinline__ Frags4K(const u32* wsh, int wr) {
        const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const u32* row = wsh + MmqW4K::WW * (wr + 16 * mt + 8 * h + g);
                wq[mt][h][0] = row[q];
                wq[mt][h][1] = row[4 + q];
                rf[mt][h] = *(const float4*)(row + 8);
            }
    }
    // Sub-block s (low / high nibbles) of tile mt as an m16n8k32 A operand.
    __device__ __forceinline__ void a_op(int mt, int s, u32 (&a)[4]) const {
        a[0] = (wq[mt][0][0] >> (4 * s)) & 0x0F0F0F0Fu;
        a[1] = (wq[mt][1][0] >> (4 * s)) & 0x0F0F0F0Fu;
        a[2] = (wq[mt][0][1] >> (4 * s)) & 0x0F0F0F0Fu;
        a[3] = (wq[mt][1][1] >> (4 * s)) & 0x0F0F0F0Fu;
    }
    // Tile mt's sub-block s into its partials: f0 / f1 = (xs, xs · xsum) of the accumulator
    // columns 2q, 2q + 1; fs the exact sums.
    __device__ __forceinline__ void step(int mt, int s, float2 f0, float2 f1, const float* fs,
                                         float* p) const {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const float4 r = rf[mt][e >> 1];
            const float2 f = (e & 1) ? f1 : f0;
            const float ra = s ? r.z : r.x, rnb = s ? r.w : r.y;
            p[e] = k4_step(p[e], ra, rnb, f.x, fs[e], f.y);
        }
    }
};

// Q6_K (MmqQ6K / MmqW6P rows): runs A, B, H (word q) and the group scales d · s.
struct Frags6K {
    u32 wA[2][2], wB[2][2], wH[2][2];  // [mt][row half]
    float4 sc[2][2];
    __device__ __forceinline__ Frags6K(const u32* wsh, int wr) {
        const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const u32* row = wsh + MmqW6P::WW * (wr + 16 * mt + 8 * h + g);
                wA[mt][h] = row[q];
                wB[mt][h] = row[4 + q];
                wH[mt][h] = row[8 + q];
                sc[mt][h] = *(const float4*)(row + 12);
            }
    }
    // Group gg of tile mt as an m16n8k16 A operand (6-bit quants minus 32).
    __device__ __forceinline__ void a_op(int mt, int gg, u32 (&a)[2]) const {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const u32 lq = gg & 1 ? wB[mt][h] : wA[mt][h];
            const u32 nib = (lq >> (gg & 2 ? 4 : 0)) & 0x0F0F0F0Fu;
            const u32 hb = ((wH[mt][h] >> (2 * gg)) & 0x03030303u) << 4;
            a[h] = __vsub4(nib | hb, 0x20202020u);
        }
    }
    // Tile mt's group gg into its partials: xs0 / xs1 the scales of columns 2q, 2q + 1.
    __device__ __forceinline__ void step(int mt, int gg, float xs0, float xs1, const float* fs,
                                         float* p) const {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const float4 r = sc[mt][e >> 1];
            const float rs = gg == 0 ? r.x : (gg == 1 ? r.y : (gg == 2 ? r.z : r.w));
            p[e] = q6_step(p[e], rs, (e & 1) ? xs1 : xs0, fs[e]);
        }
    }
};

// Every accumulator element of a warp's 2 × MMQ_WN tiles: f(mt, nt, e), unrolled.
template <class F>
__device__ __forceinline__ void mmq_each(F f) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < MMQ_WN; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) f(mt, nt, e);
}

template <class M>
__device__ __forceinline__ void mmq_body(const u8* __restrict__ W, u64 row_bytes,
                                         const typename M::XE* __restrict__ XQ,
                                         const float* __restrict__ XS,
                                         const int* __restrict__ XSUM, int K, float* __restrict__ Y,
                                         int ldy, int n_out, int n_tok) {
    __shared__ __align__(16) u32 wsh[(1 + MMQ_DB) * MMQ_BM * M::WW];
    __shared__ __align__(16) u32 xsh[(1 + MMQ_DB) * MMQ_BN * M::XW];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row0 = blockIdx.x * MMQ_BM, tok0 = blockIdx.y * MMQ_BN;
    const int wr = 32 * (warp & 3), wt = 8 * MMQ_WN * (warp >> 2);  // warp's first row / token
    const int n_units = K / 64;                              // 4 units per 256-value block
    float p[2][MMQ_WN][4], total[2][MMQ_WN][4];
    // Virtual lane v's partials join the running total (lane order; the first one starts it).
    auto fold = [&](int v) {
        mmq_each([&](int mt, int nt, int e) {
            total[mt][nt][e] = v == 0 ? p[mt][nt][e] : __fadd_rn(total[mt][nt][e], p[mt][nt][e]);
        });
    };
    auto clear = [&]() { mmq_each([&](int mt, int nt, int e) { p[mt][nt][e] = 0.f; }); };
    typename M::Regs r;
    M::fetch(W, row_bytes, n_out, 0, XQ, XS, XSUM, K, n_tok, row0, tok0, r);
#if MMQ_DB
    // Units in the same order as below (virtual lane v = u % 32 outer, u inner), the staging
    // buffer alternating: unit `cur` is read from buffer b while unit `nxt` is committed into
    // buffer 1 - b; one barrier then publishes nxt and retires b.
    clear();
    M::commit(0, r, wsh, xsh);
    __syncthreads();
    for (int cur = 0, b = 0;;) {
        const int v = cur & 31;
        const int nxt = cur + 32 < n_units ? cur + 32 : (v + 1 < min(32, n_units) ? v + 1 : -1);
        if (nxt >= 0) M::fetch(W, row_bytes, n_out, nxt, XQ, XS, XSUM, K, n_tok, row0, tok0, r);
        M::compute(wsh + b * (MMQ_BM * M::WW), xsh + b * (MMQ_BN * M::XW), wr, wt, p);
        if (cur + 32 >= n_units) {  // virtual lane v's last unit
            fold(v);
            clear();
        }
        if (nxt < 0) break;
        M::commit(nxt, r, wsh + (1 - b) * (MMQ_BM * M::WW), xsh + (1 - b) * (MMQ_BN * M::XW));
        __syncthreads();
        b = 1 - b;
        cur = nxt;
    }
    // Virtual lanes without units (K < 2048) add their zero partials, as decode's lane sum.
    for (int v = min(32, n_units); v < 32; ++v) fold(v);
#else
    for (int v = 0; v < 32; ++v) {
        clear();
        for (int u = v; u < n_units; u += 32) {
            __syncthreads();  // the previous unit's reads of shared memory are done
            M::commit(u, r, wsh, xsh);
            __syncthreads();
            // The next unit in lane order: u + 32, else the first unit of virtual lane v + 1.
            const int un = u + 32 < n_units ? u + 32 : (v + 1 < min(32, n_units) ? v + 1 : -1);
            if (un >= 0) M::fetch(W, row_bytes, n_out, un, XQ, XS, XSUM, K, n_tok, row0, tok0, r);
            M::compute(wsh, xsh, wr, wt, p);
        }
        fold(v);
    }
#endif
    const int g = lane >> 2, q = lane & 3;
    mmq_each([&](int mt, int nt, int e) {
        const int row = row0 + wr + 16 * mt + 8 * (e >> 1) + g;
        const int t = tok0 + wt + 8 * nt + 2 * q + (e & 1);
        if (row < n_out && t < n_tok) Y[(size_t)t * ldy + row] = total[mt][nt][e];
    });
}

#define MMQ_KERNEL(NAME, M)                                                                     \
    extern "C" __global__ void __launch_bounds__(MMQ_THREADS, MMQ_MINB)                                \
        NAME(const u8* W, u64 row_bytes, const M::XE* XQ, const float* XS, const int* XSUM,    \
             int K, float* Y, int ldy, int n_out, int n_tok) {                                  \
        PDL_ENTRY()                                                                             \
        mmq_body<M>(W, row_bytes, XQ, XS, XSUM, K, Y, ldy, n_out, n_tok);                       \
    }

