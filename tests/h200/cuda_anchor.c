/*
 * The CUDA side of the H200's side-by-side channel figures (docs/BENCHMARKS.md,
 * "RM-served channels on the H200"):
 * what a user would pick instead of a rig channel, measured in the same run as
 * client/rig-client/tests/hw_h200.rs. Built and run on the device machine only:
 *
 *     nvcc -O2 -o /tmp/cuda_anchor tests/h200/cuda_anchor.c -lcuda && /tmp/cuda_anchor
 *
 * Prints one line per figure: `anchor <name> median <x> p99 <y> <unit> (n <count>)`.
 * Uses the GPU only through CUDA; frees everything it makes. No managed memory.
 */
#define ANCHOR "cuda_anchor"
#include "anchor.h"
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10000;
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));

    /* Context creation, as opening a rig session and channel is timed against it. */
    double opens[5];
    for (int i = 0; i < 5; i++) {
        double t0 = now_us();
        CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
        CUstream s;
        CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CHECK(cuStreamSynchronize(s));
        opens[i] = (now_us() - t0) / 1e3;
        CHECK(cuStreamDestroy(s));
        CHECK(cuCtxDestroy(ctx));
    }
    report("context_create_ms", opens, 5, "ms");

    CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

    /* Empty submission round trip: cuStreamWriteValue32 into pinned mapped host
     * memory, the host spins until it lands. */
    volatile uint32_t *word;
    CHECK(cuMemHostAlloc((void **)&word, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
    CUdeviceptr dword;
    CHECK(cuMemHostGetDevicePointer(&dword, (void *)word, 0));
    *word = 0;
    double *rt = calloc(n, sizeof *rt), *host = calloc(n, sizeof *host);
    for (int i = 0; i < n; i++) {
        uint32_t v = (uint32_t)i + 1;
        double t0 = now_us();
        CHECK(cuStreamWriteValue32(s, dword, v, CU_STREAM_WRITE_VALUE_DEFAULT));
        double t1 = now_us();
        double deadline = t0 + 1e6;
        while (*word != v) {
            if (now_us() > deadline) {
                fprintf(stderr, "cuda_anchor: write value %u did not land in 1 s\n", v);
                return 1;
            }
        }
        rt[i] = now_us() - t0;
        host[i] = t1 - t0;
    }
    report("write_value_round_trip_us", rt, n, "us");
    report("write_value_host_us", host, n, "us");

    /* 256 MiB pinned host to pinned host with cudaMemcpyAsync's driver equivalent. */
    size_t bytes = 256u << 20;
    void *a, *b;
    CHECK(cuMemHostAlloc(&a, bytes, CU_MEMHOSTALLOC_DEVICEMAP));
    CHECK(cuMemHostAlloc(&b, bytes, CU_MEMHOSTALLOC_DEVICEMAP));
    memset(a, 0x5a, bytes);
    memset(b, 0, bytes);
    double bw[20];
    for (int i = 0; i < 20; i++) {
        double t0 = now_us();
        CHECK(cuMemcpyAsync((CUdeviceptr)b, (CUdeviceptr)a, bytes, s));
        CHECK(cuStreamSynchronize(s));
        bw[i] = bytes / (now_us() - t0) / 1e3; /* GB/s */
    }
    if (memcmp(a, b, bytes) != 0) {
        fprintf(stderr, "cuda_anchor: the copy's bytes differ\n");
        return 1;
    }
    report("copy_256MiB_host_to_host_GBps", bw, 20, "GB/s");

    CHECK(cuMemFreeHost(a));
    CHECK(cuMemFreeHost(b));
    CHECK(cuMemFreeHost((void *)word));
    CHECK(cuStreamDestroy(s));
    CHECK(cuCtxDestroy(ctx));
    free(rt);
    free(host);
    return 0;
}
