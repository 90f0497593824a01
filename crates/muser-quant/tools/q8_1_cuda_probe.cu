// Device probe: what ggml-cuda's Q8_1 activation quantizer computes under ggml's flags
// (-use_fast_math), so muser-quant's CPU emulation can be checked against it.
//
// Build and run on the device (writes into $OUT):
//   nvcc -O3 -arch=sm_90 -use_fast_math -o probe_fast q8_1_cuda_probe.cu && ./probe_fast $OUT/fast
//   nvcc -O3 -arch=sm_90 -o probe_strict q8_1_cuda_probe.cu && ./probe_strict $OUT/strict
//
// Outputs: <prefix>.q8_1.bin (Q8_1 blocks for the input streams below, 36 bytes each) and
// <prefix>.rcp.txt (how the reciprocal/division behaves: exhaustive over [1, 2)).
// Inputs (mirrored by the Rust test): splitmix64 streams; "floats" = per 32 values an
// exponent k = next % 41 - 20, then (2*(next >> 40) - 2^24) * 2^(k-24); "ties" = per block
// a factor c from a list and values c * ((next % 255) - 127) * 0.5 with x[0] = 127c.
// The kernel is written from ggml's quantize_q8_1 (one lane per value, warp reductions).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <cmath>
#include <vector>
#include <cuda_fp16.h>

struct SplitMix64 {
    uint64_t s;
    uint64_t next() {
        s += 0x9E3779B97F4A7C15ULL;
        uint64_t z = s;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
};

static std::vector<float> floats(uint64_t seed, size_t n) {
    SplitMix64 r{seed};
    std::vector<float> out;
    while (out.size() < n) {
        int k = (int)(r.next() % 41) - 20;
        float scale = ldexpf(1.0f, k - 24);
        for (int i = 0; i < 32 && out.size() < n; i++) {
            int64_t m = 2 * (int64_t)(r.next() >> 40) - (1LL << 24);
            out.push_back((float)m * scale);
        }
    }
    return out;
}

static std::vector<float> ties(uint64_t seed, size_t nblocks) {
    const float cs[8] = {3.0f, 5.0f, 7.0f, 11.0f, 0.1f, 0.3f, 1.7f, 2.9f};
    SplitMix64 r{seed};
    std::vector<float> out;
    for (size_t b = 0; b < nblocks; b++) {
        float c = cs[r.next() % 8];
        out.push_back(127.0f * c);
        for (int i = 1; i < 32; i++) {
            int t = (int)(r.next() % 255) - 127;
            out.push_back(c * ((float)t * 0.5f));
        }
    }
    return out;
}

__global__ void quantize_q8_1(const float *x, unsigned char *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float xi = x[i];
    float amax = fabsf(xi);
    float sum = xi;
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, o, 32));
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o, 32);
    const float d = amax / 127.0f;
    const int8_t q = amax == 0.0f ? 0 : roundf(xi / d);
    int b = i / 32, l = i % 32;
    y[b * 36 + 4 + l] = (unsigned char)q;
    if (l == 0) {
        // One 32-bit store of the half2 (as ggml does). Storing the two halves byte by byte
        // through `unsigned char` was miscompiled by nvcc 13.0 for sm_90 (ptxas emitted
        // F2I.U8.F16, a numeric conversion, for the low bytes).
        half2 ds = make_half2(d, sum);
        *(uint32_t *)(y + b * 36) = *(uint32_t *)&ds;
    }
}

// For every f32 m in [1, 2): the device's 1/m as `/` compiles under the current flags, the
// IEEE reciprocal, and x/m for a fixed x against x * (device 1/m).
__global__ void rcp_probe(float x, uint32_t *rcp_dev, uint32_t *rcp_rn, uint32_t *div_vs_mul) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (1u << 23)) return;
    float m = __uint_as_float(0x3f800000u | i);
    float r = 1.0f / m;
    rcp_dev[i] = __float_as_uint(r);
    rcp_rn[i] = __float_as_uint(__frcp_rn(m));
    float q = x / m;
    div_vs_mul[i] = (__float_as_uint(q) != __float_as_uint(__fmul_rn(x, r))) ? 1u : 0u;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: probe PREFIX\n"); return 2; }
    std::string prefix = argv[1];
    std::vector<float> in = floats(0x0C0D0000ULL, 32 * 4096);
    std::vector<float> t = ties(0x0C0D0001ULL, 1024);
    in.insert(in.end(), t.begin(), t.end());
    int n = (int)in.size();
    float *dx; unsigned char *dy;
    cudaMalloc(&dx, n * 4);
    cudaMalloc(&dy, n / 32 * 36);
    cudaMemcpy(dx, in.data(), n * 4, cudaMemcpyHostToDevice);
    quantize_q8_1<<<(n + 255) / 256, 256>>>(dx, dy, n);
    std::vector<unsigned char> y(n / 32 * 36);
    cudaMemcpy(y.data(), dy, y.size(), cudaMemcpyDeviceToHost);
    FILE *f = fopen((prefix + ".q8_1.bin").c_str(), "wb");
    fwrite(y.data(), 1, y.size(), f);
    fclose(f);

    const uint32_t N = 1u << 23;
    uint32_t *a, *b, *c;
    cudaMalloc(&a, N * 4); cudaMalloc(&b, N * 4); cudaMalloc(&c, N * 4);
    rcp_probe<<<N / 256, 256>>>(1.2345678f, a, b, c);
    std::vector<uint32_t> ha(N), hb(N), hc(N);
    cudaMemcpy(ha.data(), a, N * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(hb.data(), b, N * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(hc.data(), c, N * 4, cudaMemcpyDeviceToHost);
    long long diff = 0, up = 0, down = 0, bigger = 0, divmul = 0;
    FILE *g = fopen((prefix + ".rcp.txt").c_str(), "w");
    for (uint32_t i = 0; i < N; i++) {
        long long dlt = (long long)ha[i] - (long long)hb[i];
        if (dlt != 0) { diff++; if (dlt > 0) up++; else down++; if (dlt > 1 || dlt < -1) bigger++; }
        divmul += hc[i];
    }
    fprintf(g, "rcp_vs_ieee_mismatch %lld (above %lld, below %lld, >1ulp %lld) of %u\n", diff, up, down, bigger, N);
    fprintf(g, "div_ne_mul_by_rcp %lld\n", divmul);
    int shown = 0;
    for (uint32_t i = 0; i < N && shown < 50; i++) if (ha[i] != hb[i]) { fprintf(g, "m=%08x dev=%08x ieee=%08x\n", 0x3f800000u | i, ha[i], hb[i]); shown++; }
    fclose(g);
    // Whole tables of mismatches (index and device value) if they are few.
    if (diff > 0 && diff <= 4000000) {
        FILE *h = fopen((prefix + ".rcp_mismatch.bin").c_str(), "wb");
        for (uint32_t i = 0; i < N; i++) if (ha[i] != hb[i]) { fwrite(&i, 4, 1, h); fwrite(&ha[i], 4, 1, h); }
        fclose(h);
    }
    printf("done %s: rcp mismatches %lld, div!=mul %lld\n", prefix.c_str(), diff, divmul);
    return 0;
}
