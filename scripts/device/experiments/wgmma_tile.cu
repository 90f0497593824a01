// wgmma_tile.cu — experiment (issue 5, docs/cuda-f16.md, Next item 1): can the f16
// route's prefill tiles move from mma.sync.m16n8k16 (one warp per 16-row group, B fragments from
// shared memory through LDS: ~250 TFLOPS, `mmt_h16.cu`) to Hopper's warpgroup MMA
// (wgmma.mma_async m64n128k16: A — the Q4H weights dequantized in registers, exactly as
// formats_h16.cuh builds them — and B, the activations, read by the tensor cores from shared
// memory through a descriptor) without changing a bit?
//
// 1. Bit identity: the same chains (every k16 step of every super-block, in order, into f32
//    accumulators starting at 0) through mma.sync (`ref_mma`, one warp per row group and 8 tokens,
//    B straight from global memory) and through wgmma (`wg_tile`), on random Q4H weights and
//    f16 activations spanning many binades: every output compared bit for bit. The contract needs
//    decode (mma.sync, `mvh_*`) and prefill to agree, so this decides whether wgmma is usable
//    for prefill alone. The B layout's two byte offsets (K and N neighbours of 8×16-byte core
//    matrices) are tried both ways (LBO/SBO as documented, and swapped) and each is reported.
// 2. Speed: FFN gate / up's shape (19968 × 6656, 512 tokens) through `wg_tile` (2 warpgroups ×
//    64 rows × 128 tokens per block, a RING-stage cp.async ring of 64-value activation slices,
//    weights prefetched one super-block ahead in registers), beside `ref_mma`. The engine's
//    `mmt_q4h_s4` on the same shape (mvh_bench): 549–552 µs, ~248 TFLOPS (with the mins' MMA and
//    the chain fold, which this prototype leaves out: 1/16 more MMAs).
//
// Build (device): nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o wgmma_tile wgmma_tile.cu   (scripts/device/wgmma-experiment.sh)
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef unsigned long long u64;

#ifndef RING
#define RING 6
#endif

__device__ __forceinline__ u32 hfma2(u32 a, u32 b, u32 c) {
    u32 d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ u32 hmul2(u32 a, u32 b) {
    u32 d;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
template <u32 MASK>
__device__ __forceinline__ u32 and_or(u32 a, u32 c) {
    u32 d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "n"(MASK), "r"(c));
    return d;
}
__device__ __forceinline__ u32 lo2(u32 v) { return __byte_perm(v, v, 0x1010); }
__device__ __forceinline__ u32 hi2(u32 v) { return __byte_perm(v, v, 0x3232); }
#define H2_M1024 0xE400E400u
#define H2_R16 0x2C002C00u
#define H2_M64 0xD400D400u
#define H2_MAGIC 0x64006400u

__device__ __forceinline__ void mma_h16(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], const u32 (&a)[4], u64 desc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
        "{%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void cp16(u32 dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// One (16-row group, super-block) piece of Q4H as formats_h16.cuh's FmtQ4H reads it (no mins:
// the prototype times the 16 weight k-steps per super-block).
struct Wr {
    uint4 q[4], dg, d8;
};
__device__ __forceinline__ void load_w(const u8* Wq, const u8* Wd, int nsb, int rg, int sb,
                                       int lane, Wr& r) {
    const size_t piece = (size_t)rg * nsb + sb;
    const uint4* q = (const uint4*)(Wq + piece * 2048);
#pragma unroll
    for (int j = 0; j < 4; ++j) r.q[j] = __ldg(q + j * 32 + lane);
    const uint4* d = (const uint4*)(Wd + piece * 256);
    r.dg = __ldg(d + (lane >> 2));
    r.d8 = __ldg(d + (lane >> 2) + 8);
}
// Load j's four m16n8k16 A fragments: FmtQ4H::frags's arithmetic.
__device__ __forceinline__ void frags(const Wr& r, int j, u32 (&a)[4][4]) {
    const u32 dgw[4] = {r.dg.x, r.dg.y, r.dg.z, r.dg.w}, d8w[4] = {r.d8.x, r.d8.y, r.d8.z, r.d8.w};
    const u32 w4[4] = {r.q[j].x, r.q[j].y, r.q[j].z, r.q[j].w};
    const u32 Dg = dgw[j], Cg = hmul2(dgw[j], H2_M1024);
    const u32 D8 = hmul2(d8w[j], H2_R16), C8 = hmul2(d8w[j], H2_M64);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const bool hi = i >> 1;
        const u32 dg2 = hi ? hi2(Dg) : lo2(Dg), cg2 = hi ? hi2(Cg) : lo2(Cg);
        const u32 d82 = hi ? hi2(D8) : lo2(D8), c82 = hi ? hi2(C8) : lo2(C8);
        const u32 w = w4[i], w8 = w >> 8;
        a[i][0] = hfma2(and_or<0x000F000Fu>(w, H2_MAGIC), dg2, cg2);
        a[i][1] = hfma2(and_or<0x00F000F0u>(w, H2_MAGIC), d82, c82);
        a[i][2] = hfma2(and_or<0x000F000Fu>(w8, H2_MAGIC), dg2, cg2);
        a[i][3] = hfma2(and_or<0x00F000F0u>(w8, H2_MAGIC), d82, c82);
    }
}

// Reference: one warp per (row group blockIdx.x, 8 tokens blockIdx.y); X [N][K] f16, Y [N][M].
extern "C" __global__ void ref_mma(const u8* Wq, const u8* Wd, const u16* X, float* Y, int M,
                                   int K, int N) {
    const int lane = threadIdx.x, g = lane >> 2, t4 = lane & 3, rg = blockIdx.x, nsb = K / 256;
    const int tok = 8 * blockIdx.y + g;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int sb = 0; sb < nsb; ++sb) {
        Wr r;
        load_w(Wq, Wd, nsb, rg, sb, lane, r);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            u32 a[4][4];
            frags(r, j, a);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int k0 = 256 * sb + 64 * j + 16 * i;
                const u32 b0 = *(const u32*)(X + (size_t)tok * K + k0 + 2 * t4);
                const u32 b1 = *(const u32*)(X + (size_t)tok * K + k0 + 8 + 2 * t4);
                mma_h16(acc, a[i], b0, b1);
            }
        }
    }
    const int row = 16 * rg + g, t = 8 * blockIdx.y + 2 * t4;
    Y[(size_t)t * M + row] = acc[0];
    Y[(size_t)(t + 1) * M + row] = acc[1];
    Y[(size_t)t * M + row + 8] = acc[2];
    Y[(size_t)(t + 1) * M + row + 8] = acc[3];
}

// A stage: 128 tokens × 64 values, 8 × 16-byte core matrices: core (token group n = tok / 8,
// chunk c = k / 8) at (8n + c) · 128 bytes, token tok % 8 at 16 bytes each. A k16 step i reads
// chunks 2i, 2i + 1: K-neighbour cores 128 bytes apart, N-neighbours 1024.
#define STAGE_BYTES 16384
__device__ __forceinline__ u64 desc_at(u32 addr, bool swap) {
    const u64 kb = 128 >> 4, nb = 1024 >> 4;
    const u64 lbo = swap ? nb : kb, sbo = swap ? kb : nb;
    return (u64)((addr & 0x3FFFF) >> 4) | (lbo << 16) | (sbo << 32);
}

__device__ __forceinline__ u64 desc_sb(u32 addr) {
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(128 >> 4) << 16) | ((u64)(4096 >> 4) << 32);
}

// 2 warpgroups × 64 rows (warp w of warpgroup h: row group 8·blockIdx.x + 4h + w) × 128 tokens
// (blockIdx.y). Dynamic shared memory: RING stages.
extern "C" __global__ void __launch_bounds__(256, 1)
    wg_tile(const u8* Wq, const u8* Wd, const u16* X, float* Y, int M, int K, int N, int swap) {
    extern __shared__ __align__(1024) u8 smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int nsb = K / 256, T = 4 * nsb, rg = 8 * blockIdx.x + warp, tok0 = 128 * blockIdx.y;
    const u32 sbase = (u32)__cvta_generic_to_shared(smem);
    auto stage_load = [&](int t) {
        const u32 dst0 = sbase + (t % RING) * STAGE_BYTES;
        const int kb = 64 * t;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int id = tid + 256 * e, c = id >> 7, tok = id & 127;
            cp16(dst0 + ((tok >> 3) * 8 + c) * 128 + (tok & 7) * 16,
                 X + (size_t)(tok0 + tok) * K + kb + 8 * c);
        }
    };
#pragma unroll
    for (int s = 0; s < RING - 1; ++s) {
        if (s < T) stage_load(s);
        cp_commit();
    }
    float acc[64];
#pragma unroll
    for (int e = 0; e < 64; ++e) acc[e] = 0.f;
    Wr cur, nxt;
    load_w(Wq, Wd, nsb, rg, 0, lane, cur);
    for (int sb = 0; sb < nsb; ++sb) {
        if (sb + 1 < nsb) load_w(Wq, Wd, nsb, rg, sb + 1, lane, nxt);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int t = 4 * sb + j;
            cp_wait<RING - 2>();
            __syncthreads();
            if (t + RING - 1 < T) stage_load(t + RING - 1);
            cp_commit();
            u32 a[4][4];
            frags(cur, j, a);
            const u32 st = sbase + (t % RING) * STAGE_BYTES;
            wg_fence();
#pragma unroll
            for (int i = 0; i < 4; ++i) wgmma_m64n128k16(acc, a[i], desc_at(st + 2 * i * 128, swap));
            wg_commit();
            wg_wait<0>();
        }
        cur = nxt;
    }
    // m64n128 f32 accumulators: register 4c + e of warp w, lane (g, t4): row 16w + g + 8·(e >> 1),
    // token 8c + 2·t4 + (e & 1).
    const int row0 = 16 * rg + g;
#pragma unroll
    for (int c = 0; c < 16; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int row = row0 + 8 * (e >> 1), t = tok0 + 8 * c + 2 * t4 + (e & 1);
            Y[(size_t)t * M + row] = acc[4 * c + e];
        }
}

// v2: one super-block per stage (128 tokens × 256 values = 64 KB; core (n, c) at (32n + c)·128),
// RING2 stages, one barrier per super-block; within it load j's fragments are built while load
// j − 1's four wgmmas run (two fragment sets, wait_group 1), drained at the super-block's end.
// WG warpgroups per block (64·WG rows).
#ifndef RING2
#define RING2 3
#endif
#ifndef WG
#define WG 2
#endif
#ifndef DRAIN
#define DRAIN 1  // 1: drain every super-block's wgmmas before the barrier; 0: refill after j = 0
#endif
#define SB_STAGE 65536
extern "C" __global__ void __launch_bounds__(128 * WG, 1)
    wg_tile2(const u8* Wq, const u8* Wd, const u16* X, float* Y, int M, int K, int N) {
    extern __shared__ __align__(1024) u8 smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int nsb = K / 256, rg = 4 * WG * blockIdx.x + warp, tok0 = 128 * blockIdx.y;
    const u32 sbase = (u32)__cvta_generic_to_shared(smem);
    auto stage_load = [&](int sb) {
        const u32 dst0 = sbase + (sb % RING2) * SB_STAGE;
        for (int id = tid; id < 4096; id += 128 * WG) {
            const int c = id >> 7, tok = id & 127;
            cp16(dst0 + ((tok >> 3) * 32 + c) * 128 + (tok & 7) * 16,
                 X + (size_t)(tok0 + tok) * K + 256 * sb + 8 * c);
        }
    };
#pragma unroll
    for (int s = 0; s < RING2 - 1; ++s) {
        if (s < nsb) stage_load(s);
        cp_commit();
    }
    float acc[64];
#pragma unroll
    for (int e = 0; e < 64; ++e) acc[e] = 0.f;
    Wr cur, nxt;
    load_w(Wq, Wd, nsb, rg, 0, lane, cur);
    for (int sb = 0; sb < nsb; ++sb) {
        if (sb + 1 < nsb) load_w(Wq, Wd, nsb, rg, sb + 1, lane, nxt);
        cp_wait<RING2 - 2>();
        __syncthreads();
        if (DRAIN) {
            if (sb + RING2 - 1 < nsb) stage_load(sb + RING2 - 1);
            cp_commit();
        }
        const u32 st = sbase + (sb % RING2) * SB_STAGE;
        u32 a[2][4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            frags(cur, j, a[j & 1]);
            wg_fence();
#pragma unroll
            for (int i = 0; i < 4; ++i)
                wgmma_m64n128k16(acc, a[j & 1][i], desc_sb(st + (8 * j + 2 * i) * 128));
            wg_commit();
            wg_wait<1>();
            if (!DRAIN && j == 0) {
                // Every warpgroup's super-block sb − 1 is done (its last group retired by the
                // wait above): its slot takes sb + RING2 − 1.
                __syncthreads();
                if (sb + RING2 - 1 < nsb) stage_load(sb + RING2 - 1);
                cp_commit();
            }
        }
        if (DRAIN) wg_wait<0>();
        cur = nxt;
    }
    wg_wait<0>();
    const int row0 = 16 * rg + g;
#pragma unroll
    for (int c = 0; c < 16; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int row = row0 + 8 * (e >> 1), t = tok0 + 8 * c + 2 * t4 + (e & 1);
            Y[(size_t)t * M + row] = acc[4 * c + e];
        }
}

#ifndef __CUDACC_RTC__
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>

#define CK(x)                                                                         \
    do {                                                                              \
        cudaError_t e_ = (x);                                                         \
        if (e_ != cudaSuccess) {                                                      \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static u64 rs = 0x9E3779B97F4A7C15ull;
static u32 rnd() {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (u32)(rs >> 11);
}
static u16 f2h_host(float f) {  // round to nearest even, normal range only (the test's values)
    u32 x;
    memcpy(&x, &f, 4);
    const u32 s = (x >> 16) & 0x8000u;
    int e = (int)((x >> 23) & 0xFF) - 127 + 15;
    u32 m = x & 0x7FFFFF;
    if (e <= 0) return (u16)s;
    u32 h = s | ((u32)e << 10) | (m >> 13);
    const u32 rem = m & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
    return (u16)h;
}

struct Prob {
    int M, K, N;
    u8 *wq, *wd;
    u16* x;
    float *y_ref, *y_wg;
};
static Prob make(int M, int K, int N) {
    Prob p{M, K, N};
    const size_t pieces = (size_t)(M / 16) * (K / 256);
    std::vector<u8> q(pieces * 2048);
    for (auto& b : q) b = (u8)rnd();
    std::vector<u16> d(pieces * 128);  // dsc in [0.5, 32): what Q4H's power of two leaves
    for (auto& h : d) h = f2h_host(0.5f + 31.5f * (rnd() & 0xFFFF) / 65536.f);
    std::vector<u16> x((size_t)N * K);  // magnitudes 2^-6 .. 2^10, either sign
    for (auto& h : x) {
        const float m = ldexpf(1.f + (rnd() & 1023) / 1024.f, (int)(rnd() % 16) - 6);
        h = f2h_host((rnd() & 1) ? -m : m);
    }
    CK(cudaMalloc(&p.wq, q.size()));
    CK(cudaMalloc(&p.wd, d.size() * 2));
    CK(cudaMalloc(&p.x, x.size() * 2));
    CK(cudaMalloc(&p.y_ref, (size_t)N * M * 4));
    CK(cudaMalloc(&p.y_wg, (size_t)N * M * 4));
    CK(cudaMemcpy(p.wq, q.data(), q.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(p.wd, d.data(), d.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(p.x, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
    return p;
}
static const int SMEM = RING * STAGE_BYTES;
static void run_ref(const Prob& p) {
    ref_mma<<<dim3(p.M / 16, p.N / 8), 32>>>(p.wq, p.wd, p.x, p.y_ref, p.M, p.K, p.N);
}
static void run_wg(const Prob& p, int swap) {
    wg_tile<<<dim3(p.M / 128, p.N / 128), 256, SMEM>>>(p.wq, p.wd, p.x, p.y_wg, p.M, p.K, p.N, swap);
}
static const int SMEM2 = RING2 * SB_STAGE;
static void run_wg2(const Prob& p) {
    wg_tile2<<<dim3(p.M / (64 * WG), p.N / 128), 128 * WG, SMEM2>>>(p.wq, p.wd, p.x, p.y_wg, p.M,
                                                                    p.K, p.N);
}
static void compare(const Prob& p, const char* what) {
    const size_t n = (size_t)p.N * p.M;
    std::vector<float> a(n), b(n);
    CK(cudaMemcpy(a.data(), p.y_ref, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), p.y_wg, n * 4, cudaMemcpyDeviceToHost));
    size_t diff = 0;
    double maxrel = 0, maxabs = 0;
    for (size_t i = 0; i < n; ++i) {
        if (memcmp(&a[i], &b[i], 4) != 0) ++diff;
        const double d = fabs((double)a[i] - b[i]);
        maxabs = fmax(maxabs, fabs((double)a[i]));
        maxrel = fmax(maxrel, d);
    }
    printf("check %-28s M=%d K=%d N=%d: %zu of %zu outputs differ in bits; max |diff| %.3e "
           "(max |y| %.3e)\n",
           what, p.M, p.K, p.N, diff, n, maxrel, maxabs);
}
template <class F>
static float time_us(F f, int reps) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    f();
    CK(cudaDeviceSynchronize());
    CK(cudaEventRecord(a));
    for (int i = 0; i < reps; ++i) f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    return 1000.f * ms / reps;
}
int main() {
    CK(cudaFuncSetAttribute(wg_tile, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
    CK(cudaFuncSetAttribute(wg_tile2, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM2));
    printf("wgmma_tile: RING=%d (%d bytes of stages); v2: RING2=%d WG=%d (%d bytes)\n", RING, SMEM,
           RING2, WG, SMEM2);
    {
        Prob p = make(384, 1024, 256);
        run_ref(p);
        for (int swap = 0; swap < 2; ++swap) {
            CK(cudaMemset(p.y_wg, 0xFF, (size_t)p.N * p.M * 4));
            run_wg(p, swap);
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            compare(p, swap ? "wgmma (LBO/SBO swapped)" : "wgmma (LBO = K neighbour)");
        }
        CK(cudaMemset(p.y_wg, 0xFF, (size_t)p.N * p.M * 4));
        run_wg2(p);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        compare(p, "wgmma v2");
    }
    // FFN gate / up: 19968 × 6656, 512 tokens.
    Prob p = make(19968, 6656, 512);
    const double flop = 2.0 * p.M * p.K * p.N;
    run_ref(p);
    CK(cudaDeviceSynchronize());
    for (int swap = 0; swap < 2; ++swap) {
        run_wg(p, swap);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        compare(p, swap ? "FFN wgmma (swapped)" : "FFN wgmma");
    }
    if (19968 % (64 * WG) == 0) {
        CK(cudaMemset(p.y_wg, 0xFF, (size_t)p.N * p.M * 4));
        run_wg2(p);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        compare(p, "FFN wgmma v2");
        const float t2 = time_us([&] { run_wg2(p); }, 20);
        printf("wg_tile2 FFN gate/up 512 tokens: %8.1f us  %6.1f TFLOPS\n", t2, flop / t2 * 1e-6);
    }
    const float tr = time_us([&] { run_ref(p); }, 5);
    printf("ref_mma  FFN gate/up 512 tokens: %8.1f us  %6.1f TFLOPS\n", tr, flop / tr * 1e-6);
    for (int swap = 0; swap < 2; ++swap) {
        const float tw = time_us([&] { run_wg(p, swap); }, 20);
        printf("wg_tile  FFN gate/up 512 tokens (swap %d): %8.1f us  %6.1f TFLOPS\n", swap, tw,
               flop / tw * 1e-6);
    }
    return 0;
}
#endif
