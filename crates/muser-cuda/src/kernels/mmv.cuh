// mmv.cuh — packed decode rows on the int8 tensor cores, the parts every activation format
// shares (mmv_a16.cu: A16, mmv_a8.cu: A8): up to 8 tokens (one per sequence) × Q4_K / Q6_K
// weights, 16 rows × 8 token columns per MMA tile (Q4_K: m16n8k32 per 32-value sub-block, Q6_K:
// m16n8k16 per 16-value group). Needs common.cuh + formats_a16.cuh + mma_int8.cuh.
//
// Same floats as decode: every (row, token) output is mva_pipe's operation sequence — virtual
// lane v chains units v, v+32, v+64, … into its partial (Q4_K: k4_step for sub-blocks 2c, 2c+1;
// Q6_K: q6_step for its four groups in order), and the 32 partials are summed left to right —
// so a row decoded in a packed step equals the same row decoded alone, bit for bit (device tests
// `kernels.rs`, `kernels_a8.rs`). The integer sums come from the tensor cores (exact:
// mma_int8.cuh); which values of a sub-block or group a thread feeds is a permutation of k
// applied to both operands, so the sums do not change.
//
// Block: MMV_WARPS warps on the same 16 rows; warp w chains the virtual lanes v ≡ w (mod
// MMV_WARPS), each unit's weights and activations fetched one unit ahead; the partials meet in
// shared memory and four warps sum them in lane order (one accumulator element each).
// Fragment of thread (g = lane / 4, q = lane % 4): rows g and g + 8; B column (token) g;
// accumulator columns 2q, 2q + 1. The tokens' group factors (scale, scale × quant sum, the floats
// decode forms) are staged once per block in dynamic shared memory, [group][token] pairs
// (64 · K/32 bytes). A warp's units all have the same position in their block (u ≡ warp mod 4),
// so it is folded into the thread's bases; a quad's lanes each decode one row's block header
// (q even: row g, odd: row g + 8) and share the factors by shuffles.
// A format F (MmvQ4K, MmvQ6K, … and their A8 twins) names its activation quant type F::XE.
//
//   W: [n_out][row_bytes]   XQ: [n_tok][K] F::XE   XS, XSUM: [n_tok][K/32]   Y: [n_tok][ldy] f32
//   K % 256 == 0, 1 <= n_tok <= 8 (token columns past n_tok read the last token, not written).

#define MMV_WARPS 8

// The compiler may not recompute a value passed through here (keeps per-thread bases in
// registers instead of rebuilding them from the kernel parameters inside the loop).
template <class T>
__device__ __forceinline__ T* opaque(T* p) {
    asm volatile("" : "+l"(p));
    return p;
}

// The other row's four factors (lane ^ 1 holds them); returns (row g, row g + 8) in fa, fb.
__device__ __forceinline__ void quad_rows(const float (&mine)[4], int q, float (&fa)[4],
                                          float (&fb)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float other = __shfl_xor_sync(0xffffffffu, mine[i], 1);
        fa[i] = (q & 1) ? other : mine[i];
        fb[i] = (q & 1) ? mine[i] : other;
    }
}

// Q6_K helpers (the formats: mmv_a16.cu / mmv_a8.cu). A 2-aligned word as two 16-bit halves:
__device__ __forceinline__ u32 ld_u32_a2(const u8* p) {
    const unsigned short* h = (const unsigned short*)p;
    return (u32)__ldg(h) | ((u32)__ldg(h + 1) << 16);
}
// The A fragment (rows g, g + 8 or the paired tiles' two units) of Q6_K group j from the runs'
// bytes 4q .. 4q+3: 6-bit quants minus 32 as signed bytes.
__device__ __forceinline__ void mmv_q6_frag(const u32 (&A)[2], const u32 (&B)[2], const u32 (&H)[2],
                                            int j, u32 (&a)[2]) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const u32 lq = j & 1 ? B[i] : A[i];
        const u32 nib = (lq >> (j & 2 ? 4 : 0)) & 0x0F0F0F0Fu;
        const u32 hb = ((H[i] >> (2 * j)) & 0x03030303u) << 4;
        a[i] = __vsub4(nib | hb, 0x20202020u);
    }
}
// The four group scales d · s of a Q6_K unit at part pt (the 16-bit pairs s01, s23, d's bits).
__device__ __forceinline__ void mmv_q6_scales(u32 s01, u32 s23, u32 dbits, int pt,
                                              float (&sc)[4]) {
    const float d = h2f((u16)dbits);
    const u32 sh = 8 * pt;
    sc[0] = q6_scale(d, (i8)((s01 >> sh) & 0xFF));
    sc[1] = q6_scale(d, (i8)((s01 >> (16 + sh)) & 0xFF));
    sc[2] = q6_scale(d, (i8)((s23 >> sh) & 0xFF));
    sc[3] = q6_scale(d, (i8)((s23 >> (16 + sh)) & 0xFF));
}

// Q6_K-P helpers (the layout: MmvQ6KPLoad below): a block pair's offset, and a unit's scale
// word as Q6_K's 16-bit scale pairs at part 0.
__device__ __forceinline__ u32 q6p_pair_off(int blk) { return (u32)(blk >> 1) * 432u; }
__device__ __forceinline__ void q6p_scale_pairs(u32 w, u32& s01, u32& s23) {
    s01 = __byte_perm(w, 0u, 0x4140);
    s23 = __byte_perm(w, 0u, 0x4342);
}

// Activation loads of a format XE: 8 / 4 consecutive quants as one vector.
template <class XE>
struct MmvX;
template <>
struct MmvX<short> {
    typedef uint4 V8;
    typedef uint2 V4;
};
template <>
struct MmvX<signed char> {
    typedef uint2 V8;
    typedef u32 V4;
};

// ---- Q4_K loads (both activation formats): unit c of a 144-byte block = sub-blocks 2c, 2c+1
// (low, high nibbles of 32 bytes). Thread q feeds values 8q .. 8q+7 of each sub-block (k slots
// 4q.. and 16+4q..). The formats add `consume` (mmv_a16.cu, mmv_a8.cu).
template <class XE_>
struct MmvQ4KLoad {
    typedef XE_ XE;
    typedef typename MmvX<XE>::V8 V8;
    struct Bases {
        const u8 *wh, *wa, *wb;  // header of this lane's row; quants of rows g, g + 8
        const XE* x;             // token g: value 8q of unit 0
    };
    struct In {
        uint4 h;       // this lane's row's block header: d, dmin, 12 scale bytes
        uint2 qa, qb;  // quant bytes 8q .. 8q+7 of the unit's 32, rows g, g + 8
        V8 x0, x1;     // token g: quants 8q .. 8q+7 of sub-blocks 0, 1
    };
    static __device__ __forceinline__ Bases bases(const u8* W, u64 row_bytes, int row0, int n_out,
                                                  const XE* XQ, int K, int n_tok, int c) {
        const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
        Bases b;
        b.wh = opaque(W + (u64)min(row0 + g + 8 * (q & 1), n_out - 1) * row_bytes);
        b.wa = opaque(W + (u64)min(row0 + g, n_out - 1) * row_bytes + 16 + 32 * c + 8 * q);
        b.wb = opaque(W + (u64)min(row0 + g + 8, n_out - 1) * row_bytes + 16 + 32 * c + 8 * q);
        b.x = opaque(XQ + (size_t)min(g, n_tok - 1) * K + 8 * q);
        return b;
    }
    static __device__ __forceinline__ void fetch(const Bases& b, int u, In& in) {
        const int bo = (u >> 2) * 144;
        in.h = __ldg((const uint4*)(b.wh + bo));
        in.qa = __ldg((const uint2*)(b.wa + bo));
        in.qb = __ldg((const uint2*)(b.wb + bo));
        in.x0 = *(const V8*)(b.x + 64 * u);
        in.x1 = *(const V8*)(b.x + 64 * u + 32);
    }
};

// ---- Q6_K-P loads (muser_cuda::q6pad; both activation formats): unit c of block blk at pair
// (blk / 2) · 432 + 192 (blk % 2) + 48c — runs A, B, H at +0, +16, +32 (aligned words) — its
// scale word (group order) at 384 + 16 (blk % 2) + 4c of the pair, d at 416 + 2 (blk % 2).
// Thread q feeds l = 4q .. 4q+3 of each group of 16 (as Q6_K's).
template <class XE_>
struct MmvQ6KPLoad {
    typedef XE_ XE;
    typedef typename MmvX<XE>::V4 V4;
    struct Bases {
        const u8 *wh, *wa, *wb;  // row base of this lane's row; rows g, g + 8 (unit offset in)
        const XE* x;             // token g: value 16pt + 4q of unit 0's half
    };
    struct In {
        u32 A[2], B[2], H[2];  // rows g, g + 8: bytes 4q .. 4q+3 of runs A, B and qh
        u32 s01, s23;          // this lane's row: the unit's scales as Q6_K's pairs at part 0
        u32 d;                 // this lane's row: d's f16 bits
        V4 x[4];               // token g: quants 4q .. 4q+3 of groups 0..3
    };
    static __device__ __forceinline__ Bases bases(const u8* W, u64 row_bytes, int row0, int n_out,
                                                  const XE* XQ, int K, int n_tok, int c) {
        const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
        const int h = c >> 1, pt = c & 1;
        Bases b;
        b.wh = opaque(W + (u64)min(row0 + g + 8 * (q & 1), n_out - 1) * row_bytes);
        b.wa = opaque(W + (u64)min(row0 + g, n_out - 1) * row_bytes + 48 * c + 4 * q);
        b.wb = opaque(W + (u64)min(row0 + g + 8, n_out - 1) * row_bytes + 48 * c + 4 * q);
        b.x = opaque(XQ + (size_t)min(g, n_tok - 1) * K + 128 * h + 16 * pt + 4 * q);
        return b;
    }
    static __device__ __forceinline__ void fetch(const Bases& b, int u, In& in) {
        const int blk = u >> 2, e = blk & 1;
        const u32 po = q6p_pair_off(blk), bo = po + 192 * e;
        const u8* r[2] = {b.wa + bo, b.wb + bo};
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            in.A[i] = __ldg((const u32*)r[i]);
            in.B[i] = __ldg((const u32*)(r[i] + 16));
            in.H[i] = __ldg((const u32*)(r[i] + 32));
        }
        q6p_scale_pairs(__ldg((const u32*)(b.wh + po + 384 + 16 * e + 4 * (u & 3))), in.s01,
                        in.s23);
        in.d = __ldg((const unsigned short*)(b.wh + po + 416 + 2 * e));
        const XE* x = b.x + 256 * blk;
#pragma unroll
        for (int g = 0; g < 4; ++g) in.x[g] = *(const V4*)(x + 32 * g);
    }
};

// The tokens' group factors (xs, xs · xsum) of NT token columns into fac[K/32][NT] (columns
// past n_tok repeat the last token); the whole block takes part.
template <int NT>
__device__ __forceinline__ void mmv_stage_factors(const float* __restrict__ XS,
                                                  const int* __restrict__ XSUM, int kg,
                                                  int n_tok, float2* fac) {
    static_assert(NT == 4 || NT == 8, "mmv_stage_factors: 4 or 8 token columns");
    for (int i = threadIdx.x; i < kg * NT; i += 32 * MMV_WARPS) {
        const int grp = i >> (NT == 8 ? 3 : 2), t = min(i & (NT - 1), n_tok - 1);
        const float xs = XS[(size_t)t * kg + grp];
        fac[i] = make_float2(xs, a16_xsm(xs, XSUM[(size_t)t * kg + grp]));
    }
}

// A warp's units from u in `next` order (-1 ends), two buffers in turn: the next unit's loads
// in flight during this unit's MMAs (after the last unit, its own again: a cache hit, so the
// loads stay unconditional). fetch(u, in), consume(in, u).
template <class In, class Next, class Fetch, class Consume>
__device__ __forceinline__ void mmv_walk(int u, Next next, Fetch fetch, Consume consume) {
    In x0, x1;
    fetch(u, x0);
    for (;;) {
        int un = next(u);
        fetch(un >= 0 ? un : u, x1);
        consume(x0, u);
        if (un < 0) break;
        u = un;
        un = next(u);
        fetch(un >= 0 ? un : u, x0);
        consume(x1, u);
        if (un < 0) break;
        u = un;
    }
}

template <class F>
__device__ __forceinline__ void mmv_body(const u8* __restrict__ W, u64 row_bytes,
                                         const typename F::XE* __restrict__ XQ, const float* __restrict__ XS,
                                         const int* __restrict__ XSUM, int K, float* __restrict__ Y,
                                         int ldy, int n_out, int n_tok) {
    __shared__ __align__(16) float red[32][32][4];  // [virtual lane][thread][element]
    extern __shared__ __align__(16) float2 fac[];   // [K/32][8 tokens]: (xs, xs * xsum)
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int row0 = blockIdx.x * 16, kg = K / 32, c = warp & 3;
    mmv_stage_factors<8>(XS, XSUM, kg, n_tok, fac);
    const typename F::Bases b = F::bases(W, row_bytes, row0, n_out, XQ, K, n_tok, c);
    const float4* fq = (const float4*)(fac + 2 * q);  // tokens 2q, 2q + 1 of group 0
    const int n_units = K / 64;
    for (int v = warp; v < 32; v += MMV_WARPS)
        if (v >= n_units) *(float4*)red[v][lane] = make_float4(0.f, 0.f, 0.f, 0.f);
    __syncthreads();  // the factors are staged
    if (warp < n_units) {
        auto next = [&](int u) {
            const int v = u & 31;
            return u + 32 < n_units ? u + 32 : (v + MMV_WARPS < min(32, n_units) ? v + MMV_WARPS : -1);
        };
        float p[4] = {0.f, 0.f, 0.f, 0.f};
        // Chain unit u; after a virtual lane's last unit its partial goes to shared memory.
        auto consume = [&](const typename F::In& in, int u) {
            F::consume(in, u, c, fq, p);
            if (u + 32 >= n_units) {
                *(float4*)red[u & 31][lane] = make_float4(p[0], p[1], p[2], p[3]);
#pragma unroll
                for (int e = 0; e < 4; ++e) p[e] = 0.f;
            }
        };
        mmv_walk<typename F::In>(
            warp, next, [&](int u, typename F::In& in) { F::fetch(b, u, in); }, consume);
    }
    __syncthreads();
    if (warp < 4) {
        const int e = warp;
        float total = red[0][lane][e];
        for (int j = 1; j < 32; ++j) total = __fadd_rn(total, red[j][lane][e]);
        const int row = row0 + g + 8 * (e >> 1), t = 2 * q + (e & 1);
        if (row < n_out && t < n_tok) Y[(size_t)t * ldy + row] = total;
    }
}

// A tensor-core packed-rows kernel: BODY (mmv_body / mmv_pair_body) for format F.
#define MMV_KERNEL(NAME, BODY, F)                                                               \
    extern "C" __global__ void __launch_bounds__(32 * MMV_WARPS, 2)                             \
        NAME(const u8* W, u64 row_bytes, const F::XE* XQ, const float* XS, const int* XSUM,     \
             int K, float* Y, int ldy, int n_out, int n_tok) {                                  \
        PDL_ENTRY()                                                                             \
        BODY<F>(W, row_bytes, XQ, XS, XSUM, K, Y, ldy, n_out, n_tok);                           \
    }
