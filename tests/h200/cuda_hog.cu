// CUDA's side of tests/h200/faults.sh's `cuda-hog` phase (built there with nvcc
// -arch=sm_90): what CUDA does in the situation where rig's hog was ended with Xid 109.
//   cuda_hog pings SECONDS [WINDOW_FILE]
//                            empty kernel + synchronize, one at a time, for SECONDS;
//                            prints the median, p99 and worst of each round trip (of
//                            those that started inside the window a hog wrote, given
//                            WINDOW_FILE)
//   cuda_hog hog [CLOCKS [BLOCKS]]
//                            BLOCKS (default one per SM) spinning CLOCKS each
//                            (default 4e10, about 20 s), then synchronize; prints how
//                            it ended and after how long; with CUDA_HOG_WINDOW=FILE
//                            writes when it ran there
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
        fprintf(stderr, "usage: cuda_hog pings SECONDS [WINDOW_FILE] | hog [CLOCKS [BLOCKS]]\n");
        return 2;
    }
    cudaFree(0);
    if (!strcmp(argv[1], "pings")) {
        double seconds = argc > 2 ? atof(argv[2]) : 10;
        std::vector<double> us, starts;
        double end = now_s() + seconds;
        cudaError_t e = cudaSuccess;
        while (now_s() < end && e == cudaSuccess) {
            double t = now_s();
            empty<<<1, 1>>>();
            e = cudaDeviceSynchronize();
            starts.push_back(t);
            us.push_back((now_s() - t) * 1e6);
        }
        // Only the pings that started inside the hog's window, as rig-fault-probe's
        // slice counts them.
        if (argc > 3) {
            double t0 = 0, t1 = 0;
            FILE* f = fopen(argv[3], "r");
            if (!f || fscanf(f, "%lf %lf", &t0, &t1) != 2) {
                fprintf(stderr, "cuda_hog: no window in %s\n", argv[3]);
                return 1;
            }
            fclose(f);
            std::vector<double> in;
            for (size_t i = 0; i < us.size(); i++)
                if (starts[i] >= t0 && starts[i] < t1) in.push_back(us[i]);
            us.swap(in);
        }
        if (us.empty()) {
            fprintf(stderr, "cuda_hog: no pings\n");
            return 1;
        }
        std::sort(us.begin(), us.end());
        printf("cuda pings_us median %.3f p99 %.3f max %.1f (n %zu) %s\n", us[us.size() / 2],
               us[(us.size() - 1) * 99 / 100], us.back(), us.size(), cudaGetErrorString(e));
        return e == cudaSuccess ? 0 : 1;
    }
    unsigned* done;
    cudaMalloc(&done, 4);
    double t = now_s();
    unsigned long long clocks = argc > 2 ? strtoull(argv[2], nullptr, 10) : 40000000000ull;
    unsigned blocks = argc > 3 ? (unsigned)strtoul(argv[3], nullptr, 10) : 132u;
    spin<<<blocks, 128>>>(clocks, done);
    cudaError_t e = cudaDeviceSynchronize();
    double t1 = now_s();
    printf("cuda hog ended after %.1f s: %s\n", t1 - t, cudaGetErrorString(e));
    // The window the other process's pings are counted in (steady_clock: CLOCK_MONOTONIC,
    // the same in both processes).
    if (const char* w = getenv("CUDA_HOG_WINDOW")) {
        if (FILE* f = fopen(w, "w")) {
            fprintf(f, "%.9f %.9f\n", t, t1);
            fclose(f);
        }
    }
    return e == cudaSuccess ? 0 : 1;
}
