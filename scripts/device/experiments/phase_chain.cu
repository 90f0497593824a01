// phase_chain.cu — what a decode token's structure costs on the H200 with an ideal streaming
// "matmul" (session 40; the question behind docs/cuda-f16.md "Next" item 4: is a persistent
// per-layer schedule worth building?). 52 layers, each: four streaming phases of the bytes of
// Muse Glimmer's matmuls (36 / 17 / 166 / 100 MB: Q + gate + K + V, attention output, FFN
// gate + up, FFN down) with small dependent one-block steps between them (3 / 1 / 1 / 1, as the
// decode graph's rope, attention, combine + f16 row; norm; f16 row; norm). Every layer has its
// own weight bytes (16.6 GB in all), so nothing is reused from L2.
//
// Forms, each timed as a whole token (52 layers):
//   floor     one streaming launch over all 16.6 GB (the copy bandwidth's time)
//   graph     the chain of launches captured in a CUDA graph with programmatic dependent launch
//             (griddepcontrol: each kernel requests its first weight loads before the wait, as
//             Muser's MVH_EARLY), the small steps included
//   graph-ns  the same without the small steps (the matmul launches back to back)
//   persist   one cooperative kernel: phases separated by a grid barrier, the small steps run by
//             block 0 between two barriers while the other blocks wait
//   graph[-ns], smem-padded  the graph forms with each streaming block holding shared memory it
//             does not use, so that two consecutive streaming kernels cannot share an SM (added
//             after session 40's run: not yet run)
//   persist-pf  the same, each block requesting its first loads of the next phase before it
//             arrives at a barrier (so the barrier and the small steps overlap DRAM latency)
// Build and run: nvcc -O3 -arch=sm_90a -o phase_chain phase_chain.cu && ./phase_chain
#include <cooperative_groups.h>
#include <vector>

#include "common.cuh"

namespace cg = cooperative_groups;

constexpr int LAYERS = 52, PHASES = 4, THREADS = 256, UNROLL = 8;
constexpr size_t PHASE_MB[PHASES] = {36, 17, 166, 100};
// Small steps after phase `ph`.
__host__ __device__ constexpr int small_after(int ph) { return ph == 0 ? 3 : 1; }

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// One block's slice [b0, b1) of 16-byte words, UNROLL loads in flight per thread; `first` holds
// the first batch if it was requested earlier (pre = true).
struct Slice {
    const uint4* p;
    size_t b0, b1;
};
__device__ __forceinline__ Slice slice_of(const uint4* w, size_t n16, int b, int nb) {
    return {w, n16 * b / nb, n16 * (b + 1) / nb};
}
__device__ __forceinline__ void first_batch(const Slice& s, uint4 (&v)[UNROLL]) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        const size_t i = s.b0 + threadIdx.x + (size_t)u * THREADS;
        v[u] = i < s.b1 ? ld_stream(s.p + i) : make_uint4(0, 0, 0, 0);
    }
}
__device__ __forceinline__ unsigned stream_rest(const Slice& s, const uint4 (&v0)[UNROLL]) {
    unsigned acc = 0;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc ^= v0[u].x ^ v0[u].y ^ v0[u].z ^ v0[u].w;
    for (size_t i = s.b0 + threadIdx.x + (size_t)UNROLL * THREADS; i < s.b1;
         i += (size_t)UNROLL * THREADS) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const size_t j = i + (size_t)u * THREADS;
            v[u] = j < s.b1 ? ld_stream(s.p + j) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    return acc;
}

// The block's XOR of every thread's `acc` (the value thread 0 returns is the total).
__device__ __forceinline__ unsigned block_xor(unsigned acc) {
    __shared__ unsigned red;
    if (threadIdx.x == 0) red = 0;
    __syncthreads();
    atomicXor(&red, acc);
    __syncthreads();
    return red;
}

// A streaming phase: block b folds its slice and writes one word (the "output rows").
__global__ void __launch_bounds__(THREADS) phase_k(const uint4* w, size_t n16, unsigned* out) {
    const Slice s = slice_of(w, n16, blockIdx.x, gridDim.x);
    uint4 v[UNROLL];
    first_batch(s, v);  // weights: no kernel writes them, so before the wait
    pdl_wait();
    pdl_trigger();
    const unsigned red = block_xor(stream_rest(s, v));
    if (threadIdx.x == 0) out[blockIdx.x] = red;
}

// A small step: one block reads the n words the step before wrote, reduces, writes one word.
__device__ __forceinline__ void small_body(const unsigned* in, int n, unsigned* out) {
    unsigned acc = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) acc ^= in[i];
    const unsigned red = block_xor(acc);
    if (threadIdx.x == 0) out[0] = red + 1;
}
__global__ void __launch_bounds__(THREADS) small_k(const unsigned* in, int n, unsigned* out) {
    pdl_wait();
    pdl_trigger();
    small_body(in, n, out);
}

struct Token {
    const uint4* w[LAYERS][PHASES];
    size_t n16[PHASES];
};

// The whole token as one cooperative kernel.
template <bool PF>
__global__ void __launch_bounds__(THREADS) persist_k(Token t, unsigned* out, unsigned* scratch) {
    cg::grid_group grid = cg::this_grid();
    uint4 v[UNROLL];
    first_batch(slice_of(t.w[0][0], t.n16[0], blockIdx.x, gridDim.x), v);
    for (int l = 0; l < LAYERS; ++l)
        for (int ph = 0; ph < PHASES; ++ph) {
            const Slice s = slice_of(t.w[l][ph], t.n16[ph], blockIdx.x, gridDim.x);
            if (!PF && !(l == 0 && ph == 0)) first_batch(s, v);
            const unsigned red = block_xor(stream_rest(s, v));
            if (threadIdx.x == 0) out[blockIdx.x] = red;
            // The next phase's first loads, before the barrier and the small steps (PF).
            const int nl = ph + 1 < PHASES ? l : l + 1, np = (ph + 1) % PHASES;
            if (PF && nl < LAYERS)
                first_batch(slice_of(t.w[nl][np], t.n16[np], blockIdx.x, gridDim.x), v);
            grid.sync();
            for (int k = 0; k < small_after(ph); ++k) {
                if (blockIdx.x == 0) small_body(k == 0 ? out : scratch + k - 1, k == 0 ? gridDim.x : 1,
                                                scratch + k);
                grid.sync();
            }
        }
}

int main() {
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    Token t;
    size_t total = 0;
    for (int p = 0; p < PHASES; ++p) {
        t.n16[p] = (PHASE_MB[p] << 20) / 16;
        total += t.n16[p] * 16;
    }
    total *= LAYERS;
    unsigned char* base;
    CK(cudaMalloc(&base, total));
    CK(cudaMemset(base, 3, total));
    {
        size_t off = 0;
        for (int l = 0; l < LAYERS; ++l)
            for (int p = 0; p < PHASES; ++p) {
                t.w[l][p] = (const uint4*)(base + off);
                off += t.n16[p] * 16;
            }
    }
    unsigned *out, *scratch;
    CK(cudaMalloc(&out, 1 << 20));
    CK(cudaMalloc(&scratch, 1 << 20));
    int per_sm;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, phase_k, THREADS, 0));
    printf("SMs %d, streaming blocks per SM %d, token bytes %.2f GB\n", sms, per_sm, total / 1e9);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    auto timeit = [&](const char* name, auto&& body) {
        body();
        CK(cudaStreamSynchronize(st));
        const int reps = 10;
        CK(cudaEventRecord(e0, st));
        for (int r = 0; r < reps; ++r) body();
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        const double us = 1000.0 * ms / reps;
        printf("%-28s %8.1f us per token  %6.2f TB/s  %6.1f us per layer\n", name, us,
               total / us / 1e6, us / LAYERS);
    };
    // Dynamic shared memory that a streaming block takes and never uses (`pad`): with it one
    // streaming kernel's blocks fill their SMs' shared memory, so the next kernel's blocks can
    // become resident only as this one's leave — as with Muser's decode matmuls, whose registers
    // fill the SM (20 warps at 96 registers) — where 2 small blocks per SM let two consecutive
    // kernels share an SM and the next one's PDL prologue overlap this one's tail.
    constexpr size_t SMEM_MAX = 226 * 1024;  // the 227 KB opt-in less static shared memory
    CK(cudaFuncSetAttribute(phase_k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM_MAX));
    auto launch = [&](auto kern, int grid, bool pdl, size_t smem, auto... args) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(grid);
        cfg.blockDim = dim3(THREADS);
        cfg.dynamicSmemBytes = smem;
        cfg.stream = st;
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = at;
        cfg.numAttrs = pdl ? 1 : 0;
        CK(cudaLaunchKernelEx(&cfg, kern, args...));
    };
    for (int mult : {1, 2, 4}) {  // streaming blocks per SM
        const int G = sms * mult;
        if (mult > per_sm) break;
        printf("-- %d streaming blocks (%d per SM)\n", G, mult);
        timeit("floor (one launch)", [&] {
            launch(phase_k, G, false, 0, (const uint4*)base, total / 16, out);
        });
        for (int form = 0; form < 4; ++form) {
            const int smalls = form % 2 == 0;
            const bool padded = form >= 2;
            if (padded && mult > 2) break;  // a block's pad: at least 113 KB
            const size_t pad = padded ? SMEM_MAX / mult / 1024 * 1024 : 0;
            cudaGraph_t g;
            cudaGraphExec_t ge;
            CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
            for (int l = 0; l < LAYERS; ++l)
                for (int p = 0; p < PHASES; ++p) {
                    launch(phase_k, G, true, pad, t.w[l][p], t.n16[p], out);
                    for (int k = 0; smalls && k < small_after(p); ++k)
                        launch(small_k, 1, true, 0,
                               (const unsigned*)(k == 0 ? out : scratch + k - 1), k == 0 ? G : 1,
                               scratch + k);
                }
            CK(cudaStreamEndCapture(st, &g));
            CK(cudaGraphInstantiate(&ge, g, 0));
            const char* names[4] = {"graph (PDL, small steps)", "graph-ns (PDL, no small)",
                                    "graph, smem-padded", "graph-ns, smem-padded"};
            timeit(names[form], [&] { CK(cudaGraphLaunch(ge, st)); });
            CK(cudaGraphExecDestroy(ge));
            CK(cudaGraphDestroy(g));
        }
        for (int pf = 0; pf < 2; ++pf) {
            void* args[] = {&t, &out, &scratch};
            auto k = pf ? (void*)persist_k<true> : (void*)persist_k<false>;
            int ok;
            CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ok, pf ? persist_k<true> : persist_k<false>,
                                                            THREADS, 0));
            if (ok < mult) {
                printf("persist%s: only %d blocks per SM fit\n", pf ? "-pf" : "", ok);
                continue;
            }
            timeit(pf ? "persist-pf (grid barriers)" : "persist (grid barriers)", [&] {
                CK(cudaLaunchCooperativeKernel(k, dim3(G), dim3(THREADS), args, 0, st));
            });
        }
    }
    return 0;
}
