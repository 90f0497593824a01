// elementwise.cu — element-wise activations, gates and the logit soft-cap. Each element is
// computed alone (no reductions), in the same formulas as the CPU route (cpu/ops.rs).
// This module is compiled twice (strict and fast-math); the route picks per kernel.
//
// sigmoid_gate: A[i] /= 1 + exp(-G[i])                    A, G: [n_tok][width]
// swiglu:       G[i] = G[i] / (1 + exp(-G[i])) * U[i]     G, U: [n_tok][n_ff]
// geglu:        G[i] = 0.5 G (1 + tanh(k (G + 0.044715 G^3))) U
// scale_softcap: X[i] = cap * tanh(X[i] * scale / cap)  (cap <= 0: X[i] *= scale)
// `width` is the row width; rows beyond sp->n_tok are not touched.

// The per-element formulas (ew_sigmoid_gate, ew_swiglu, ew_geglu): common.cuh, one definition
// for these kernels and the fused matmul epilogue (matvec_h16.cu mvh_glu_*).

#define EW_GUARD                                                         \
    PDL_ENTRY()                                                          \
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;           \
    if (i >= (u64)sp->n_tok * (u64)width) return;

extern "C" __global__ void sigmoid_gate(float* A, const float* G, int width, const StepParams* sp) {
    EW_GUARD
    A[i] = ew_sigmoid_gate(A[i], G[i]);
}

extern "C" __global__ void swiglu(float* G, const float* U, int width, const StepParams* sp) {
    EW_GUARD
    G[i] = ew_swiglu(G[i], U[i]);
}

extern "C" __global__ void geglu(float* G, const float* U, int width, const StepParams* sp) {
    EW_GUARD
    G[i] = ew_geglu(G[i], U[i]);
}

// The three above, also folding each row's largest magnitude into M[row] (the f16 route's
// `MUSER_CUDA_H16_ROWMAX`, on by default: act_h16_m then reads it instead of rescanning the
// row). A NaN counts as 0 and the maximum of non-negative floats is the maximum of their bits as unsigned integers
// — atomicMax gives act_h16's scan value exactly, in any order. M is zeroed before the step.
// The block first merges its warps' maxima per row and then issues one atomic per row it
// touches: one atomic per warp put 624 per row of a 512-token FFN step on the same L2 line and
// cost pp512 4% (4234.9 vs 4410.8 tok/s, session 26). Needs width % 32 == 0 (a warp never
// straddles two rows) and blockDim.x % 32 == 0; every thread of the block calls it (no early
// return: it synchronises the block), `valid` false past the step's rows.
__device__ __forceinline__ void ew_row_max(float r, bool valid, u64 i, int width, u32* M) {
    __shared__ u32 wmax[32];
    __shared__ u64 wrow[32];
    const int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    float a = valid && r == r ? fabsf(r) : 0.f;
    a = warp_max(a);
    if ((threadIdx.x & 31) == 0) {
        wmax[w] = __float_as_uint(a);
        wrow[w] = valid ? i / (u64)width : ~0ull;  // whole warps are valid or not
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    u64 row = wrow[0];
    u32 m = wmax[0];
    for (int k = 1; k <= nw; ++k) {
        if (k < nw && wrow[k] == row) {
            m = max(m, wmax[k]);
            continue;
        }
        if (row != ~0ull) atomicMax(M + row, m);
        if (k < nw) {
            row = wrow[k];
            m = wmax[k];
        }
    }
}
// X = f(X, Y) element-wise, then the row maxima.
#define EW_ROWMAX(NAME, F)                                                                     \
    extern "C" __global__ void NAME(float* X, const float* Y, int width, const StepParams* sp, \
                                    u32* M) {                                                  \
        PDL_ENTRY()                                                                            \
        const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;                              \
        const bool valid = i < (u64)sp->n_tok * (u64)width;                                    \
        float r = 0.f;                                                                         \
        if (valid) {                                                                           \
            r = F(X[i], Y[i]);                                                                 \
            X[i] = r;                                                                          \
        }                                                                                      \
        ew_row_max(r, valid, i, width, M);                                                     \
    }
EW_ROWMAX(sigmoid_gate_m, ew_sigmoid_gate)
EW_ROWMAX(swiglu_m, ew_swiglu)
EW_ROWMAX(geglu_m, ew_geglu)

extern "C" __global__ void scale_softcap(float* X, float scale, float cap, int width, int n_rows) {
    PDL_ENTRY()
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (u64)n_rows * (u64)width) return;
    if (cap > 0.0f) {
        X[i] = cap * tanh_exp(X[i] * scale / cap);
    } else {
        X[i] = X[i] * scale;
    }
}

// Element-wise ops fused with the quantization of their output (default; MUSER_CUDA_FUSE=0 for
// A/B): one warp per group of 32, the same per-element formula as the kernels above, then
// quant_group (A16: `*_q`, A8: `*_q8`) — outputs bit-identical to the unfused pair. Grid
// ((width/32)/8, n_tok), block 256.
#define EWQ_HEAD                                                                   \
    PDL_ENTRY()                                                                    \
    const int lane = threadIdx.x & 31;                                             \
    const int grp = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);           \
    const int t = blockIdx.y;                                                      \
    if (grp >= width / 32 || (u32)t >= sp->n_tok) return;                         \
    const u64 i = (u64)t * width + 32 * grp + lane;                                \
    const u64 qo = (u64)t * width + 32 * grp, so = (u64)t * (width / 32) + grp;

template <class XE>
__device__ __forceinline__ void sigmoid_gate_q_body(float* A, const float* G, int width,
                                                    const StepParams* sp, XE* XQ, float* XS,
                                                    int* XSUM) {
    EWQ_HEAD
    const float v = ew_sigmoid_gate(A[i], G[i]);
    A[i] = v;
    quant_group(v, XQ + qo, XS + so, XSUM + so);
}

template <class XE>
__device__ __forceinline__ void swiglu_q_body(float* G, const float* U, int width,
                                              const StepParams* sp, XE* XQ, float* XS, int* XSUM) {
    EWQ_HEAD
    const float v = ew_swiglu(G[i], U[i]);
    G[i] = v;
    quant_group(v, XQ + qo, XS + so, XSUM + so);
}

template <class XE>
__device__ __forceinline__ void geglu_q_body(float* G, const float* U, int width,
                                             const StepParams* sp, XE* XQ, float* XS, int* XSUM) {
    EWQ_HEAD
    const float v = ew_geglu(G[i], U[i]);
    G[i] = v;
    quant_group(v, XQ + qo, XS + so, XSUM + so);
}

// Entry points: A16 (`*_q`, XE = short) and A8 (`*_q8`, XE = signed char) quantization of the
// same values.
#define EWQ_KERNEL(NAME, BODY, XE, X, Y)                                                        \
    extern "C" __global__ void NAME(float* X, const float* Y, int width, const StepParams* sp, \
                                    XE* XQ, float* XS, int* XSUM) {                            \
        BODY(X, Y, width, sp, XQ, XS, XSUM);                                                   \
    }
EWQ_KERNEL(sigmoid_gate_q, sigmoid_gate_q_body, short, A, G)
EWQ_KERNEL(sigmoid_gate_q8, sigmoid_gate_q_body, signed char, A, G)
EWQ_KERNEL(swiglu_q, swiglu_q_body, short, G, U)
EWQ_KERNEL(swiglu_q8, swiglu_q_body, signed char, G, U)
EWQ_KERNEL(geglu_q, geglu_q_body, short, G, U)
EWQ_KERNEL(geglu_q8, geglu_q_body, signed char, G, U)

// Element-wise ops fused with the f16 route's activation step (`*_h16`): one block of
// EWH_THREADS per token (blockIdx.y), thread u owns the 32-value unit u (width % 64 == 0, width
// <= 32 · EWH_THREADS; checked on the host): the formula, X written as the plain kernel writes
// it, the row's largest magnitude (block max), then act_h16.cuh's unit from registers — the same
// bits as the plain kernel followed by act_h16. Grid (1, n_tok).
#define EWH_THREADS 1024
template <int OP>
__device__ __forceinline__ void ewh_body(float* X, const float* Y, int width, const StepParams* sp,
                                         u16* XH, u16* XSUM, u16* XSUM16, float* XINV) {
    __shared__ float red[32];
    PDL_ENTRY()
    const int t = blockIdx.y, u = threadIdx.x;
    if ((u32)t >= sp->n_tok) return;
    const bool mine = u < width / 32;
    float v[32];
    float amax = 0.f;
    if (mine) {
        float* x = X + (size_t)t * width + 32 * u;
        const float* y = Y + (size_t)t * width + 32 * u;
        // Every load first (X is written below: loads after a store would wait for it).
        float4 a[8], b[8];
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            a[q] = ((const float4*)x)[q];
            b[q] = ((const float4*)y)[q];
        }
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            const float av[4] = {a[q].x, a[q].y, a[q].z, a[q].w};
            const float bv[4] = {b[q].x, b[q].y, b[q].z, b[q].w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float r = OP == 0   ? ew_sigmoid_gate(av[e], bv[e])
                                : OP == 1 ? ew_swiglu(av[e], bv[e])
                                          : ew_geglu(av[e], bv[e]);
                v[4 * q + e] = r;
                amax = fmaxf(amax, fabsf(r));
            }
        }
#pragma unroll
        for (int q = 0; q < 8; ++q)
            ((float4*)x)[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
    }
    const int sh = h16_shift(h16_block_max(amax, red));
    if (u == 0) XINV[t] = ldexpf(1.f, -sh);
    if (mine)
        h16_unit_vals(v, u, ldexpf(1.f, sh), XH + (size_t)t * width, XSUM + (size_t)t * (width / 32),
                      XSUM16 + (size_t)t * (width / 16));
}
#define EWH_KERNEL(NAME, OP, X, Y)                                                              \
    extern "C" __global__ void __launch_bounds__(EWH_THREADS)                                   \
        NAME(float* X, const float* Y, int width, const StepParams* sp, u16* XH, u16* XSUM,    \
             u16* XSUM16, float* XINV) {                                                        \
        ewh_body<OP>(X, Y, width, sp, XH, XSUM, XSUM16, XINV);                                  \
    }
EWH_KERNEL(sigmoid_gate_h16, 0, A, G)
EWH_KERNEL(swiglu_h16, 1, G, U)
EWH_KERNEL(geglu_h16, 2, G, U)
