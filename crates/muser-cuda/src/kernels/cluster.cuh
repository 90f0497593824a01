// cluster.cuh — thread-block cluster primitives (sm_90): rank, the split cluster barrier and
// the distributed-shared-memory address map. Used by the kernels that exchange values between a
// cluster's blocks (norm.cu residual_norm_h16_cl8, attention.cu attn_combine_h16_cl); the host
// launches them with `muser_cuda::launch::launch_cluster`.

// This block's rank in its cluster.
__device__ __forceinline__ u32 cl_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
// Cluster barrier halves: arrive (release: this thread's shared-memory stores, remote ones
// included, become visible to the cluster) and wait (acquire). Every thread of every block calls
// each, in pairs.
__device__ __forceinline__ void cl_arrive() {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void cl_wait() {
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The address of `p` (this block's shared memory) in block `rank`'s shared memory window.
__device__ __forceinline__ u32 cl_map(const void* p, u32 rank) {
    u32 a = (u32)__cvta_generic_to_shared(p), ra;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(rank));
    return ra;
}
// Store `v` at `a`, an address in a cluster block's shared memory window (cl_map).
__device__ __forceinline__ void cl_st(u32 a, float v) {
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(a), "f"(v) : "memory");
}
__device__ __forceinline__ void cl_st(u32 a, double v) {
    asm volatile("st.shared::cluster.f64 [%0], %1;" ::"r"(a), "d"(v) : "memory");
}
