// mmq_a16.cu — the A16 route's tensor-core matmul (prefill chunks): the staging of Q4_K, Q6_K
// and Q6_K-P weights × A16 activations for mmq.cuh's tile. Needs common.cuh + formats_a16.cuh +
// mma_int8.cuh + mmq.cuh.
//
// Exact integers (mma_int8.cuh): mma.m16n8k32 (Q4_K sub-blocks of 32) and mma.m16n8k16 (Q6_K
// groups of 16) on the hi and lo bytes of the activation quants give the dp2a kernels' exact
// integer sums, so the float the matvec kernels get from (float)s.
//
//   XQ: [n_tok][K] i16.

// Shared-memory rows, in 32-bit words. Weights: Q4_K 32 quant bytes + 4 floats (12 words),
// Q6_K 48 quant bytes + 4 floats (+4 pad: 20 words) — both strides put the 8 rows an MMA
// fragment load touches in distinct banks. Activations, per token: the unit's 64 quants split
// at staging into hi and lo bytes (one word = one quad of 4 values), laid out so that one
// 8-byte load is exactly the register pair an MMA B operand takes (Q4_K: per 32-value
// sub-block, hi words of quads (q, 4+q) then lo words of the same; Q6_K: (hi, lo) of quad q of
// a 16-value group); then 4 floats, 4 pad (40 words: the 8-byte fragment loads of a half-warp
// hit distinct banks).
#define MMQ_XW 40

// Q6_K activation piece q (token q / 8, quants 8·(q % 8) .. +7 of the unit) into the token's
// row: quads 2j and 2j + 1 as (hi, lo, hi, lo) words.
__device__ __forceinline__ void commit_x(int q, uint4 v, u32* xsh) {
    u32 h0, l0, h1, l1;
    split_hilo(v.x, v.y, &h0, &l0);
    split_hilo(v.z, v.w, &h1, &l1);
    *(uint4*)(xsh + MMQ_XW * (q / 8) + 4 * (q % 8)) = make_uint4(h0, l0, h1, l1);
}

struct MmqQ4K {
    typedef short XE;
    static const int WW = MmqW4K::WW;
    static const int XW = MMQ_XW;
    struct Regs {
        uint4 w[2];
        uint2 xa[MMQ_XPIECES], xb[MMQ_XPIECES];
        float xs;
        int xsum;
    };
    // Unit u's weight pieces (fetch_w), activation pieces and token factors.
    static __device__ __forceinline__ void fetch(const u8* W, u64 row_bytes, int n_out, int u,
                                                 const short* XQ, const float* XS, const int* XSUM,
                                                 int K, int n_tok, int row0, int tok0, Regs& r) {
        const int tid = threadIdx.x, blk = u >> 2, c = u & 3;
        MmqW4K::fetch_w(W, row_bytes, n_out, u, row0, r.w);
        // Activation piece q < 8 * MMQ_BN: token q / 8, sub-block j / 4 and quads j % 4 and
        // 4 + j % 4 of it (j = q % 8): the quants of one B operand pair.
#pragma unroll
        for (int i = 0; i < MMQ_XPIECES; ++i) {
            const int q = tid + MMQ_THREADS * i, j = q % 8;
            const int t = min(tok0 + q / 8, n_tok - 1);
            const short* x = XQ + (size_t)t * K + 256 * blk + 64 * c + 32 * (j >> 2) + 4 * (j & 3);
            r.xa[i] = *(const uint2*)x;
            r.xb[i] = *(const uint2*)(x + 16);
        }
        // Token factors, threads MMQ_BM .. MMQ_BM + 2 * MMQ_BN (warps 4-7): token f / 2,
        // sub-block f % 2.
        const int f = tid - MMQ_BM;
        if (f >= 0 && f < 2 * MMQ_BN) {
            const int t = min(tok0 + f / 2, n_tok - 1);
            const size_t g = (size_t)t * (K / 32) + 8 * blk + 2 * c + (f & 1);
            r.xs = XS[g];
            r.xsum = XSUM[g];
        }
    }
    static __device__ __forceinline__ void commit(int u, const Regs& r, u32* wsh, u32* xsh) {
        const int tid = threadIdx.x;
        MmqW4K::commit_w(u, r.w, wsh);
#pragma unroll
        for (int i = 0; i < MMQ_XPIECES; ++i) {
            const int q = tid + MMQ_THREADS * i, j = q % 8;
            u32 h0, l0, h1, l1;
            split_hilo(r.xa[i].x, r.xa[i].y, &h0, &l0);
            split_hilo(r.xb[i].x, r.xb[i].y, &h1, &l1);
            u32* row = xsh + MMQ_XW * (q / 8) + 16 * (j >> 2) + 2 * (j & 3);
            *(uint2*)row = make_uint2(h0, h1);
            *(uint2*)(row + 8) = make_uint2(l0, l1);
        }
        const int f = tid - MMQ_BM;
        if (f >= 0 && f < 2 * MMQ_BN) {
            float* dst = (float*)(xsh + MMQ_XW * (f / 2) + 32 + 2 * (f & 1));
            dst[0] = r.xs;
            dst[1] = a16_xsm(r.xs, r.xsum);
        }
    }
    // One unit for the warp's 2 x MMQ_WN tiles: p[mt][nt][e] chained with sub-blocks 0 then 1.
    static __device__ __forceinline__ void compute(const u32* wsh, const u32* xsh, int wr, int wt,
                                                   float (&p)[2][MMQ_WN][4]) {
        const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
        const Frags4K fr(wsh, wr);
#pragma unroll
        for (int s = 0; s < 2; ++s) {
            u32 a[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) fr.a_op(mt, s, a[mt]);
#pragma unroll
            for (int nt = 0; nt < MMQ_WN; ++nt) {
                // B operands: token g of the tile, quads q and 4 + q of sub-block s (quants
                // 4q..4q+3 and 16+4q..): the hi pair, then the lo pair.
                const u32* xr = xsh + MMQ_XW * (wt + 8 * nt + g) + 16 * s + 2 * q;
                const uint2 vh = *(const uint2*)xr, vl = *(const uint2*)(xr + 8);
                const u32 bh0 = vh.x, bh1 = vh.y, bl0 = vl.x, bl1 = vl.y;
                // Token factors of the accumulator columns 2q, 2q+1.
                const float2 f0 = *(const float2*)(xsh + MMQ_XW * (wt + 8 * nt + 2 * q) + 32 + 2 * s);
                const float2 f1 = *(const float2*)(xsh + MMQ_XW * (wt + 8 * nt + 2 * q + 1) + 32 + 2 * s);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    float fs[4];
                    mma_pair(
                        [&](int* d, bool lo, const int* c) {
                            mma_k32(d, a[mt], lo ? bl0 : bh0, lo ? bl1 : bh1, lo, c);
                        },
                        fs);
                    fr.step(mt, s, f0, f1, fs, p[mt][nt]);
                }
            }
        }
    }
};

// Q6_K blocks are 210 bytes (2-byte aligned): the staging fetches each run's aligned 16-byte
// window (win16_load) and extracts it at commit.
struct MmqQ6K {
    typedef short XE;
    static const int WW = 20;  // weight row, words: A[4] | B[4] | H[4] | sc0..sc3 | pad
    static const int XW = MMQ_XW;
    struct Regs {
        Win16 w[2];
        uint4 x[MMQ_XPIECES];
        float xs;
    };
    // Weight pieces: runs (part 0: ql run A, 1: ql run B, 2: qh run) — thread t: part t / 128,
    // row t % 128; threads < 128 also part 2 of row t — and the scales (the 16 scale bytes, d
    // in the same window at bytes 16..17), threads >= 128: row t - 128. One role per warp.
    static __device__ __forceinline__ void fetch(const u8* W, u64 row_bytes, int n_out, int u,
                                                 const short* XQ, const float* XS, const int* XSUM,
                                                 int K, int n_tok, int row0, int tok0, Regs& r) {
        const int tid = threadIdx.x, blk = u >> 2, h = (u >> 1) & 1, pt = u & 1;
        const int off0 = tid < MMQ_BM ? 64 * h + 16 * pt : 64 * h + 32 + 16 * pt;
        const int off1 = tid < MMQ_BM ? 128 + 32 * h + 16 * pt : 192;
        const u8* b = W + (u64)min(row0 + (tid & (MMQ_BM - 1)), n_out - 1) * row_bytes +
                      (u64)blk * 210;
        win16_load(b + off0, r.w[0]);
        win16_load(b + off1, r.w[1]);
        fetch_acts(u, XQ, XS, K, n_tok, tok0, r.x, r.xs);
    }
    // Unit u's activation pieces and token factors (any Q6_K layout). Piece q: token q / 8,
    // run g = (q % 8) / 2 (values 128h + 32g + 16pt ..), half (q % 2) of its 16 quants; factor:
    // thread < 4 * MMQ_BN: token tid / 4, group tid % 4 (group 4h + g).
    static __device__ __forceinline__ void fetch_acts(int u, const short* XQ, const float* XS,
                                                      int K, int n_tok, int tok0,
                                                      uint4 (&x)[MMQ_XPIECES], float& xs) {
        const int tid = threadIdx.x, blk = u >> 2, h = (u >> 1) & 1, pt = u & 1;
#pragma unroll
        for (int i = 0; i < MMQ_XPIECES; ++i) {
            const int q = tid + MMQ_THREADS * i;
            const int t = min(tok0 + q / 8, n_tok - 1), gg = (q % 8) >> 1;
            x[i] = *(const uint4*)(XQ + (size_t)t * K + 256 * blk + 128 * h + 32 * gg + 16 * pt +
                                   8 * (q & 1));
        }
        if (tid < 4 * MMQ_BN) {
            const int t = min(tok0 + tid / 4, n_tok - 1);
            xs = XS[(size_t)t * (K / 32) + 8 * blk + 4 * h + (tid & 3)];
        }
    }
    static __device__ __forceinline__ void commit_acts(const uint4 (&x)[MMQ_XPIECES], float xs,
                                                       u32* xsh) {
        const int tid = threadIdx.x;
#pragma unroll
        for (int i = 0; i < MMQ_XPIECES; ++i) commit_x(tid + MMQ_THREADS * i, x[i], xsh);
        if (tid < 4 * MMQ_BN) ((float*)xsh)[MMQ_XW * (tid / 4) + 32 + (tid & 3)] = xs;
    }
    static __device__ __forceinline__ void commit(int u, const Regs& r, u32* wsh, u32* xsh) {
        const int tid = threadIdx.x, h = (u >> 1) & 1, pt = u & 1, row = tid & (MMQ_BM - 1);
        u32* dst = wsh + WW * row;
        u32 w[4];
        win16_words(r.w[0], w);
        *(uint4*)(dst + (tid < MMQ_BM ? 0 : 4)) = make_uint4(w[0], w[1], w[2], w[3]);
        win16_words(r.w[1], w);
        if (tid < MMQ_BM) {
            *(uint4*)(dst + 8) = make_uint4(w[0], w[1], w[2], w[3]);
        } else {
            // Scales s[8h + pt + {0, 2, 4, 6}]: bytes pt, pt + 2 of words 2h, 2h + 1; d: the
            // two bytes after the 16 scale bytes (an even offset, so inside one word).
            const u32 off = r.w[1].off + 16, k = off >> 2;
            const u32 dw = k == 4 ? r.w[1].b.x : (k == 5 ? r.w[1].b.y : (k == 6 ? r.w[1].b.z : r.w[1].b.w));
            const float d = h2f((u16)(dw >> ((off & 3) * 8)));
            const u32 lo = h ? w[2] : w[0], hi = h ? w[3] : w[1], sh = 8 * pt;
            *(float4*)(dst + 12) = make_float4(
                q6_scale(d, (i8)((lo >> sh) & 0xFF)), q6_scale(d, (i8)((lo >> (sh + 16)) & 0xFF)),
                q6_scale(d, (i8)((hi >> sh) & 0xFF)), q6_scale(d, (i8)((hi >> (sh + 16)) & 0xFF)));
        }
        commit_acts(r.x, r.xs, xsh);
    }
    static __device__ __forceinline__ void compute(const u32* wsh, const u32* xsh, int wr, int wt,
                                                   float (&p)[2][MMQ_WN][4]) {
        const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
        const Frags6K fr(wsh, wr);
#pragma unroll
        for (int gg = 0; gg < 4; ++gg) {
            u32 a[2][2];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) fr.a_op(mt, gg, a[mt]);
#pragma unroll
            for (int nt = 0; nt < MMQ_WN; ++nt) {
                // B fragment: token g, quad q of group gg (quants 16gg + 4q ..) as (hi, lo).
                const uint2 v = *(const uint2*)(xsh + MMQ_XW * (wt + 8 * nt + g) + 8 * gg + 2 * q);
                const u32 bh = v.x, bl = v.y;
                const float xs0 = ((const float*)xsh)[MMQ_XW * (wt + 8 * nt + 2 * q) + 32 + gg];
                const float xs1 = ((const float*)xsh)[MMQ_XW * (wt + 8 * nt + 2 * q + 1) + 32 + gg];
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    float fs[4];
                    mma_pair(
                        [&](int* d, bool lo, const int* c) {
                            mma_k16(d, a[mt][0], a[mt][1], lo ? bl : bh, lo, c);
                        },
                        fs);
                    fr.step(mt, gg, xs0, xs1, fs, p[mt][nt]);
                }
            }
        }
    }
};

// Q6_K-P (muser_cuda::q6pad; weights staged by MmqW6P into MmqQ6K's shared-memory row, so its
// compute and its activation staging).
struct MmqQ6KP : MmqQ6K {
    struct Regs {
        uint4 w0, w1;  // threads < MMQ_BM: A, H; others: B, (scale word, d bits, -, -)
        uint4 x[MMQ_XPIECES];
        float xs;
    };
    static __device__ __forceinline__ void fetch(const u8* W, u64 row_bytes, int n_out, int u,
                                                 const short* XQ, const float* XS, const int* XSUM,
                                                 int K, int n_tok, int row0, int tok0, Regs& r) {
        MmqW6P::fetch_w(W, row_bytes, n_out, u, row0, r.w0, r.w1);
        fetch_acts(u, XQ, XS, K, n_tok, tok0, r.x, r.xs);
    }
    static __device__ __forceinline__ void commit(int, const Regs& r, u32* wsh, u32* xsh) {
        MmqW6P::commit_w(r.w0, r.w1, wsh);
        commit_acts(r.x, r.xs, xsh);
    }
};

MMQ_KERNEL(mmq_q4_k, MmqQ4K)
MMQ_KERNEL(mmq_q6_k, MmqQ6K)
MMQ_KERNEL(mmq_q6p, MmqQ6KP)
