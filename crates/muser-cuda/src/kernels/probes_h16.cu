// probes_h16.cu — experiments' kernels (issue 5, the `mvh_persist` example; docs/cuda-f16.md),
// never launched by the engine and compiled only when an example asks for Module::ProbesH16.
// Compiled after matvec_h16.cu's source (its chains and fold).
//
// mvh_persist_q4h_s4: n_ph phases of one-token decode matmuls (Q4H) in one launch of resident
//   blocks, a grid barrier between phases where the engine has a kernel boundary — what the
//   launch ends cost. desc [n_ph][4] u64: W, n_out, K, Y. Block b takes row groups b,
//   b + gridDim.x, … of each phase with mvh's chains and fold (4 warps: mvh_q4h_s4's bits, which
//   the example checks); a warp requests its first piece of a phase before the barrier with
//   MVH_EARLY, as after the PDL wait. A block waits for every block to arrive from phase p − 1
//   before it works on or arrives at phase p (arrival: after its last fold, one fenced atomicAdd
//   on *bar). The spin is bounded (~2^31 cycles): past it, or once *err is set, it sets *err and
//   goes on — the kernel ends, the host reports the error.
//
// stream_phases: the bytes of n_ph phases (sdesc [n_ph][2] u64: W, its size in bytes — a multiple
//   of 16; Q4H's size depends on its scales' format, so the host says it) read once with 16-byte
//   loads, grid-stride, one 32-bit XOR per block into OUT[blockIdx.x] (so the loads cannot be
//   dropped) — a bandwidth floor: what the same bytes cost with no arithmetic, as one launch per
//   matrix (n_ph = 1) or per several.
__device__ __forceinline__ u32 ld_acquire_gpu(const u32* p) {
    u32 v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
struct GridWait {
    const u32* bar;
    u32 target;  // 0: no wait (phase 0, or a block's later row groups of a phase)
    u32* err;
    // Lane 0 spins; __syncwarp orders the warp's later reads after its acquire.
    __device__ __forceinline__ void operator()() const {
        if (target == 0) return;
        if ((threadIdx.x & 31) == 0) {
            const long long t0 = clock64();
            while (ld_acquire_gpu(bar) < target) {
                if (*(volatile u32*)err || clock64() - t0 > (1ll << 31)) {
                    atomicExch(err, 1u);
                    break;
                }
            }
        }
        __syncwarp();
    }
};

// Five blocks per SM (registers capped at 102), as many warps as mvh_q4h_s4 keeps resident.
extern "C" __global__ void __launch_bounds__(128, 5)
    mvh_persist_q4h_s4(const unsigned long long* desc, int n_ph, const u16* XH, const u16* XSUM,
                       const u16* XSUM16, const float* XINV, u32* bar, u32* err) {
    constexpr int S = 4;
    __shared__ float part[S][32][1][4];
    PDL_ENTRY()
    const int warp = threadIdx.x >> 5;
    const u32* sums = (const u32*)FmtQ4H::sums(XSUM, XSUM16);
    for (int p = 0; p < n_ph; ++p) {
        const u8* W = (const u8*)desc[4 * p];
        const int n_out = (int)desc[4 * p + 1], K = (int)desc[4 * p + 2];
        float* Y = (float*)desc[4 * p + 3];
        const int nsb = K / 256, groups = n_out / 16;
        const size_t pieces = (size_t)groups * nsb;
        GridWait wait{bar, (u32)p * gridDim.x, err};
        for (int G = blockIdx.x; G < groups; G += gridDim.x) {
            float acc[1][4] = {{0.f, 0.f, 0.f, 0.f}};
            mvh_chain<FmtQ4H, S, 1>(W, pieces, G, nsb, warp, K, XH, sums, 0, 1, acc, wait);
            wait.target = 0;  // waited
            mvh_finish<S, 1>(acc, part, G, 0, 1, XINV, 1.f, Y, n_out);
            __syncthreads();  // warp 0 has read `part` before the next row group writes it
        }
        wait();  // a block without row groups in this phase
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            atomicAdd(bar, 1u);
        }
    }
}

template <bool WAIT_FIRST>
__device__ __forceinline__ void stream_body(const unsigned long long* desc, int n_ph, u32* OUT) {
    if (WAIT_FIRST) pdl_wait();
    pdl_trigger();
    u32 x = 0;
    for (int p = 0; p < n_ph; ++p) {
        const uint4* W = (const uint4*)desc[2 * p];
        const size_t n16 = (size_t)desc[2 * p + 1] / 16;
        const size_t step = (size_t)gridDim.x * blockDim.x;
        size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
        // Four loads in flight per thread.
        for (; i + 3 * step < n16; i += 4 * step) {
            const uint4 a = __ldg(W + i), b = __ldg(W + i + step), c = __ldg(W + i + 2 * step),
                        d = __ldg(W + i + 3 * step);
            x ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^
                 d.z ^ d.w;
        }
        for (; i < n16; i += step) {
            const uint4 a = __ldg(W + i);
            x ^= a.x ^ a.y ^ a.z ^ a.w;
        }
    }
    if (!WAIT_FIRST) pdl_wait();
    for (int o = 16; o > 0; o >>= 1) x ^= __shfl_xor_sync(0xffffffffu, x, o);
    if ((threadIdx.x & 31) == 0) atomicXor(OUT + blockIdx.x, x);
}

// stream_phases waits for the previous kernel first (a dependent launch: the engine's chain);
// stream_phases_free reads first and waits only before its write (weights: no kernel writes
// them), so back-to-back launches overlap — the floor with no launch boundary in the way.
extern "C" __global__ void __launch_bounds__(256)
    stream_phases(const unsigned long long* desc, int n_ph, u32* OUT) {
    stream_body<true>(desc, n_ph, OUT);
}
extern "C" __global__ void __launch_bounds__(256)
    stream_phases_free(const unsigned long long* desc, int n_ph, u32* OUT) {
    stream_body<false>(desc, n_ph, OUT);
}

// stream_chains_q4h_s4 / stream_chains_x_q4h_s4: mvh_q4h_s4's grid and loads with no arithmetic —
// one block of 4 warps per 16-row group, warp w loading pieces w, w + 4, … of its group in
// order, the next one ahead in registers, the first before the PDL wait (MVH_EARLY's default) —
// each piece's registers XORed into one word per block (OUT[blockIdx.x % 1024]); the `_x` twin
// also makes each piece's activation and sum loads as mvh_piece does (one token). Between
// stream_phases (the bytes in the best order) and mvh (the same pieces plus the MMAs): is the
// gap the access pattern, the activation reads, or the arithmetic? (mvh_noact_q4h_s4 below is
// the third: the MMAs without the activation reads.)
// A probe's chain on mvh_q4h_s4's grid: warp w's pieces w, w + 4, … of block G's row group
// (Q4H), the next one ahead in registers, the first before the PDL wait; `piece(r, s)` per
// piece, in order.
template <class Piece>
__device__ __forceinline__ void probe_chain(const u8* W, int n_out, int K, Piece&& piece) {
    constexpr int S = 4;
    using F = FmtQ4H;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int G = blockIdx.x, nsb = K / 256;
    const size_t pieces = (size_t)(n_out / 16) * nsb;
    auto load = [&](int sb, F::Regs& rr) {
        const u8 *p0, *p1, *p2;
        piece_at<F>(W, pieces, (size_t)G * nsb + sb, p0, p1, p2);
        F::load_at<true>(p0, p1, p2, lane, g, t4, rr);
    };
    F::Regs r;
    int s = warp;
    if (s < nsb) load(s, r);
    PDL_ENTRY()
    for (; s < nsb; s += S) {
        F::Regs rn;
        if (s + S < nsb) load(s + S, rn);
        piece(r, s);
        r = rn;
    }
}

template <bool XLOAD>
__device__ __forceinline__ void stream_chains_body(const u8* W, int n_out, int K, const u16* XH,
                                                   const u32* sums, u32* OUT) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    u32 x = 0;
    probe_chain(W, n_out, K, [&](const FmtQ4H::Regs& r, int s) {
#pragma unroll
        for (int j = 0; j < 4; ++j) x ^= r.q[j].x ^ r.q[j].y ^ r.q[j].z ^ r.q[j].w;
        x ^= FmtQ4H::xor_scales(r);
        if (XLOAD && g == 0) {  // token 0: lanes g = 0, as mvh_piece's loads for one token
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const uint4* xp = (const uint4*)XH + 2 * t4 + (size_t)(4 * s + j) * 8;
                const uint4 xa = __ldg(xp), xb = __ldg(xp + 1);
                x ^= xa.x ^ xa.y ^ xa.z ^ xa.w ^ xb.x ^ xb.y ^ xb.z ^ xb.w;
            }
            x ^= __ldg(sums + (size_t)s * FmtQ4H::SUM_WORDS + t4);
        }
    });
    for (int o = 16; o > 0; o >>= 1) x ^= __shfl_xor_sync(0xffffffffu, x, o);
    if (lane == 0) atomicXor(OUT + (blockIdx.x % 1024), x);
}

extern "C" __global__ void __launch_bounds__(128)
    stream_chains_q4h_s4(const u8* W, int n_out, int K, const u16* XH, const u16* XSUM, u32* OUT) {
    stream_chains_body<false>(W, n_out, K, XH, (const u32*)XSUM, OUT);
}
extern "C" __global__ void __launch_bounds__(128)
    stream_chains_x_q4h_s4(const u8* W, int n_out, int K, const u16* XH, const u16* XSUM,
                           u32* OUT) {
    stream_chains_body<true>(W, n_out, K, XH, (const u32*)XSUM, OUT);
}

// mvh_noact_q4h_s4: mvh_q4h_s4 (one token) with its activation reads replaced by registers —
// B fragments and sums fixed per lane (f16 1.0, and the sums of 32 ones) — so the same loads of
// weights, the same dequantization, MMA chains and fold, without the L1/L2 round trips on the
// activations. Its outputs are not mvh's (no activations); only its time is.
extern "C" __global__ void __launch_bounds__(128)
    mvh_noact_q4h_s4(const u8* W, int n_out, int K, float* Y) {
    using F = FmtQ4H;
    __shared__ float part[4][32][1][4];
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const u32 one2 = g == 0 ? 0x3c003c00u : 0u;  // token 0's column: f16 1.0 pairs
    const u32 sum2 = g == 0 ? 0x50005000u : 0u;  // f16 32.0 pairs
    float acc[1][4] = {{0.f, 0.f, 0.f, 0.f}};
    probe_chain(W, n_out, K, [&](const F::Regs& r, int) {
        float acc2[4] = {0.f, 0.f, 0.f, 0.f};  // MVH_ACC2's odd k-steps (unused without it)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            u32 a[4][4];
            F::frags(r, j, a);
#pragma unroll
            for (int i = 0; i < 4; ++i) mma_h16((MVH_ACC2 && (i & 1)) ? acc2 : acc[0], a[i], one2, one2);
        }
        u32 am[4];
        F::min_a(r, t4, am);
        mma_h16(acc[0], am, sum2, 0u);
        if (MVH_ACC2) {
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[0][q] += acc2[q];
        }
    });
    float inv = 1.f;
    mvh_finish<4, 1>(acc, part, blockIdx.x, 0, 1, &inv, 1.f, Y, n_out);
}
