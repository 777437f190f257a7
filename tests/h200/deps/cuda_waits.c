/*
 * CUDA's side of rig's wait figures (docs/BENCHMARKS.md, "Waits that sleep"): deps.cu's
 * `stamp_after` kernel, which spins for a given time on %globaltimer, launched and then
 * waited for with cuStreamSynchronize under each of the context's schedule flags (spin,
 * yield, blocking sync, auto), for kernels of 20 µs, 1 ms and 10 ms. For each: the
 * host's time from the launch to the wait's return, and the CPU time the waiting thread
 * used meanwhile (CLOCK_THREAD_CPUTIME_ID), in the same device call as
 * rig-compute-probe's `waits` role. Frees everything it makes.
 *
 *     nvcc -O2 -o /tmp/cuda_waits tests/h200/deps/cuda_waits.c -lcuda
 *     /tmp/cuda_waits deps.cubin
 */
#define ANCHOR "cuda_waits"
#include "../anchor.h"
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s DEPS_CUBIN\n", argv[0]); return 2; }
    void *image = read_file(argv[1]);
    CHECK(cuInit(0));
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0));
    const struct { const char *name; unsigned flag; } policies[] = {
        {"spin", CU_CTX_SCHED_SPIN},
        {"yield", CU_CTX_SCHED_YIELD},
        {"block", CU_CTX_SCHED_BLOCKING_SYNC},
        {"auto", CU_CTX_SCHED_AUTO},
    };
    const struct { const char *name; unsigned long long ns; int rounds; } kernels[] = {
        {"20us", 20000, 200},
        {"1ms", 1000000, 50},
        {"10ms", 10000000, 10},
    };
    for (unsigned p = 0; p < sizeof policies / sizeof *policies; p++) {
        CUcontext ctx;
        CUmodule mod;
        CUfunction after;
        CUstream s;
        CUdeviceptr out;
        CHECK(cuCtxCreate(&ctx, NULL, policies[p].flag, dev));
        CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CHECK(cuModuleLoadData(&mod, image));
        CHECK(cuModuleGetFunction(&after, mod, "stamp_after"));
        CHECK(cuMemAlloc(&out, 4096));
        for (unsigned k = 0; k < sizeof kernels / sizeof *kernels; k++) {
            int n = kernels[k].rounds;
            double *wall = calloc(n, sizeof *wall), *cpu = calloc(n, sizeof *cpu);
            unsigned long long spin = kernels[k].ns;
            void *args[] = {&spin, &out};
            /* One to warm the context and the kernel. */
            CHECK(cuLaunchKernel(after, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
            CHECK(cuStreamSynchronize(s));
            for (int r = 0; r < n; r++) {
                double t = now_us(), c = cpu_us();
                CHECK(cuLaunchKernel(after, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
                CHECK(cuStreamSynchronize(s));
                wall[r] = now_us() - t;
                cpu[r] = cpu_us() - c;
            }
            char name[96];
            snprintf(name, sizeof name, "waits_%s_%s_kernel_wall_us", policies[p].name, kernels[k].name);
            report(name, wall, n, "us");
            snprintf(name, sizeof name, "waits_%s_%s_kernel_cpu_us", policies[p].name, kernels[k].name);
            report(name, cpu, n, "us");
            free(wall);
            free(cpu);
        }
        CHECK(cuMemFree(out));
        CHECK(cuModuleUnload(mod));
        CHECK(cuStreamDestroy(s));
        CHECK(cuCtxDestroy(ctx));
    }
    free(image);
    return 0;
}
