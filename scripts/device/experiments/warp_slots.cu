// Experiment (issue 5, docs/cuda-f16-history.md session 35): where the warps of a decode attention block
// land on an SM. attn_h16_d128's decode launch is 514 blocks of 4 warps with 69.6 KB of dynamic
// shared memory each (3 blocks per SM), one warp of each block computing, three copying. The
// question: do an SM's computing warps (every block's local warp 0) share one sub-partition
// (hardware slot % 4), i.e. one scheduler and one tensor core? This launches the same shape and
// records per warp %smid, %warpid (the hardware slot; volatile, stable without preemption) and
// clock64 at entry (per-SM clocks: compared only within an SM). Per SM, the blocks that entered
// within half the spin of that SM's first are its first wave. Prints how many blocks had
// consecutive slots, a few SMs' first-wave blocks with their warps' sub-partitions, how many SMs
// have every first-wave warp 0 on one sub-partition, and the sub-partition histogram of warp 0.
// Session 35's run (with a cross-SM clock comparison, since fixed): 171 of 514 blocks had
// consecutive slots and none of the 16 SMs it could read had its warp 0s on one sub-partition —
// so the premise of a role-spreading switch (ATTN_SPREAD, built and withdrawn) did not hold.
//   nvcc -O3 -arch=sm_90a -o warp_slots warp_slots.cu && ./warp_slots
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <map>
#include <set>
#include <vector>

struct Rec {
    unsigned smid, warpid, block, local;
    long long t0, t1;
};

__global__ void probe(Rec* out, int spin) {
    extern __shared__ unsigned char smem[];
    unsigned smid, wid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    asm volatile("mov.u32 %0, %%warpid;" : "=r"(wid));
    long long t0 = clock64();
    // Keep the block resident a while so that the first wave is co-resident.
    long long t = t0;
    while (t - t0 < spin) t = clock64();
    smem[threadIdx.x] = (unsigned char)wid;
    __syncthreads();
    if ((threadIdx.x & 31) == 0) {
        Rec r{smid, wid, blockIdx.x, threadIdx.x >> 5, t0, t};
        out[blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)] = r;
    }
}

int main() {
    const int grid = 514, threads = 128, smem = 71296, nw = threads / 32, spin = 200000;
    Rec* d;
    cudaMalloc(&d, sizeof(Rec) * grid * nw);
    cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    probe<<<grid, threads, smem>>>(d, spin);
    if (cudaDeviceSynchronize() != cudaSuccess) {
        printf("launch failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    std::vector<Rec> h(grid * nw);
    cudaMemcpy(h.data(), d, sizeof(Rec) * h.size(), cudaMemcpyDeviceToHost);
    int contiguous = 0;
    std::map<unsigned, long long> first;  // per SM: the earliest entry (that SM's clock)
    for (int b = 0; b < grid; ++b) {
        const unsigned base = h[b * nw].warpid;
        bool cont = true;
        for (int w = 0; w < nw; ++w) cont = cont && h[b * nw + w].warpid == base + w;
        contiguous += cont;
        const unsigned sm = h[b * nw].smid;
        if (!first.count(sm) || h[b * nw].t0 < first[sm]) first[sm] = h[b * nw].t0;
    }
    std::map<unsigned, std::vector<int>> wave;  // per SM: its first-wave blocks
    for (int b = 0; b < grid; ++b)
        if (h[b * nw].t0 - first[h[b * nw].smid] < spin / 2) wave[h[b * nw].smid].push_back(b);
    printf("blocks with consecutive warp slots: %d of %d\n", contiguous, grid);
    int one_sub = 0, shown = 0, hist[4] = {0, 0, 0, 0};
    for (auto& kv : wave) {
        std::set<unsigned> sub;
        for (int b : kv.second) {
            sub.insert(h[b * nw].warpid % 4);
            ++hist[h[b * nw].warpid % 4];
        }
        one_sub += kv.second.size() > 1 && sub.size() == 1;
        if (shown++ < 6) {
            printf("SM %u, %zu first-wave blocks:", kv.first, kv.second.size());
            for (int b : kv.second) {
                printf("  block %d slots", b);
                for (int w = 0; w < nw; ++w) printf(" %u", h[b * nw + w].warpid);
            }
            printf("\n");
        }
    }
    printf("SMs: %zu; with every first-wave warp 0 on one sub-partition: %d; warp 0 per "
           "sub-partition: %d %d %d %d\n",
           wave.size(), one_sub, hist[0], hist[1], hist[2], hist[3]);
    return 0;
}
