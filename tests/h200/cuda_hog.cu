// CUDA's side of tests/h200/faults.sh's `cuda-hog` phase (built there with nvcc
// -arch=sm_90): what CUDA does in the situation where rig's hog was ended with Xid 109.
//   cuda_hog pings SECONDS   empty kernel + synchronize, one at a time, for SECONDS;
//                            prints the median, p99 and worst of each round trip
//   cuda_hog hog             one block per SM spinning 4e10 clocks (about 20 s),
//                            then synchronize; prints how it ended and after how long
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

__global__ void empty() {}

__global__ void spin(unsigned long long cycles, unsigned* done) {
    long long start = clock64();
    while ((unsigned long long)(clock64() - start) < cycles) {
    }
    if (threadIdx.x == 0 && blockIdx.x == 0) *done = 1u;
}

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: cuda_hog pings SECONDS | hog\n");
        return 2;
    }
    cudaFree(0);
    if (!strcmp(argv[1], "pings")) {
        double seconds = argc > 2 ? atof(argv[2]) : 10;
        std::vector<double> us;
        double end = now_s() + seconds;
        cudaError_t e = cudaSuccess;
        while (now_s() < end && e == cudaSuccess) {
            double t = now_s();
            empty<<<1, 1>>>();
            e = cudaDeviceSynchronize();
            us.push_back((now_s() - t) * 1e6);
        }
        std::sort(us.begin(), us.end());
        printf("cuda pings_us median %.3f p99 %.3f max %.1f (n %zu) %s\n", us[us.size() / 2],
               us[(us.size() - 1) * 99 / 100], us.back(), us.size(), cudaGetErrorString(e));
        return e == cudaSuccess ? 0 : 1;
    }
    unsigned* done;
    cudaMalloc(&done, 4);
    double t = now_s();
    spin<<<132, 128>>>(40000000000ull, done);
    cudaError_t e = cudaDeviceSynchronize();
    printf("cuda hog ended after %.1f s: %s\n", now_s() - t, cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}
