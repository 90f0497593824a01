// common.cuh — helpers shared by the standalone device experiments compiled with nvcc
// (l2pf_rate.cu, phase_chain.cu; hmma_mv.cu keeps its own: it also compiles under NVRTC).

#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

// A CUDA runtime call that must succeed: on an error, the call, where, and exit.
#define CK(x)                                                                                 \
    do {                                                                                      \
        cudaError_t ce_ = (x);                                                                \
        if (ce_ != cudaSuccess) {                                                             \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(ce_)); \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

// A streaming 16-byte load (read-only path, not kept in L1).
__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
