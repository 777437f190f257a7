/*
 * CUDA's side of rig's dependency figures (tests/h200/deps.sh, docs/BENCHMARKS.md,
 * "Waits on the GPU"): deps.cu's kernels through the CUDA driver API in the same
 * device call as rig-compute-probe's `deps` role. Built and run on the device machine:
 *
 *     nvcc -O2 -o /tmp/cuda_deps tests/h200/deps/cuda_deps.c -lcuda
 *     /tmp/cuda_deps deps.cubin
 *
 * The gap between one kernel's end and the next one's start (both %globaltimer), on
 * one stream, on a second stream ordered by cuEventRecord + cuStreamWaitEvent, and on
 * a second stream the host started after cuStreamSynchronize; the host time of the
 * event record and wait; cuEventElapsedTime around a kernel of 100 µs; and a 256 MiB
 * upload on one stream beside a kernel of about as long on the other. Events without timing, contexts with spin scheduling, as a
 * latency-minded runtime would. Frees everything it makes.
 */
#define ANCHOR "cuda_deps"
#include "../anchor.h"
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ROUNDS = 500 };
static const unsigned long long SPIN_NS = 20000;

static double now_ns(void) { return now_us() * 1e3; }

/* Nanoseconds from the end stamp to the start stamp, in µs. */
static double gap_us(volatile unsigned long long *out) {
    return (double)(long long)(out[1] - out[0]) / 1e3;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s DEPS_CUBIN\n", argv[0]); return 2; }
    void *image = read_file(argv[1]);
    CHECK(cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    CUstream s1, s2;
    CUmodule mod;
    CUfunction after, stamp;
    CUevent ev;
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuCtxCreate(&ctx, NULL, CU_CTX_SCHED_SPIN, dev));
    CHECK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CHECK(cuModuleLoadData(&mod, image));
    CHECK(cuModuleGetFunction(&after, mod, "stamp_after"));
    CHECK(cuModuleGetFunction(&stamp, mod, "stamp"));
    unsigned long long *host;
    CUdeviceptr out;
    CHECK(cuMemHostAlloc((void **)&host, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
    CHECK(cuMemHostGetDevicePointer(&out, host, 0));
    volatile unsigned long long *o = host;
    CUdeviceptr end_at = out, start_at = out + 8;
    unsigned long long spin = SPIN_NS;
    void *first[] = {&spin, &end_at}, *second[] = {&start_at};
    for (int i = 0; i < 3; i++) {
        CHECK(cuLaunchKernel(stamp, 1, 1, 1, 1, 1, 1, 0, s1, second, NULL));
        CHECK(cuLaunchKernel(stamp, 1, 1, 1, 1, 1, 1, 0, s2, second, NULL));
        CHECK(cuCtxSynchronize());
    }
    double *same = malloc(ROUNDS * sizeof *same), *cross = malloc(ROUNDS * sizeof *cross),
           *hostw = malloc(ROUNDS * sizeof *hostw), *dep = malloc(ROUNDS * sizeof *dep);
    int negative = 0;
    for (int r = 0; r < ROUNDS; r++) {
        o[0] = o[1] = 0;
        CHECK(cuLaunchKernel(after, 1, 1, 1, 1, 1, 1, 0, s1, first, NULL));
        CHECK(cuLaunchKernel(stamp, 1, 1, 1, 1, 1, 1, 0, s1, second, NULL));
        CHECK(cuStreamSynchronize(s1));
        same[r] = gap_us(o);

        o[0] = o[1] = 0;
        CHECK(cuLaunchKernel(after, 1, 1, 1, 1, 1, 1, 0, s1, first, NULL));
        double t0 = now_ns();
        CHECK(cuEventRecord(ev, s1));
        CHECK(cuStreamWaitEvent(s2, ev, 0));
        dep[r] = now_ns() - t0;
        CHECK(cuLaunchKernel(stamp, 1, 1, 1, 1, 1, 1, 0, s2, second, NULL));
        CHECK(cuStreamSynchronize(s2));
        cross[r] = gap_us(o);
        negative += cross[r] < 0;

        o[0] = o[1] = 0;
        CHECK(cuLaunchKernel(after, 1, 1, 1, 1, 1, 1, 0, s1, first, NULL));
        CHECK(cuStreamSynchronize(s1));
        CHECK(cuLaunchKernel(stamp, 1, 1, 1, 1, 1, 1, 0, s2, second, NULL));
        CHECK(cuStreamSynchronize(s2));
        hostw[r] = gap_us(o);
    }
    printf("check anchor_cross_stream_order %s (%d negative of %d)\n", negative ? "FAILED" : "ok",
           negative, ROUNDS);
    report("deps_gap_same_channel_us", same, ROUNDS, "us");
    report("deps_gap_cross_channel_acquire_us", cross, ROUNDS, "us");
    report("deps_gap_cross_channel_host_wait_us", hostw, ROUNDS, "us");
    report("deps_host_per_dependency_ns", dep, ROUNDS, "ns");

    /* Events with timing around a kernel that spins 100 µs of %globaltimer. */
    CUevent e0, e1;
    CHECK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    unsigned long long long_ns = 100000;
    void *longer[] = {&long_ns, &end_at};
    for (int r = 0; r < ROUNDS; r++) {
        float ms;
        CHECK(cuEventRecord(e0, s1));
        CHECK(cuLaunchKernel(after, 1, 1, 1, 1, 1, 1, 0, s1, longer, NULL));
        CHECK(cuEventRecord(e1, s1));
        CHECK(cuEventSynchronize(e1));
        CHECK(cuEventElapsedTime(&ms, e0, e1));
        same[r] = ms * 1e3;
    }
    report("events_elapsed_100us_kernel_us", same, ROUNDS, "us");
    CHECK(cuEventDestroy(e0));
    CHECK(cuEventDestroy(e1));

    /* A copy beside a kernel: 256 MiB pinned host -> device on s2, a kernel of about
     * as long on s1. */
    size_t big = 256u << 20;
    void *src;
    CUdeviceptr dst;
    CHECK(cuMemHostAlloc(&src, big, 0));
    CHECK(cuMemAlloc(&dst, big));
    memset(src, 1, big);
    double t0 = now_ns();
    CHECK(cuMemcpyHtoDAsync(dst, src, big, s2));
    CHECK(cuStreamSynchronize(s2));
    unsigned long long kernel_ns = (unsigned long long)(now_ns() - t0);
    void *spin_args[] = {&kernel_ns, &end_at};
    double ac[20], ak[20], both[20];
    for (int r = 0; r < 20; r++) {
        double t = now_ns();
        CHECK(cuMemcpyHtoDAsync(dst, src, big, s2));
        CHECK(cuStreamSynchronize(s2));
        ac[r] = (now_ns() - t) / 1e6;
        t = now_ns();
        CHECK(cuLaunchKernel(after, 1, 1, 1, 1, 1, 1, 0, s1, spin_args, NULL));
        CHECK(cuStreamSynchronize(s1));
        ak[r] = (now_ns() - t) / 1e6;
        t = now_ns();
        CHECK(cuMemcpyHtoDAsync(dst, src, big, s2));
        CHECK(cuLaunchKernel(after, 1, 1, 1, 1, 1, 1, 0, s1, spin_args, NULL));
        CHECK(cuStreamSynchronize(s2));
        CHECK(cuStreamSynchronize(s1));
        both[r] = (now_ns() - t) / 1e6;
    }
    report("beside_copy_256mib_alone_ms", ac, 20, "ms");
    report("beside_kernel_alone_ms", ak, 20, "ms");
    report("beside_copy_and_kernel_ms", both, 20, "ms");
    CHECK(cuMemFree(dst));
    CHECK(cuMemFreeHost(src));
    CHECK(cuMemFreeHost(host));
    CHECK(cuModuleUnload(mod));
    CHECK(cuEventDestroy(ev));
    CHECK(cuStreamDestroy(s1));
    CHECK(cuStreamDestroy(s2));
    CHECK(cuCtxDestroy(ctx));
    free(image);
    free(same);
    free(cross);
    free(hostw);
    free(dep);
    return negative != 0;
}
