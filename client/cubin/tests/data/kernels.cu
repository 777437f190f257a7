// Kernels for rig's cubin fixtures and the H200 launch tests (client/cubin, docs/compute.md).
// Built by build.sh on a machine with CUDA; the cubins it makes are committed beside it.
// Plain C names (extern "C") so NVRTC, nvcc and ptxas builds name the kernels alike.
// No headers: NVRTC compiles this file as it is.

extern "C" {

// Nothing: the launch round trip.
__global__ void empty() {}

// y = a*x + y over n elements: CUDA's own saxpy, the same cubin timed both ways.
__global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y,
                      unsigned long long n) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// Every thread writes its own element, indexed by all three grid and block dimensions:
// with constant bank 0's launch words left at zero, most elements stay unwritten.
__global__ void grid_fill(unsigned* out) {
    unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
    unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    unsigned i = block * per_block + thread;
    out[i] = i * 2654435761u + 1u;
}

// Sum of n words: a tree in dynamic shared memory (blockDim.x words), each block's
// total through static shared memory, then one 64-bit atomic per block.
__global__ void reduce_sum(const unsigned* __restrict__ in, unsigned long long* out,
                           unsigned n) {
    extern __shared__ unsigned dyn[];
    __shared__ unsigned long long block_total;
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + t;
    dyn[t] = i < n ? in[i] : 0u;
    if (t == 0) block_total = 0;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) dyn[t] += dyn[t + s];
        __syncthreads();
    }
    if (t == 0) block_total = dyn[0];
    __syncthreads();
    if (t == 0) atomicAdd(out, block_total);
}

// A dynamically indexed array lives in local memory (the thread's stack).
__global__ void local_array(const unsigned* __restrict__ idx, unsigned* out, unsigned n) {
    unsigned a[256];
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < 256; k++) a[k] = t * 31u + (unsigned)k;
    if (t < n) out[t] = a[idx[t] & 255u];
}

}  // extern "C"

// __constant__ data (bank 3), a zeroed __device__ variable and an initialised one
// (their addresses reach the code through bank 4 and relocations).
__constant__ unsigned table[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
__device__ unsigned long long counter;
__device__ unsigned bias = 0x01000000u;

extern "C" {

__global__ void const_global(unsigned* out, unsigned n) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) {
        out[t] = table[t & 15u] + bias;
        atomicAdd(&counter, 1ull);
    }
}

__global__ void read_counter(unsigned long long* out) { *out = counter; }

// Spins for `cycles` SM clocks, then thread 0 of block 0 writes 1 to *done.
__global__ void spin(unsigned long long cycles, unsigned* done) {
    long long start = clock64();
    while ((unsigned long long)(clock64() - start) < cycles) {
    }
    if (threadIdx.x == 0 && blockIdx.x == 0) *done = 1u;
}

// One store, wherever it is told: the fault test passes an address the client's
// GPU address space does not map.
__global__ void store_at(unsigned* p, unsigned v) { *p = v; }

// Device-to-device copy, 16 bytes per thread per step, grid-stride.
__global__ void copy_u4(const uint4* __restrict__ src, uint4* __restrict__ dst,
                        unsigned long long n16) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < n16; i += stride)
        dst[i] = src[i];
}

// Parameters of mixed sizes and alignments, one of them a struct by value.
struct Mixed {
    unsigned long long a;
    unsigned b;
    float c[5];
};
__global__ void mixed_params(unsigned char e, Mixed p, double d, unsigned short h,
                             unsigned long long* out) {
    out[0] = p.a;
    out[1] = p.b;
    out[2] = (unsigned long long)(p.c[0] + p.c[4]);
    out[3] = (unsigned long long)d;
    out[4] = e;
    out[5] = h;
}

}  // extern "C"
