// norm.cu — RMSNorm family. One block per token row; sums of squares in f64 (like the CPU
// route), combined in a fixed order (block_sum_f64), so a row's result never depends on
// anything but the row.
//
// rmsnorm_rows:       Y[t] = X[t] * s(X[t]) (* W)                   (W may be null)
// embed_finish:       X[t] = rmsnorm(X[t]) if do_norm, then * scale (embedding post-processing)
// residual_norm:      X[t] += (O[t] * s(O[t], eps_post)) * W_post;  H[t] = X[t] * s(X[t], eps) * W_next
// All buffers [n_tok][n] f32, rows contiguous.

#define NORM_THREADS 1024

// Each thread's partial sum runs over i = tid, tid + blockDim, ... in that order (loads
// unrolled so they are in flight together); then the fixed block reduction.
__device__ __forceinline__ float rms_scale(const float* x, int n, float eps, double* red) {
    double s = 0.0;
    int i = threadIdx.x;
    for (; i + 3 * (int)blockDim.x < n; i += 4 * blockDim.x) {
        const double a = x[i], b = x[i + blockDim.x], c = x[i + 2 * blockDim.x],
                     d = x[i + 3 * blockDim.x];
        s += a * a;
        s += b * b;
        s += c * c;
        s += d * d;
    }
    for (; i < n; i += blockDim.x) s += (double)x[i] * (double)x[i];
    s = block_sum_f64(s, red);
    return (float)(1.0 / sqrt(s / (double)n + (double)eps));
}

extern "C" __global__ void __launch_bounds__(NORM_THREADS)
    rmsnorm_rows(const float* X, const float* W, float* Y, int n, float eps, const StepParams* sp) {
    __shared__ double red[33];
    const int t = blockIdx.x;
    if ((u32)t >= sp->n_tok) return;
    const float* x = X + (size_t)t * n;
    float* y = Y + (size_t)t * n;
    const float s = rms_scale(x, n, eps, red);
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = W ? (x[i] * s) * W[i] : x[i] * s;
}

extern "C" __global__ void __launch_bounds__(NORM_THREADS)
    embed_finish(float* X, int n, int do_norm, float eps, float scale, const StepParams* sp) {
    __shared__ double red[33];
    const int t = blockIdx.x;
    if ((u32)t >= sp->n_tok) return;
    float* x = X + (size_t)t * n;
    const float s = do_norm ? rms_scale(x, n, eps, red) : 1.0f;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float v = do_norm ? x[i] * s : x[i];
        if (scale != 1.0f) v *= scale;
        x[i] = v;
    }
}

extern "C" __global__ void __launch_bounds__(NORM_THREADS)
    residual_norm(const float* O, const float* Wpost, float eps_post, float* X, const float* Wnext,
                  float eps, float* H, int n, const StepParams* sp) {
    __shared__ double red[33];
    const int t = blockIdx.x;
    if ((u32)t >= sp->n_tok) return;
    const float* o = O + (size_t)t * n;
    float* x = X + (size_t)t * n;
    const float so = rms_scale(o, n, eps_post, red);
    for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] += (o[i] * so) * Wpost[i];
    __syncthreads();
    if (Wnext) {
        const float sx = rms_scale(x, n, eps, red);
        float* h = H + (size_t)t * n;
        for (int i = threadIdx.x; i < n; i += blockDim.x) h[i] = (x[i] * sx) * Wnext[i];
    }
}

// residual_norm fused with the A16 quantization of H (default; MUSER_CUDA_FUSE=0 for A/B): the same arithmetic
// as residual_norm followed by quant_a16 — bit-identical outputs — with every value of the row
// held in registers (one latency round per pass) and one launch instead of two.
// Needs n <= 8 * NORM_THREADS, n % 32 == 0 (checked on the host) and a non-null Wnext (the
// last layer uses residual_norm: its h is quantized by the output projection); block =
// NORM_THREADS.
#define RQ_MAX 8
extern "C" __global__ void __launch_bounds__(NORM_THREADS)
    residual_norm_q(const float* O, const float* Wpost, float eps_post, float* X,
                    const float* Wnext, float eps, float* H, int n, short* XQ, float* XS,
                    int* XSUM, const StepParams* sp) {
    __shared__ double red[33];
    const int t = blockIdx.x;
    if ((u32)t >= sp->n_tok) return;
    const float* o = O + (size_t)t * n;
    float* x = X + (size_t)t * n;
    const int B = blockDim.x, tid = threadIdx.x;
    float ov[RQ_MAX], xv[RQ_MAX];
#pragma unroll
    for (int k = 0; k < RQ_MAX; ++k) {
        const int i = tid + k * B;
        ov[k] = i < n ? o[i] : 0.f;
        xv[k] = i < n ? x[i] : 0.f;
    }
    double s = 0.0;
#pragma unroll
    for (int k = 0; k < RQ_MAX; ++k)
        if (tid + k * B < n) s += (double)ov[k] * (double)ov[k];
    s = block_sum_f64(s, red);
    const float so = (float)(1.0 / sqrt(s / (double)n + (double)eps_post));
#pragma unroll
    for (int k = 0; k < RQ_MAX; ++k) {
        const int i = tid + k * B;
        if (i < n) {
            xv[k] += (ov[k] * so) * Wpost[i];
            x[i] = xv[k];
        }
    }
    double s2 = 0.0;
#pragma unroll
    for (int k = 0; k < RQ_MAX; ++k)
        if (tid + k * B < n) s2 += (double)xv[k] * (double)xv[k];
    s2 = block_sum_f64(s2, red);
    const float sx = (float)(1.0 / sqrt(s2 / (double)n + (double)eps));
    float* h = H + (size_t)t * n;
#pragma unroll
    for (int k = 0; k < RQ_MAX; ++k) {
        const int i0 = k * B + (tid & ~31);  // first index of this warp's group
        if (i0 < n) {                        // whole warp in or out (n % 32 == 0, B % 32 == 0)
            const int i = tid + k * B;
            const float hv = (xv[k] * sx) * Wnext[i];
            h[i] = hv;
            a16_group(hv, XQ + (size_t)t * n + i0, XS + (size_t)t * (n / 32) + i0 / 32,
                      XSUM + (size_t)t * (n / 32) + i0 / 32);
        }
    }
}
