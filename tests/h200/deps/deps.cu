// Kernels for the dependency figures (tests/h200/deps.sh): built on the device machine
// with `nvcc -cubin -arch=sm_90 -O2 deps.cu`, loaded by rig-compute-probe's `deps` role
// and by cuda_deps.c in the same call. %globaltimer is the GPU's nanosecond clock,
// shared by every SM, so a stamp taken by one kernel and one taken by another subtract.

static __device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

// One thread spins for `ns` nanoseconds, then stores the time it ended at `end`.
extern "C" __global__ void stamp_after(unsigned long long ns, unsigned long long* end) {
    unsigned long long t0 = now_ns();
    while (now_ns() - t0 < ns) {
    }
    *end = now_ns();
}

// Stores the time it started at `start`.
extern "C" __global__ void stamp(unsigned long long* start) { *start = now_ns(); }

// Reads the last word of what a copy just wrote and stores it at `out[i]`: a kernel
// that ran before the copy landed reads the previous round's word.
extern "C" __global__ void read_last(const unsigned* src, unsigned long long n,
                                     unsigned* out, unsigned i) {
    out[i] = src[n - 1];
}

// Writes `v` over `n` words, for a copy that must follow it.
extern "C" __global__ void fill_words(unsigned* dst, unsigned long long n, unsigned v) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x) dst[i] = v;
}
