// l2pf_rate.cu — how fast can a side kernel pull weight bytes into the H200's L2, and does a
// streaming read of those bytes afterwards run at L2 rather than DRAM speed? (Session 40: the
// question behind MUSER_CUDA_L2_PREFETCH's session-31 loss, which used one 128-thread block.)
//
// For a region of R bytes (the first row groups of the "next matmul"):
//   cold:  flush L2 (read 512 MiB elsewhere), sleep T µs, stream-read R        -> read time
//   pf:    flush, prefetch R with B blocks (method M), sleep T µs, stream-read R -> pf and read times
// Methods: bulk = cp.async.bulk.prefetch.L2 of CHUNK bytes per thread-issue, chunks dealt
// round-robin over the blocks (bulkEL: with an evict_last policy); line =
// prefetch.global.L2::evict_last per 128-byte line; touch = loads (the read kernel itself).
// Session 40's run (docs/receipts/cuda-session40.txt) had regions 16 / 32 / 48 MiB, sleeps 0 / 10
// and the cfgs below; its first run (8 / 16 / 32 MiB, sleeps 0 / 5 / 10 / 20, hints from 1 to
// 264 blocks) is in the same receipt.
// Build and run: nvcc -O3 -arch=sm_90a -o l2pf_rate l2pf_rate.cu && ./l2pf_rate
#include "common.cuh"

__global__ void stream_read(const uint4* p, size_t n16, unsigned long long* sink) {
    unsigned long long acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
         i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = ld_stream(p + i);
        acc += v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x123456789ull) *sink = acc;
}

// Bulk prefetch hints; EL: with an L2::evict_last cache policy.
template <bool EL>
__global__ void pf_bulk(const unsigned char* p, size_t n, unsigned chunk) {
    unsigned long long pol = 0;
    if (EL) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    const size_t nch = (n + chunk - 1) / chunk;
    for (size_t c = (size_t)threadIdx.x * gridDim.x + blockIdx.x; c < nch;
         c += (size_t)gridDim.x * blockDim.x) {
        const size_t off = c * chunk;
        const size_t left = n - off;
        const unsigned len = (unsigned)(left < chunk ? left : chunk) & ~15u;
        if (len == 0) continue;
        if (EL)
            asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(p + off),
                         "r"(len), "l"(pol)
                         : "memory");
        else
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(len)
                         : "memory");
    }
}

__global__ void pf_line(const unsigned char* p, size_t n) {
    for (size_t off = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 128; off < n;
         off += (size_t)gridDim.x * blockDim.x * 128)
        asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(p + off) : "memory");
}

__global__ void sleep_us(unsigned us) {
    if (us == 0) return;
    unsigned long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t - t0 >= 1000ull * us) break;
        __nanosleep(200);
    }
}

int main() {
    const size_t FLUSH = 512ull << 20, BUF = 64ull << 20;
    unsigned char *flush, *w;
    unsigned long long* sink;
    CK(cudaMalloc(&flush, FLUSH));
    CK(cudaMalloc(&w, BUF));
    CK(cudaMalloc(&sink, 8));
    CK(cudaMemset(flush, 1, FLUSH));
    CK(cudaMemset(w, 2, BUF));
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    int l2;
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    printf("SMs %d, L2 %d bytes\n", sms, l2);
    cudaEvent_t e[4];
    for (auto& x : e) CK(cudaEventCreate(&x));
    const int RB = sms * 4, RT = 512;
    auto do_flush = [&] { stream_read<<<RB, RT>>>((const uint4*)flush, FLUSH / 16, sink); };
    const int reps = 20;
    // method: 0 none (cold), 1 bulk, 2 line; blocks; chunk
    struct Cfg {
        int method, blocks;
        unsigned chunk;
    };
    const Cfg cfgs[] = {{0, 0, 0},       {1, 132, 32768}, {2, 528, 0}, {3, 132, 0},
                        {3, 528, 0},     {4, 132, 32768}, {4, 32, 32768}};
    const size_t regions[] = {16ull << 20, 32ull << 20, 48ull << 20};
    const unsigned sleeps[] = {0, 10};
    for (size_t R : regions)
        for (unsigned T : sleeps)
            for (const Cfg& c : cfgs) {
                double tp = 0, tr = 0;
                for (int r = 0; r < reps; ++r) {
                    do_flush();
                    CK(cudaEventRecord(e[0]));
                    if (c.method == 1) pf_bulk<false><<<c.blocks, 128>>>(w, R, c.chunk);
                    if (c.method == 2) pf_line<<<c.blocks, 256>>>(w, R);
                    if (c.method == 3)
                        stream_read<<<c.blocks, 512>>>((const uint4*)w, R / 16, sink);
                    if (c.method == 4) pf_bulk<true><<<c.blocks, 128>>>(w, R, c.chunk);
                    CK(cudaEventRecord(e[1]));
                    sleep_us<<<1, 32>>>(T);
                    CK(cudaEventRecord(e[2]));
                    stream_read<<<RB, RT>>>((const uint4*)w, R / 16, sink);
                    CK(cudaEventRecord(e[3]));
                    CK(cudaEventSynchronize(e[3]));
                    float a, b;
                    CK(cudaEventElapsedTime(&a, e[0], e[1]));
                    CK(cudaEventElapsedTime(&b, e[2], e[3]));
                    tp += a;
                    tr += b;
                }
                tp *= 1000.0 / reps;
                tr *= 1000.0 / reps;
                printf("R %2zu MiB sleep %2u us  %-5s blocks %4d chunk %6u : pf %7.2f us  read %7.2f us"
                       "  (%.2f TB/s)\n",
                       R >> 20, T, c.method == 0   ? "cold"
                       : c.method == 1 ? "bulk"
                       : c.method == 2 ? "line"
                       : c.method == 3 ? "touch"
                                       : "bulkEL",
                       c.blocks, c.chunk, tp, tr, R / tr / 1e6);
            }
    // Hot: read twice, time the second.
    for (size_t R : regions) {
        double tr = 0;
        for (int r = 0; r < reps; ++r) {
            stream_read<<<RB, RT>>>((const uint4*)w, R / 16, sink);
            CK(cudaEventRecord(e[2]));
            stream_read<<<RB, RT>>>((const uint4*)w, R / 16, sink);
            CK(cudaEventRecord(e[3]));
            CK(cudaEventSynchronize(e[3]));
            float b;
            CK(cudaEventElapsedTime(&b, e[2], e[3]));
            tr += b;
        }
        tr *= 1000.0 / reps;
        printf("R %2zu MiB hot read %7.2f us (%.2f TB/s)\n", R >> 20, tr, R / tr / 1e6);
    }
    return 0;
}
