// mmw_h16.cu — the f16 route's prefill tiles on Hopper's warpgroup MMA (`MUSER_CUDA_MMT=wg`):
// the same bits per output as the decode kernels (`mvh_*`, matvec_h16.cu) and the mma.sync tiles
// (`mmt_*`, mmt_h16.cu) for the same chain count S. wgmma.mma_async m64n128k16 with its A — the
// Q4H / Q6H weights, built in registers by formats_h16.cuh exactly as the other kernels build
// them — from registers and its B — the activations — read by the tensor cores from shared
// memory; each k16 step of a chain gives the bits mma.sync.m16n8k16 gives (measured on the H200:
// scripts/device/experiments/wgmma_tile.cu, 0 of 10.2 M outputs differ).
//
// h16_natural: XH [n_tok][K] (act_h16.cuh's fragment order) -> XN [n_tok][K] f16 in natural
//   order (value k at k): a wgmma B operand's 16-byte core-matrix rows are 8 consecutive k.
//   One thread per 64-value chunk: XH word 8·t4 + 2i + h holds values 16i + 8h + 2·t4 + {0, 1}.
//
// mmw_{q4h,q6h}_s{2,4,8,16}: Y[t][r] as mmt_*: per output, S chains — chain w the k16 steps of
//   super-blocks w, w + S, … in order (per super-block: loads j = 0..3, tiles i = 0..3, then the
//   min step; with MVH_ACC2 the odd k16 steps into a second accumulator, added after the min
//   step: formats_h16.cuh) from a zero accumulator — folded in chain order ((c0 + c1) + c2) + …, an empty
//   chain as +0, then times XINV[t] · w_inv. Block = WG warpgroups (`mmw_wg_of`: MMW_WG, 2
//   under MVH_ACC2's second accumulator; warp v: row group 4·WG·blockIdx.x + v; a warpgroup's 4
//   warps are the 64 rows of its wgmma) × 128 tokens (blockIdx.y). Each warp loads its piece
//   of the next super-block (in chain order) into registers from global memory while the
//   current one runs; the block copies a super-block's 128 tokens × 256 values of XN (core
//   matrices of 8 tokens × 8 values: core (token group n, chunk c) at (32n + c)·128 bytes) and
//   their sums (Q4H: 8 per token, the min step's upper k half read from a zeroed block; Q6H: 16)
//   by cp.async into one of MMW_STAGES stages, MMW_STAGES − 1 super-blocks ahead. The running
//   totals live in Y (the thread's own outputs; the last chain's fold also multiplies by
//   XINV[t] · w_inv).
//   Rows past n_out and tokens past n_tok read the last valid ones and store nothing. Needs
//   n_out % 16 == 0, K % 256 == 0, 16-byte aligned W, XN and sums, the sm_90a target;
//   dynamic shared memory MMW_STAGES · MMW_STAGE bytes (`Registry::mmt_plan`).
//
// mmws_{q4h,q6h}_s{4,8,16} (`MUSER_CUDA_MMW_SPLIT=1`, `Registry::mmw_split_plan`): the same tile
//   for chain blockIdx.z alone, its sums stored unscaled in P [S][n_tok][n_out]; mmw_fold then
//   adds the chains in order and scales — the same operations as the in-block fold, so the same
//   bits, with S times the blocks (for matrices too small to fill the GPU with whole tiles).

// Warpgroups per block: the registry's -DMMW_WG (`MUSER_CUDA_MMW_WG`, 3 by default).
#ifndef MMW_WG
#define MMW_WG 3
#endif
// Warpgroups per block of the tile of format F at S chains: MMW_WG, but 2 where MVH_ACC2 gives
// its super-blocks a second 64-float accumulator (formats_h16.cuh `mvh_acc2_on`): at 3 (168
// registers a thread) ptxas serializes every wgmma of such a tile (C7512, session 46's static
// SASS), at 2 it fits (245). The host's twin: plan_h16.rs `Registry::mmw_wg_of`.
template <class F, int S>
__device__ constexpr int mmw_wg_of() {
    return mvh_acc2_on<F, S>() && MMW_WG > 2 ? 2 : MMW_WG;
}
#define MMW_TOK 128
#define MMW_STAGES 3
#define MMW_XBYTES 65536                       // 128 tokens × 256 f16
#define MMW_STAGE (MMW_XBYTES + 4096)          // + sums (Q4H: 2048 and 2048 of zeros; Q6H: 4096)

extern "C" __global__ void h16_natural(const u16* XH, int K, int n_tok, u16* XN) {
    PDL_ENTRY()
    const size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= (size_t)n_tok * (size_t)(K / 64)) return;
    const uint4* src = (const uint4*)(XH + 64 * c);
    u32 w[32], o[32];
#pragma unroll
    for (int q = 0; q < 8; ++q) {
        const uint4 v = src[q];
        w[4 * q] = v.x, w[4 * q + 1] = v.y, w[4 * q + 2] = v.z, w[4 * q + 3] = v.w;
    }
#pragma unroll
    for (int t4 = 0; t4 < 4; ++t4)
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) o[8 * i + 4 * h + t4] = w[8 * t4 + 2 * i + h];
    uint4* dst = (uint4*)(XN + 64 * c);
#pragma unroll
    for (int q = 0; q < 8; ++q) dst[q] = make_uint4(o[4 * q], o[4 * q + 1], o[4 * q + 2], o[4 * q + 3]);
}

// ---- Warpgroup MMA through PTX (sm_90a).
// D (64 × 128 f32, this thread's 64: register 4c + e = row 16·warp + g + 8·(e >> 1), token
// 8c + 2·t4 + (e & 1)) += A (the warp's m16n8k16 A fragment, 16 rows × k16) · B (k16 × 128 from
// the descriptor `desc`).
__device__ __forceinline__ void wgmma_f16_m64n128(float (&d)[64], const u32 (&a)[4], u64 desc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,"
        "%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,"
        "%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
        "{%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
          "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
          "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]),
          "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
          "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
          "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]),
          "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// A shared-memory operand without swizzling: start address, the byte distance between core
// matrices adjacent in K (`kb`) and in N (`nb`).
__device__ __forceinline__ u64 wg_desc(u32 addr, u32 kb, u32 nb) {
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(kb >> 4) << 16) | ((u64)(nb >> 4) << 32);
}
// The super-block after s in chain order (w, w + S, …, then w + 1, …); nsb when none is left.
template <int S, bool SPLIT>
__device__ __forceinline__ int mmw_next(int s, int nsb) {
    if (s + S < nsb) return s + S;
    if (SPLIT) return nsb;  // a split block runs one chain
    const int w = s % S + 1;
    return w < S && w < nsb ? w : nsb;
}

// SPLIT: the block runs chain blockIdx.z alone and stores its sums unscaled in P [S][n_tok][n_out]
// (`mmw_fold` adds the chains in order and scales: the same operations as the in-block fold).
template <class F, int S, bool SPLIT>
__device__ __forceinline__ void mmw_body(const u8* __restrict__ W, int n_out, int K,
                                         const u16* __restrict__ XN, const u16* __restrict__ XSUM,
                                         const u16* __restrict__ XSUM16,
                                         const float* __restrict__ XINV, float w_inv,
                                         float* __restrict__ Y, int ldy, int n_tok,
                                         float* __restrict__ P) {
    constexpr int WG = mmw_wg_of<F, S>();  // warpgroups in the block
    constexpr int THREADS = 128 * WG;
    constexpr int SUMB = F::SUM_WORDS * 4;  // sum bytes per (token, super-block): 16 or 32
    constexpr int SC = SUMB / 16;           // their 16-byte chunks (k halves of the min step)
    extern __shared__ __align__(1024) u8 mmw_smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int nsb = K / 256, n_groups = n_out / 16;
    const int w0 = SPLIT ? (int)blockIdx.z : 0;  // the first chain
    if (w0 >= nsb) return;  // an empty chain (SPLIT): the fold adds +0 for it
    const size_t pieces = (size_t)n_groups * nsb;
    const int grp = 4 * WG * blockIdx.x + warp, gld = min(grp, n_groups - 1);
    const int tok0 = MMW_TOK * blockIdx.y;
    const u32 smem0 = (u32)__cvta_generic_to_shared(mmw_smem);
    const u8* sums = (const u8*)F::sums(XSUM, XSUM16);
    if (SC == 1)  // the min step's k 8..15 (A holds zeros there): zeros, never copied over
        for (int i = tid; i < MMW_STAGES * 128; i += THREADS)
            *(uint4*)(mmw_smem + (i >> 7) * MMW_STAGE + MMW_XBYTES + 2048 + (i & 127) * 16) =
                make_uint4(0, 0, 0, 0);
    // Copy super-block sb into stage `slot` (not yet waited for).
    auto copy = [&](int slot, int sb) {
        const u32 st = smem0 + slot * MMW_STAGE;
        for (int id = tid; id < MMW_TOK * 32; id += THREADS) {
            const int c = id >> 7, tl = id & 127, tok = min(tok0 + tl, n_tok - 1);
            h16_cp16(st + ((tl >> 3) * 32 + c) * 128 + (tl & 7) * 16,
                     XN + (size_t)tok * K + 256 * sb + 8 * c);
        }
        for (int id = tid; id < MMW_TOK * SC; id += THREADS) {
            const int c = id >> 7, tl = id & 127, tok = min(tok0 + tl, n_tok - 1);
            h16_cp16(st + MMW_XBYTES + ((tl >> 3) * SC + c) * 128 + (tl & 7) * 16,
                     sums + ((size_t)tok * nsb + sb) * SUMB + 16 * c);
        }
    };
    auto load = [&](int sb, typename F::Regs& r) {
        const u8 *p0, *p1, *p2;
        piece_at<F>(W, pieces, (size_t)gld * nsb + sb, p0, p1, p2);
        F::template load_at<true>(p0, p1, p2, lane, g, t4, r);
    };
    int cs = w0, cslot = 0;  // the copy's next super-block and stage
#pragma unroll
    for (int i = 0; i < MMW_STAGES - 1; ++i) {
        if (cs < nsb) {
            copy(cslot, cs);
            cs = mmw_next<S, SPLIT>(cs, nsb);
            cslot = cslot + 1 == MMW_STAGES ? 0 : cslot + 1;
        }
        asm volatile("cp.async.commit_group;\n" ::);
    }
    float acc[64];
#pragma unroll
    for (int e = 0; e < 64; ++e) acc[e] = 0.f;
    auto yat = [&](int c, int e) {
        return Y + (size_t)(tok0 + 8 * c + 2 * t4 + (e & 1)) * ldy + 16 * grp + g + 8 * (e >> 1);
    };
    auto mine = [&](int c, int e) {
        return grp < n_groups && tok0 + 8 * c + 2 * t4 + (e & 1) < n_tok;
    };
    typename F::Regs cur, nxt;
    int s = w0, w = w0, left = (nsb - w0 + S - 1) / S, slot = 0;
    const int steps = SPLIT ? left : nsb;
    load(w0, cur);
    for (int it = 0; it < steps; ++it) {
        const int sn = mmw_next<S, SPLIT>(s, nsb);
        if (sn < nsb) load(sn, nxt);
        asm volatile("cp.async.wait_group %0;\n" ::"n"(MMW_STAGES - 2));
        __syncthreads();  // super-block `it` landed for every thread; the stage before is free
        if (cs < nsb) {
            copy(cslot, cs);
            cs = mmw_next<S, SPLIT>(cs, nsb);
            cslot = cslot + 1 == MMW_STAGES ? 0 : cslot + 1;
        }
        asm volatile("cp.async.commit_group;\n" ::);
        const u32 st = smem0 + slot * MMW_STAGE;
        slot = slot + 1 == MMW_STAGES ? 0 : slot + 1;
        u32 a[2][4][4];
        // MVH_ACC2 (formats_h16.cuh): the odd k16 steps' sums of this super-block, from zero.
        constexpr bool A2 = mvh_acc2_on<F, S>();
        float acc2[64];  // unused (and dropped by the compiler) without it
        if constexpr (A2) {
#pragma unroll
            for (int e = 0; e < 64; ++e) acc2[e] = 0.f;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            F::frags(cur, j, a[j & 1]);
            wg_fence();
#pragma unroll
            for (int i = 0; i < 4; ++i)
                wgmma_f16_m64n128((A2 && (i & 1)) ? acc2 : acc, a[j & 1][i],
                                  wg_desc(st + (8 * j + 2 * i) * 128, 128, 4096));
            wg_commit();
            wg_wait<1>();
        }
        u32 am[4];
        F::min_a(cur, t4, am);
        wg_fence();
        wgmma_f16_m64n128(acc, am,
                          SC == 1 ? wg_desc(st + MMW_XBYTES, 2048, 128)
                                  : wg_desc(st + MMW_XBYTES, 128, 256));
        wg_commit();
        wg_wait<0>();
        if constexpr (A2) {
#pragma unroll
            for (int e = 0; e < 64; ++e) acc[e] += acc2[e];
        }
        if (!SPLIT && --left == 0) {
            // Fold the finished chain w and the empty ones after it (each adds +0, as in mvh);
            // after the last chain the product with XINV[t] · w_inv too. The running total is
            // the thread's own outputs in Y; 16 of them per pass, loads first.
            int w2 = w + 1, empties = 0;
            while (w2 < S && w2 >= nsb) ++empties, ++w2;
            const bool last = w2 == S;
#pragma unroll
            for (int cb = 0; cb < 16; cb += 4) {
                float v[16];
#pragma unroll
                for (int q = 0; q < 16; ++q) {
                    const int c = cb + (q >> 2), e = q & 3;
                    v[q] = w > 0 && mine(c, e) ? *yat(c, e) : 0.f;
                }
#pragma unroll
                for (int q = 0; q < 16; ++q) {
                    const int c = cb + (q >> 2), e = q & 3;
                    float t = w == 0 ? acc[4 * c + e] : __fadd_rn(v[q], acc[4 * c + e]);
                    if (empties > 0) t = __fadd_rn(t, 0.f);  // + 0 once is + 0 any number of times
                    if (last) t = __fmul_rn(t, __fmul_rn(XINV[min(tok0 + 8 * c + 2 * t4 + (e & 1), n_tok - 1)], w_inv));
                    if (mine(c, e)) *yat(c, e) = t;
                    acc[4 * c + e] = 0.f;
                }
            }
            w = w2;
            left = w < S ? (w < nsb ? (nsb - w + S - 1) / S : 0) : 0;
        }
        cur = nxt;
        s = sn;
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
    if (SPLIT) {
#pragma unroll
        for (int c = 0; c < 16; ++c)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (mine(c, e))
                    P[((size_t)w0 * n_tok + tok0 + 8 * c + 2 * t4 + (e & 1)) * n_out + 16 * grp + g +
                      8 * (e >> 1)] = acc[4 * c + e];
    }
}

// The split tiles' fold: Y[t][r] = (((P[0] + P[1]) + P[2]) + …) · (XINV[t] · w_inv), a chain past
// the matrix's super-blocks (w >= nsb: never written) added as +0 — mvh's and mmt's operations.
// One thread per output.
extern "C" __global__ void mmw_fold(const float* P, int S, int nsb, int n_out, int n_tok,
                                    const float* XINV, float w_inv, float* Y, int ldy) {
    PDL_ENTRY()
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, n = (size_t)n_tok * n_out;
    if (i >= n) return;
    const int t = (int)(i / n_out), r = (int)(i % n_out);
    float v = P[i];
    for (int w = 1; w < S; ++w) v = __fadd_rn(v, w < nsb ? P[(size_t)w * n + i] : 0.f);
    Y[(size_t)t * ldy + r] = __fmul_rn(v, __fmul_rn(XINV[t], w_inv));
}

#define MMW_KERNEL(NAME, F, S)                                                                  \
    extern "C" __global__ void __launch_bounds__(128 * mmw_wg_of<F, S>(), 1)                  \
        NAME(const u8* W, int n_out, int K, const u16* XN, const u16* XSUM, const u16* XSUM16,  \
             const float* XINV, float w_inv, float* Y, int ldy, int n_tok) {                    \
        PDL_ENTRY()                                                                             \
        mmw_body<F, S, false>(W, n_out, K, XN, XSUM, XSUM16, XINV, w_inv, Y, ldy, n_tok,        \
                              nullptr);                                                         \
    }
// The split tiles (`MUSER_CUDA_MMW_SPLIT`): grid z = chain, the chains' sums into P, then mmw_fold.
#define MMWS_KERNEL(NAME, F, S)                                                                 \
    extern "C" __global__ void __launch_bounds__(128 * mmw_wg_of<F, S>(), 1)                  \
        NAME(const u8* W, int n_out, int K, const u16* XN, const u16* XSUM, const u16* XSUM16,  \
             const float* XINV, float w_inv, float* Y, int ldy, int n_tok, float* P) {          \
        PDL_ENTRY()                                                                             \
        mmw_body<F, S, true>(W, n_out, K, XN, XSUM, XSUM16, XINV, w_inv, Y, ldy, n_tok, P);     \
    }
MMW_KERNEL(mmw_q4h_s2, FmtQ4H, 2)
MMW_KERNEL(mmw_q4h_s4, FmtQ4H, 4)
MMW_KERNEL(mmw_q4h_s8, FmtQ4H, 8)
MMW_KERNEL(mmw_q4h_s16, FmtQ4H, 16)
MMW_KERNEL(mmw_q6h_s2, FmtQ6H, 2)
MMW_KERNEL(mmw_q6h_s4, FmtQ6H, 4)
MMW_KERNEL(mmw_q6h_s8, FmtQ6H, 8)
MMW_KERNEL(mmw_q6h_s16, FmtQ6H, 16)
MMWS_KERNEL(mmws_q4h_s4, FmtQ4H, 4)
MMWS_KERNEL(mmws_q4h_s8, FmtQ4H, 8)
MMWS_KERNEL(mmws_q4h_s16, FmtQ4H, 16)
MMWS_KERNEL(mmws_q6h_s4, FmtQ6H, 4)
MMWS_KERNEL(mmws_q6h_s8, FmtQ6H, 8)
MMWS_KERNEL(mmws_q6h_s16, FmtQ6H, 16)
