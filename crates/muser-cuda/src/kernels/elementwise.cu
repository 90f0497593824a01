// elementwise.cu — element-wise activations, gates and the logit soft-cap. Each element is
// computed alone (no reductions), in the same formulas as the CPU route (cpu/ops.rs).
// This module is compiled twice (strict and fast-math); the route picks per kernel.
//
// sigmoid_gate: A[i] /= 1 + exp(-G[i])                    A, G: [n_tok][width]
// swiglu:       G[i] = G[i] / (1 + exp(-G[i])) * U[i]     G, U: [n_tok][n_ff]
// geglu:        G[i] = 0.5 G (1 + tanh(k (G + 0.044715 G^3))) U
// scale_softcap: X[i] = cap * tanh(X[i] * scale / cap)  (cap <= 0: X[i] *= scale)
// `width` is the row width; rows beyond sp->n_tok are not touched.

__device__ __forceinline__ float tanh_exp(float y) {
    const float e = expf(2.0f * fabsf(y));
    return copysignf(1.0f - 2.0f / (e + 1.0f), y);
}

#define EW_GUARD                                                         \
    PDL_ENTRY()                                                          \
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;           \
    if (i >= (u64)sp->n_tok * (u64)width) return;

extern "C" __global__ void sigmoid_gate(float* A, const float* G, int width, const StepParams* sp) {
    EW_GUARD
    A[i] = A[i] / (1.0f + expf(-G[i]));
}

extern "C" __global__ void swiglu(float* G, const float* U, int width, const StepParams* sp) {
    EW_GUARD
    const float x = G[i];
    G[i] = x / (1.0f + expf(-x)) * U[i];
}

extern "C" __global__ void geglu(float* G, const float* U, int width, const StepParams* sp) {
    EW_GUARD
    const float K = 0.7978846f;
    const float x = G[i];
    G[i] = 0.5f * x * (1.0f + tanh_exp(K * (x + 0.044715f * x * x * x))) * U[i];
}

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
    const float v = A[i] / (1.0f + expf(-G[i]));
    A[i] = v;
    quant_group(v, XQ + qo, XS + so, XSUM + so);
}

template <class XE>
__device__ __forceinline__ void swiglu_q_body(float* G, const float* U, int width,
                                              const StepParams* sp, XE* XQ, float* XS, int* XSUM) {
    EWQ_HEAD
    const float x = G[i];
    const float v = x / (1.0f + expf(-x)) * U[i];
    G[i] = v;
    quant_group(v, XQ + qo, XS + so, XSUM + so);
}

template <class XE>
__device__ __forceinline__ void geglu_q_body(float* G, const float* U, int width,
                                             const StepParams* sp, XE* XQ, float* XS, int* XSUM) {
    EWQ_HEAD
    const float K = 0.7978846f;
    const float x = G[i];
    const float v = 0.5f * x * (1.0f + tanh_exp(K * (x + 0.044715f * x * x * x))) * U[i];
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
