// matvec.cu — quantized weight × f32 activation products, for one token (decode) or NT tokens
// at once (prefill chunks, packed decode). Needs common.cuh + formats.cuh before it.
//
// Y[t][r] = sum_k W[r][k] * X[t][k]   W: [n_out][row_bytes] blocks, X: [n_tok][ldx] f32,
// Y: [n_tok][ldy] f32.
// One warp per output row; lane `l` takes units l, l+32, l+64, ... of the row (a unit is a
// fixed slice of a block, see formats.cuh), accumulates them in that order, and the warp
// butterfly-sums the 32 partials. The sequence of operations for one (row, token) is the same
// for every NT and every grid, so decode, prefill and packed batches agree bit for bit.

#define MV_WARPS 4

template <class F, int NT>
__device__ __forceinline__ void matvec_body(const u8* __restrict__ W, u64 row_bytes,
                                            const float* __restrict__ X, int ldx,
                                            float* __restrict__ Y, int ldy,
                                            int n_in, int n_out, int n_tok) {
    PDL_ENTRY()
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * MV_WARPS + (threadIdx.x >> 5);
    const int t0 = blockIdx.y * NT;
    if (row >= n_out) return;
    const int nt = min(NT, n_tok - t0);
    const u8* wr = W + (u64)row * row_bytes;
    const float* x = X + (size_t)t0 * ldx;
    const int n_units = (n_in / F::BLOCK_VALS) * F::UNITS;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.f;
    if (nt == NT) {
        for (int g = lane; g < n_units; g += 32) {
            const int blk = g / F::UNITS, u = g % F::UNITS;
            F::template dot<NT>(wr + (u64)blk * F::BLOCK_BYTES, u, x + blk * F::BLOCK_VALS, ldx, acc);
        }
    } else {
        // Tail of a chunk: same per-token sequence, one token slot at a time.
        for (int g = lane; g < n_units; g += 32) {
            const int blk = g / F::UNITS, u = g % F::UNITS;
            for (int t = 0; t < nt; ++t) {
                float a1[1] = {acc[t]};
                F::template dot<1>(wr + (u64)blk * F::BLOCK_BYTES, u,
                                   x + (size_t)t * ldx + blk * F::BLOCK_VALS, ldx, a1);
                acc[t] = a1[0];
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const float s = warp_sum(acc[t]);
        if (lane == 0 && t < nt) Y[(size_t)(t0 + t) * ldy + row] = s;
    }
}

#define MV_KERNEL(NAME, F, NT)                                                                \
    extern "C" __global__ void __launch_bounds__(32 * MV_WARPS)                              \
        NAME(const u8* W, u64 row_bytes, const float* X, int ldx, float* Y, int ldy, int n_in, \
             int n_out, int n_tok) {                                                          \
        matvec_body<F, NT>(W, row_bytes, X, ldx, Y, ldy, n_in, n_out, n_tok);              \
    }


MV_KERNEL(mv_q4_k_t1, FQ4K, 1)
MV_KERNEL(mv_q4_k_t8, FQ4K, 8)
MV_KERNEL(mv_q5_k_t1, FQ5K, 1)
MV_KERNEL(mv_q5_k_t8, FQ5K, 8)
MV_KERNEL(mv_q6_k_t1, FQ6K, 1)
MV_KERNEL(mv_q6_k_t8, FQ6K, 8)
MV_KERNEL(mv_q8_0_t1, FQ80, 1)
MV_KERNEL(mv_q8_0_t8, FQ80, 8)
MV_KERNEL(mv_q5_0_t1, FQ50, 1)
MV_KERNEL(mv_q5_0_t8, FQ50, 8)
MV_KERNEL(mv_f16_t1, FF16, 1)
MV_KERNEL(mv_f16_t8, FF16, 8)
MV_KERNEL(mv_f32_t1, FF32, 1)
MV_KERNEL(mv_f32_t8, FF32, 8)

// Embedding lookup: OUT[t][:] = dequant(W[tokens[t]]) ; one block per token, one thread per
// unit. Rows of token ids >= n_rows are never read (ids are checked on the host).
template <class F>
__device__ __forceinline__ void embed_body(const u8* W, u64 row_bytes, const u32* tokens,
                                           const StepParams* sp, float* out, int n_in) {
    PDL_ENTRY()
    const int t = blockIdx.x;
    if ((u32)t >= sp->n_tok) return;
    const u8* wr = W + (u64)tokens[t] * row_bytes;
    const int n_units = (n_in / F::BLOCK_VALS) * F::UNITS;
    for (int g = threadIdx.x; g < n_units; g += blockDim.x) {
        const int blk = g / F::UNITS, u = g % F::UNITS;
        F::dequant(wr + (u64)blk * F::BLOCK_BYTES, u, out + (size_t)t * n_in + blk * F::BLOCK_VALS);
    }
}

#define EMBED_KERNEL(NAME, F)                                                                   \
    extern "C" __global__ void NAME(const u8* W, u64 row_bytes, const u32* tokens,             \
                                    const StepParams* sp, float* out, int n_in) {               \
        embed_body<F>(W, row_bytes, tokens, sp, out, n_in);                                     \
    }

EMBED_KERNEL(embed_q4_k, FQ4K)
EMBED_KERNEL(embed_q5_k, FQ5K)
EMBED_KERNEL(embed_q6_k, FQ6K)
EMBED_KERNEL(embed_q8_0, FQ80)
EMBED_KERNEL(embed_q5_0, FQ50)
EMBED_KERNEL(embed_f16, FF16)
EMBED_KERNEL(embed_f32, FF32)
