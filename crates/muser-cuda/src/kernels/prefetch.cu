// prefetch.cu — L2 prefetch of weight bytes, launched on a side branch of the decode graph
// while the main chain runs its small kernels (MUSER_CUDA_L2_PREFETCH; crate::prefetch), so the
// next matmul finds the first row groups of its weights in L2. Nothing is written, no number
// can change.
//
// Both kernels take three byte ranges (A, nA), (B, nB), (C, nC) — a Q4H / Q6H prefix is one
// range per part (crate::q4h::prefix / q6h::prefix); addresses and lengths 16-byte aligned
// (checked on the host; a tail below 16 bytes is not fetched).
// - l2_prefetch (`hint`): each thread issues `cp.async.bulk.prefetch.L2` for chunks of PF_CHUNK
//   bytes, the chunks dealt round-robin over the blocks (chunk i to block i % gridDim.x) so a
//   small range still spreads over the grid.
// - l2_touch (`touch`): real loads of every 16 bytes, their values dropped. Why both: on the
//   H200 (scripts/device/experiments/l2pf_rate.cu, session 40) a streaming read of 32 MiB after
//   the prefetch hints ran at cold speed (11.3 µs against 11.5 cold; hot 8.6), after loads of
//   the same bytes at hot speed (7.8 µs) — the hints did not leave the bytes in L2.

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "l2_prefetch needs sm_90 (cp.async.bulk.prefetch.L2)"
#endif

#define PF_CHUNK 32768u

__device__ __forceinline__ void pf_range(const unsigned char* p, unsigned long long n) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x * PF_CHUNK;
    for (unsigned long long off = ((unsigned long long)threadIdx.x * gridDim.x + blockIdx.x) *
                                  PF_CHUNK;
         off < n; off += stride) {
        const unsigned long long left = n - off;
        const u32 len = (u32)(left < PF_CHUNK ? left : PF_CHUNK) & ~15u;
        if (len)
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p + off), "r"(len)
                         : "memory");
    }
}

extern "C" __global__ void l2_prefetch(const unsigned char* a, unsigned long long na,
                                       const unsigned char* b, unsigned long long nb,
                                       const unsigned char* c, unsigned long long nc) {
    // After the kernel this branch forked from (a programmatic edge would otherwise let the
    // prefetch race the matmul it follows for DRAM); lets nothing start early itself.
    pdl_wait();
    pf_range(a, na);
    pf_range(b, nb);
    pf_range(c, nc);
}

// The 16-byte words of one range, TOUCH_UNROLL independent loads in flight per thread; the values
// go nowhere (volatile asm: the loads stay).
#define TOUCH_UNROLL 8
__device__ __forceinline__ void touch_range(const unsigned char* p, unsigned long long n) {
    const unsigned long long n16 = n >> 4, T = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n16;
         i += TOUCH_UNROLL * T) {
#pragma unroll
        for (int u = 0; u < TOUCH_UNROLL; ++u) {
            const unsigned long long j = i + u * T;
            if (j < n16) {
                u32 a, b, c, d;
                asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                             : "=r"(a), "=r"(b), "=r"(c), "=r"(d)
                             : "l"(p + 16 * j));
            }
        }
    }
}

extern "C" __global__ void l2_touch(const unsigned char* a, unsigned long long na,
                                    const unsigned char* b, unsigned long long nb,
                                    const unsigned char* c, unsigned long long nc) {
    pdl_wait();  // as l2_prefetch
    touch_range(a, na);
    touch_range(b, nb);
    touch_range(c, nc);
}
