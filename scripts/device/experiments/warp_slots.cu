// Experiment (issue 5, docs/cuda-f16.md session 35): where the warps of a decode attention block
// land on an SM. attn_h16_d128's decode launch is 514 blocks of 4 warps with 69.6 KB of dynamic
// shared memory each (3 blocks per SM), one warp of each block computing, three copying. If a
// block's warps take consecutive hardware slots starting at a multiple of 4, every block's warp 0
// sits on sub-partition 0 (slot % 4) and the SM's three computing warps share one scheduler and
// one tensor core. This launches the same shape, records per warp %smid, %warpid (the hardware
// slot, volatile but stable without preemption) and the block, and prints: how many blocks had
// consecutive slots, the sub-partition of local warp 0 per co-resident block, and where the
// computing warps would land with ATTN_SPREAD's rule (attn_h16.cu: local warp
// ((base / 4) - base) mod 4 computes, base = local warp 0's slot).
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
    const int grid = 514, threads = 128, smem = 71296, nw = threads / 32;
    Rec* d;
    cudaMalloc(&d, sizeof(Rec) * grid * nw);
    cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    probe<<<grid, threads, smem>>>(d, 200000);
    if (cudaDeviceSynchronize() != cudaSuccess) {
        printf("launch failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    std::vector<Rec> h(grid * nw);
    cudaMemcpy(h.data(), d, sizeof(Rec) * h.size(), cudaMemcpyDeviceToHost);
    int contiguous = 0;
    std::map<unsigned, std::vector<unsigned>> base_by_sm;  // first wave only: t0 below median
    std::map<unsigned, std::vector<unsigned>> spread_by_sm;
    std::vector<long long> starts;
    for (int b = 0; b < grid; ++b) starts.push_back(h[b * nw].t0);
    std::vector<long long> sorted = starts;
    std::sort(sorted.begin(), sorted.end());
    for (int b = 0; b < grid; ++b) {
        const unsigned base = h[b * nw].warpid;
        bool cont = true;
        for (int w = 0; w < nw; ++w) cont = cont && h[b * nw + w].warpid == base + w;
        contiguous += cont;
        if (h[b * nw].t0 - sorted[0] < 100000) {  // started with the first wave
            base_by_sm[h[b * nw].smid].push_back(base);
            const unsigned j = (((base / 4) - base) % 4 + 4) % 4;
            spread_by_sm[h[b * nw].smid].push_back(h[b * nw + j].warpid % 4);
        }
    }
    printf("blocks with consecutive warp slots: %d of %d\n", contiguous, grid);
    int same = 0, distinct = 0, sms = 0;
    for (auto& kv : base_by_sm) {
        std::set<unsigned> sub, sp;
        for (unsigned bse : kv.second) sub.insert(bse % 4);
        for (unsigned s : spread_by_sm[kv.first]) sp.insert(s);
        same += sub.size() == 1;
        distinct += sp.size() == spread_by_sm[kv.first].size();
        ++sms;
        if (kv.first < 4) {
            printf("SM %u first-wave blocks' warp-0 slots:", kv.first);
            for (unsigned bse : kv.second) printf(" %u", bse);
            printf("; spread rule's computing sub-partitions:");
            for (unsigned s : spread_by_sm[kv.first]) printf(" %u", s);
            printf("\n");
        }
    }
    printf("SMs (first wave): %d; all warp 0s on one sub-partition: %d; spread rule all distinct: %d\n",
           sms, same, distinct);
    return 0;
}
