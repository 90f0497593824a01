// common.cuh — prepended to every Muser kernel module by the registry (NVRTC, no system headers).
// Owns: fixed-width typedefs, f16 <-> f32 conversion through PTX (no cuda_fp16.h needed), and
// the deterministic reductions every kernel uses, exact small-integer → float conversions and
// the Q4_K/Q5_K scale-pair decoding both format headers share. Invariant: every reduction here combines its
// inputs in one fixed order, so a value never depends on launch shape or timing.

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;

#define MUSER_INF __int_as_float(0x7f800000)

// The per-element activation formulas, one definition for every kernel that applies them
// (elementwise.cu's kernels, the attention combine's gate, matvec_h16.cu's fused FFN epilogue):
// the same expression compiled under the same math options gives the same bits.
__device__ __forceinline__ float tanh_exp(float y) {
    const float e = expf(2.0f * fabsf(y));
    return copysignf(1.0f - 2.0f / (e + 1.0f), y);
}
__device__ __forceinline__ float ew_sigmoid_gate(float a, float g) { return a / (1.0f + expf(-g)); }
__device__ __forceinline__ float ew_swiglu(float x, float u) { return x / (1.0f + expf(-x)) * u; }
__device__ __forceinline__ float ew_geglu(float x, float u) {
    const float K = 0.7978846f;
    return 0.5f * x * (1.0f + tanh_exp(K * (x + 0.044715f * x * x * x))) * u;
}

// Programmatic dependent launch (sm_90; host: `Gpu::set_pdl`, `MUSER_CUDA_PDL`). A kernel
// launched with the attribute may start while the previous kernel of its stream/graph still
// runs. Invariant of every Muser kernel: each thread calls pdl_wait() before it reads anything
// another kernel of the step writes and before its first global write; only loads of data no
// kernel writes (weights, norm vectors) may be issued before it (the NVRTC test checks that
// every entry point's PTX contains the wait). pdl_trigger() lets the next kernel launch now (it
// still waits in its own pdl_wait for this whole grid to finish and its writes to be visible);
// kernels call it right after the wait, so at most one grid waits ahead. Without the attribute
// both are no-ops, so results never depend on the switch.
// -DPDL_EARLY=1 (`MUSER_CUDA_PDL_EARLY=1`): every kernel triggers before its wait instead,
// so the next kernel may launch — and issue its weight loads — while this one still waits for
// its own predecessor: a matmul behind a small step can start during the previous matmul's tail.
// No grid waits on a later one (a grid's dependents launch only once all its blocks have started),
// and each still waits for its predecessor's completion, which followed that grid's predecessor's:
// the same reads and writes, the same bits. Session 42 (full forge): slower, tg128 143.60 /
// 144.05 vs 148.99 / 149.42 — so off.
__device__ __forceinline__ void pdl_trigger() {
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}
__device__ __forceinline__ void pdl_wait() {
#if defined(PDL_EARLY) && PDL_EARLY
    pdl_trigger();
#endif
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
}
// Both, at the top of a kernel that prefetches nothing.
#define PDL_ENTRY() \
    pdl_wait();     \
    pdl_trigger();

// cp.async groups: close the copies issued so far into one group; wait until at most N groups
// are still in flight (the wait is per thread: a barrier must follow before other threads'
// copies are read).
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Per-step scalars, read from device memory so a captured graph replays without re-capture.
// Two kinds of step (host image: `muser_cuda::launch::StepParams`, 80 bytes):
// - one sequence (per_row == 0): token t sits at position pos0 + t of sequence seq0 (prefill
//   chunks and single-sequence decode);
// - packed decode rows (per_row != 0): row t is one token of sequence seq[t] at position
//   pos[t], t < n_tok <= MUSER_MAX_BATCH (batched decode: each row its own sequence).
// A sequence's K/V rows live at [seq][cap] in each layer's cache (step_kv_row).
#define MUSER_MAX_BATCH 8
struct StepParams {
    u32 pos0;     // position of the first token of this step (one sequence)
    u32 n_tok;    // tokens (rows) in this step
    u32 seq0;     // the sequence of a one-sequence step
    u32 per_row;  // nonzero: pos[] and seq[] give each row's position and sequence
    u32 pos[MUSER_MAX_BATCH];
    u32 seq[MUSER_MAX_BATCH];
};

__device__ __forceinline__ u32 step_pos(const StepParams* sp, int t) {
    return sp->per_row ? sp->pos[t] : sp->pos0 + (u32)t;
}
__device__ __forceinline__ u32 step_seq(const StepParams* sp, int t) {
    return sp->per_row ? sp->seq[t] : sp->seq0;
}
// Row of token t's sequence ring holding position `pos` in a `cap`-row-per-sequence cache.
__device__ __forceinline__ u64 step_kv_row(const StepParams* sp, int t, u32 pos, int cap) {
    return (u64)step_seq(sp, t) * (u64)cap + (u64)(pos % (u32)cap);
}

__device__ __forceinline__ float h2f(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ u16 f2h(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// Unaligned little-endian loads from byte arrays (block layouts are not 4-byte aligned).
__device__ __forceinline__ u16 ld_u16(const u8* p) { return (u16)p[0] | ((u16)p[1] << 8); }
__device__ __forceinline__ u32 ld_u32(const u8* p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

// Butterfly sums: every lane ends with the same value (IEEE addition commutes), and the
// pairing is fixed, so the result is a fixed function of the 32 inputs.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum_f64(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The A16 matmul kernels' final combine: lane j < N returns ((v_0[j] + v_1[j]) + v_2[j]) + ... +
// v_31[j], where v_l[] is lane l's array — the 32 partials summed left to right in lane order.
// That order (unlike a butterfly) lets a tensor-core tile that visits the partials one after
// another follow it with a single running total (mmq_a16.cu). Lanes >= N return 0.
// `red` is this warp's own 16-byte-aligned shared memory of N * 36 floats; N <= 8 (the float4
// reads of lanes j and j + 8 would share banks).
template <int N>
__device__ __forceinline__ float lane_seq_sum(const float* v, float* red) {
    static_assert(N >= 1 && N <= 8, "lane_seq_sum: 1..8 values per lane");
    const int lane = threadIdx.x & 31;
    __syncwarp();  // a previous call's reads of red are done
#pragma unroll
    for (int j = 0; j < N; ++j) red[36 * j + lane] = v[j];
    __syncwarp();
    float s = 0.f;
    if (lane < N) {
        const float4* r = (const float4*)(red + 36 * lane);
        float4 q = r[0];
        s = __fadd_rn(__fadd_rn(__fadd_rn(q.x, q.y), q.z), q.w);
#pragma unroll
        for (int m = 1; m < 8; ++m) {
            q = r[m];
            s = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(s, q.x), q.y), q.z), q.w);
        }
    }
    return s;
}

// Block-wide f64 sum for blocks of up to 32 warps; `red` is >= 32 doubles of shared memory.
// Each warp's butterfly total, then the warp totals (zeros past the last warp) in a second
// butterfly: a fixed tree, every thread gets the result.
__device__ __forceinline__ double block_sum_f64(double v, double* red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum_f64(v);
    __syncthreads();  // red may still be read by a previous reduction
    if (lane == 0) red[warp] = v;
    __syncthreads();
    return warp_sum_f64(lane < nw ? red[lane] : 0.0);
}

// A16 quantization of one group of 32 values held one per lane (the whole warp calls it):
// amax = max|v|, d = amax/32767, q = rint(v * (32767/amax)) clamped (0 when amax = 0), and the
// exact sum of the quants. Lane 0 writes the scale and the sum. The one definition used by
// quant_a16 and the fused kernels (muser_quant::a16 defines the same on the CPU).
__device__ __forceinline__ void a16_group(float v, short* q_out, float* d_out, int* sum_out) {
    const int lane = threadIdx.x & 31;
    const float amax = warp_max(fabsf(v));
    int q = 0;
    float d = 0.f;
    if (amax > 0.f) {
        const float id = 32767.0f / amax;
        q = (int)fminf(fmaxf(rintf(v * id), -32767.f), 32767.f);
        d = amax / 32767.0f;
    }
    q_out[lane] = (short)q;
    int s = q;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) {
        *d_out = d;
        *sum_out = s;
    }
}

// A8 quantization of one group of 32 values held one per lane (muser_quant::a8's definition,
// `quantize_sub_ref`): amax = max|v|; if 0 < amax < inf, q = rint(v * (127/amax)) clamped to
// ±127 (NaN -> 0) and d = amax/127 (both divisions correctly rounded in every math variant),
// else all 0; the exact sum of the quants. Lane 0 writes the scale and the sum.
__device__ __forceinline__ void a8_group(float v, signed char* q_out, float* d_out, int* sum_out) {
    const int lane = threadIdx.x & 31;
    const float amax = warp_max(fabsf(v));
    int q = 0;
    float d = 0.f;
    if (amax > 0.f && amax <= 3.40282347e38f) {
        const float id = __fdiv_rn(127.0f, amax);
        q = v == v ? (int)fminf(fmaxf(rintf(__fmul_rn(v, id)), -127.f), 127.f) : 0;
        d = __fdiv_rn(amax, 127.0f);
    }
    q_out[lane] = (signed char)q;
    int s = q;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) {
        *d_out = d;
        *sum_out = s;
    }
}
// The quantization of the activation format the output pointer names (A16: short, A8: signed
// char), for the kernels that fuse it (one body, two entry points).
__device__ __forceinline__ void quant_group(float v, short* q, float* d, int* sum) {
    a16_group(v, q, d, sum);
}
__device__ __forceinline__ void quant_group(float v, signed char* q, float* d, int* sum) {
    a8_group(v, q, d, sum);
}

// An integer in [0, 2^23) as float, exactly, on the FMA pipe (no conversion unit): the same
// value as (float)v.
__device__ __forceinline__ float u23f(u32 v) {
    return __uint_as_float(0x4B000000u | v) - 8388608.0f;
}
// A small signed integer in [-2^22, 2^22) as float, exactly: the same value as (float)v.
__device__ __forceinline__ float i22f(int v) {
    return __int_as_float(0x4B400000 + v) - 12582912.0f;
}

// The 6-bit scales and mins of the sub-block pair (2c, 2c+1) of a Q4_K/Q5_K block from its 12
// scale bytes (three little-endian words; used by formats.cuh and formats_a16.cuh): for j < 4, sc = s[j] & 63, m = s[j+4] & 63; for
// j >= 4, sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4, m = (s[j+4] >> 4) | (s[j] >> 6) << 4.
// Both bytes of a pair are handled at once (two 8-bit lanes of one word).
__device__ __forceinline__ void k4_scales_pair(const u32* sw, int c, float* sc0, float* m0,
                                               float* sc1, float* m1) {
    const u32 sh = 16 * (c & 1);
    const u32 A = sw[0] >> sh, B = sw[1] >> sh, C = sw[2] >> sh;
    u32 scp, mp;
    if (c < 2) {
        scp = A & 0x3F3Fu;
        mp = B & 0x3F3Fu;
    } else {
        scp = (C & 0x0F0Fu) | ((A >> 2) & 0x3030u);
        mp = ((C >> 4) & 0x0F0Fu) | ((B >> 2) & 0x3030u);
    }
    *sc0 = u23f(scp & 0xFFu);
    *sc1 = u23f((scp >> 8) & 0xFFu);
    *m0 = u23f(mp & 0xFFu);
    *m1 = u23f((mp >> 8) & 0xFFu);
}
