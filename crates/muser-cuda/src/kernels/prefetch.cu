// prefetch.cu — L2 prefetch of weight bytes, launched on a side branch of the decode graph
// while the main chain runs its small kernels (MUSER_CUDA_L2_PREFETCH; crate::prefetch), so the
// next matmul finds the first row groups of its weights in L2. Hints only: nothing is written,
// no number can change.
//
// l2_prefetch: three byte ranges (A, nA), (B, nB), (C, nC) — a Q4H / Q6H prefix is one range per
// part (crate::q4h::prefix / q6h::prefix). Each thread issues `cp.async.bulk.prefetch.L2` for
// chunks of PF_CHUNK bytes, strided by the grid; addresses and lengths 16-byte aligned (checked
// on the host; a tail below 16 bytes is not fetched).

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "l2_prefetch needs sm_90 (cp.async.bulk.prefetch.L2)"
#endif

#define PF_CHUNK 32768u

__device__ __forceinline__ void pf_range(const unsigned char* p, unsigned long long n) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x * PF_CHUNK;
    for (unsigned long long off = (unsigned long long)(blockIdx.x * blockDim.x + threadIdx.x) *
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
