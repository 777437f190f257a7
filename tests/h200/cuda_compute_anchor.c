/*
 * CUDA's side of rig's compute figures on the H200 (docs/BENCHMARKS.md): the same
 * cubin rig launches (client/cubin/tests/data/kernels.sm_90.cubin), through the CUDA
 * driver API, in the same device call. Built and run on the device machine only:
 *
 *     nvcc -O2 -o /tmp/cuda_compute_anchor tests/h200/cuda_compute_anchor.c -lcuda
 *     /tmp/cuda_compute_anchor kernels.sm_90.cubin [launches]
 *     /tmp/cuda_compute_anchor kernels.sm_90.cubin swarm SECONDS
 *
 * `swarm` is one of many processes at once, as rig-compute-probe's `swarm`: store_at
 * launched and synchronised one at a time for SECONDS, storing this launch's own value
 * into pinned, mapped host memory that is read back after each.
 *
 * Prints one line per figure: `anchor <name> median <x> p99 <y> <unit> (n <count>)`.
 * Uses the GPU only through CUDA (spin scheduling, as a latency-minded runtime would);
 * frees everything it makes; no managed memory.
 */
#define ANCHOR "cuda_compute_anchor"
#include "anchor.h"
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* With SWARM_DIR set: a file ready.PID there, then a wait for the file go, which the
 * harness makes once every process is ready, so the timed windows overlap whole
 * (rig-compute-probe's swarm does the same). */
static void start_together(void) {
    const char *dir = getenv("SWARM_DIR");
    if (!dir) return;
    char p[4096];
    snprintf(p, sizeof p, "%s/ready.%d", dir, (int)getpid());
    FILE *f = fopen(p, "w");
    if (!f) { perror(p); exit(1); }
    fclose(f);
    snprintf(p, sizeof p, "%s/go", dir);
    double give_up = now_us() + 120e6;
    while (access(p, F_OK) != 0) {
        if (now_us() > give_up) { fprintf(stderr, "swarm: no go within 120 s\n"); exit(1); }
        usleep(1000);
    }
}

static int swarm(const void *image, double seconds) {
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    CUmodule mod;
    CUfunction store;
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuCtxCreate(&ctx, NULL, CU_CTX_SCHED_SPIN, dev));
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuModuleLoadData(&mod, image));
    CHECK(cuModuleGetFunction(&store, mod, "store_at"));
    unsigned *host;
    CUdeviceptr dhost;
    CHECK(cuMemHostAlloc((void **)&host, 4096 * 4, CU_MEMHOSTALLOC_DEVICEMAP));
    CHECK(cuMemHostGetDevicePointer(&dhost, host, 0));
    unsigned tag = (unsigned)getpid() & 0xfff;
    int cap = 4 << 20, n = 0;
    long wrong = 0;
    double *lat = malloc(cap * sizeof *lat);
    start_together();
    double start = now_us(), end = start + seconds * 1e6;
    while (now_us() < end && n < cap) {
        unsigned at = n % 4096, value = (tag << 20) | (n & 0xfffff);
        CUdeviceptr p = dhost + at * 4;
        void *args[] = {&p, &value};
        double t0 = now_us();
        CHECK(cuLaunchKernel(store, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        CHECK(cuStreamSynchronize(s));
        lat[n++] = now_us() - t0;
        wrong += ((volatile unsigned *)host)[at] != value;
    }
    printf("anchor swarm window pid %d start_us %.0f end_us %.0f\n", (int)getpid(), start, now_us());
    report("swarm_launch_sync_us", lat, n, "us");
    printf("anchor swarm pid %d launches %d wrong %ld\n", (int)getpid(), n, wrong);
    CHECK(cuMemFreeHost(host));
    CHECK(cuModuleUnload(mod));
    CHECK(cuStreamDestroy(s));
    CHECK(cuCtxDestroy(ctx));
    free(lat);
    return wrong != 0;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s CUBIN [launches | swarm SECONDS | host]\n", argv[0]); return 2; }
    if (argc > 3 && strcmp(argv[2], "swarm") == 0) {
        void *image = read_file(argv[1]);
        CHECK(cuInit(0));
        int rc = swarm(image, atof(argv[3]));
        free(image);
        return rc;
    }
    /* host: the launch figures only (rig-compute-probe's `host` role), for comparing
     * CPUs in one device call. */
    int host_only = argc > 2 && strcmp(argv[2], "host") == 0;
    int n = argc > 2 && !host_only ? atoi(argv[2]) : 10000;
    void *image = read_file(argv[1]);
    CHECK(cuInit(0));
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0));

    /* Opening: context + stream + module + first launch, completed. */
    double open[5];
    for (int i = 0; i < (host_only ? 0 : 5); i++) {
        double t0 = now_us();
        CUcontext c;
        CUstream s;
        CUmodule m;
        CUfunction f;
        CHECK(cuCtxCreate(&c, NULL, CU_CTX_SCHED_SPIN, dev));
        CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CHECK(cuModuleLoadData(&m, image));
        CHECK(cuModuleGetFunction(&f, m, "empty"));
        CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
        CHECK(cuStreamSynchronize(s));
        open[i] = (now_us() - t0) / 1e3;
        CHECK(cuModuleUnload(m));
        CHECK(cuStreamDestroy(s));
        CHECK(cuCtxDestroy(c));
    }
    if (!host_only) report("open_first_kernel_ms", open, 5, "ms");

    CUcontext ctx;
    CUstream s;
    CUmodule mod;
    CUfunction empty, saxpy;
    CHECK(cuCtxCreate(&ctx, NULL, CU_CTX_SCHED_SPIN, dev));
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuModuleLoadData(&mod, image));
    CHECK(cuModuleGetFunction(&empty, mod, "empty"));
    CHECK(cuModuleGetFunction(&saxpy, mod, "saxpy"));

    double *rt = calloc(n, sizeof *rt), *host = calloc(n, sizeof *host);
    for (int i = 0; i < 100; i++) CHECK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    CHECK(cuStreamSynchronize(s));
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        CHECK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
        double t1 = now_us();
        CHECK(cuStreamSynchronize(s));
        host[i] = t1 - t0;
        rt[i] = now_us() - t0;
    }
    report("empty_launch_sync_us", rt, n, "us");
    report("empty_launch_host_us", host, n, "us");
    {
        /* Host time without a clock pair per launch: 32 launches timed together, then a
         * synchronisation off the clock (as rig-compute-probe's batch figure). */
        double batch[500];
        for (int i = 0; i < 520; i++) {
            double t0 = now_us();
            for (int j = 0; j < 32; j++) CHECK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
            double spent = now_us() - t0;
            CHECK(cuStreamSynchronize(s));
            if (i >= 20) batch[i - 20] = spent / 32;
        }
        report("empty_launch_host_batch_us", batch, 500, "us");
    }
    {
        double t0 = now_us();
        for (int i = 0; i < n; i++) CHECK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
        CHECK(cuStreamSynchronize(s));
        double per = (now_us() - t0) / n;
        printf("anchor empty_back_to_back_us median %.3f p99 %.3f us (n %d)\n", per, per, n);
    }
    if (host_only) goto out;

    /* saxpy over 2^28 floats, the same cubin, 1,048,576 blocks of 256. */
    unsigned long long nel = 1ull << 28;
    CUdeviceptr x, y;
    CHECK(cuMemAlloc(&x, nel * 4));
    CHECK(cuMemAlloc(&y, nel * 4));
    CHECK(cuMemsetD32(x, 0x3f800000u, nel));
    CHECK(cuMemsetD32(y, 0x3f800000u, nel));
    float a = 3.0f;
    void *args[] = {&a, &x, &y, &nel};
    double sax[21];
    for (int i = 0; i < 21; i++) {
        double t0 = now_us();
        CHECK(cuLaunchKernel(saxpy, (unsigned)(nel / 256), 1, 1, 256, 1, 1, 0, s, args, NULL));
        CHECK(cuStreamSynchronize(s));
        sax[i] = now_us() - t0;
    }
    report("saxpy_2e28_us", sax, 21, "us");

    /* Copies: 256 MiB pinned host <-> device, 1 GiB device -> device. */
    size_t hb = 256u << 20;
    void *h;
    CHECK(cuMemAllocHost(&h, hb));
    memset(h, 1, hb);
    double bw[10];
    for (int i = 0; i < 10; i++) {
        double t0 = now_us();
        CHECK(cuMemcpyHtoDAsync(x, h, hb, s));
        CHECK(cuStreamSynchronize(s));
        bw[i] = hb / (now_us() - t0) / 1e3;
    }
    report("h2d_256MiB_GBps", bw, 10, "GB/s");
    for (int i = 0; i < 10; i++) {
        double t0 = now_us();
        CHECK(cuMemcpyDtoHAsync(h, x, hb, s));
        CHECK(cuStreamSynchronize(s));
        bw[i] = hb / (now_us() - t0) / 1e3;
    }
    report("d2h_256MiB_GBps", bw, 10, "GB/s");
    for (int i = 0; i < 10; i++) {
        double t0 = now_us();
        CHECK(cuMemcpyDtoDAsync(y, x, nel * 4, s));
        CHECK(cuStreamSynchronize(s));
        bw[i] = (nel * 4) / (now_us() - t0) / 1e3;
    }
    report("d2d_1GiB_GBps", bw, 10, "GB/s");

    /* GPU memory: allocate and free 2 MiB, with one live allocation beside. */
    double al[1000];
    for (int i = 0; i < 1000; i++) {
        CUdeviceptr p;
        double t0 = now_us();
        CHECK(cuMemAlloc(&p, 2u << 20));
        CHECK(cuMemFree(p));
        al[i] = now_us() - t0;
    }
    report("alloc_free_2MiB_us", al, 1000, "us");

    CHECK(cuMemFreeHost(h));
    CHECK(cuMemFree(x));
    CHECK(cuMemFree(y));
out:
    CHECK(cuModuleUnload(mod));
    CHECK(cuStreamDestroy(s));
    CHECK(cuCtxDestroy(ctx));
    free(rt);
    free(host);
    free(image);
    return 0;
}
