// Kernels for tests/h200/faults.sh (built there with nvcc -cubin -arch=sm_90). Checks of
// what the copy engine wrote, word by word: every word of a fill, every word of a copy
// of a pattern that differs at each index (each thread counts its own mismatches and
// adds them to one 64-bit counter with one atomic; grid-stride, 16-byte loads), and a
// kernel that runs for a given number of clocks. The kernels that fault are in
// faulty.cu, a module of their own.
#include <stdint.h>

__device__ __forceinline__ unsigned pattern(unsigned long long i, unsigned seed) {
    return (unsigned)(i * 2654435761ull) ^ seed;
}

extern "C" {

// Counts the words of p[0..n) that are not v (n a multiple of 4).
__global__ void count_ne(const uint4* __restrict__ p, unsigned long long n4, unsigned v,
                         unsigned long long* bad) {
    unsigned long long c = 0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n4; i += stride) {
        uint4 w = p[i];
        c += (w.x != v) + (w.y != v) + (w.z != v) + (w.w != v);
    }
    if (c) atomicAdd(bad, c);
}

// Writes pattern(i, seed) into every word of p[0..4 * n4).
__global__ void fill_pattern(uint4* __restrict__ p, unsigned long long n4, unsigned seed) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n4; i += stride) {
        unsigned long long k = 4 * i;
        p[i] = make_uint4(pattern(k, seed), pattern(k + 1, seed), pattern(k + 2, seed),
                          pattern(k + 3, seed));
    }
}

// Counts the words of p[0..4 * n4) that are not pattern(i, seed).
__global__ void count_ne_pattern(const uint4* __restrict__ p, unsigned long long n4,
                                 unsigned seed, unsigned long long* bad) {
    unsigned long long c = 0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n4; i += stride) {
        unsigned long long k = 4 * i;
        uint4 w = p[i];
        c += (w.x != pattern(k, seed)) + (w.y != pattern(k + 1, seed)) +
             (w.z != pattern(k + 2, seed)) + (w.w != pattern(k + 3, seed));
    }
    if (c) atomicAdd(bad, c);
}

// Runs for `cycles` SM clocks on every thread, then writes 1 to *done.
__global__ void spin(unsigned long long cycles, unsigned* done) {
    long long start = clock64();
    while ((unsigned long long)(clock64() - start) < cycles) {
    }
    if (threadIdx.x == 0 && blockIdx.x == 0) *done = 1u;
}

}  // extern "C"
