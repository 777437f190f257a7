/*
 * CUDA's side of rig's cooperative-groups run (tests/h200/compute.sh, PHASES=coop):
 * the same coop.cu cubin (client/cubin/tests/data) through the driver API, its kernels
 * launched as CUDA launches them (cuLaunchKernel; grid_sum and grid_env also with
 * cuLaunchCooperativeKernel), each result checked against the host's as rig's probe
 * checks it, and what rig computes itself printed beside it: CUDA's occupancy for each
 * shape the probe asks rig about, and what a grid sees of its grid workspace.
 *
 *     nvcc -O2 -o cuda_coop tests/h200/coop/cuda_coop.c -lcuda
 *     cuda_coop client/cubin/tests/data/coop.sm_90.cubin
 */
#define ANCHOR "cuda_coop"
#include "../anchor.h"

#include <stdint.h>
#include <string.h>

static unsigned word(unsigned i) {
    unsigned v = i * 2654435761u;
    return ((v << 7) | (v >> 25)) % 1000;
}

static int wrong_total;
static void check(const char *name, int wrong, int of) {
    printf("anchor check %s %s (%d of %d wrong)\n", name, wrong ? "FAILED" : "ok", wrong, of);
    wrong_total += wrong;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s COOP_CUBIN\n", argv[0]); return 2; }
    CHECK(cuInit(0));
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    int sms, coop_ok;
    CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CHECK(cuDeviceGetAttribute(&coop_ok, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, dev));
    printf("anchor coop sms %d cooperative_launch %d\n", sms, coop_ok);
    CUmodule mod;
    CHECK(cuModuleLoadData(&mod, read_file(argv[1])));
    CUfunction shuffle, take, pw, cub, gs, env;
    CHECK(cuModuleGetFunction(&shuffle, mod, "shuffle_atomic"));
    CHECK(cuModuleGetFunction(&take, mod, "take_total"));
    CHECK(cuModuleGetFunction(&pw, mod, "partial_warp"));
    CHECK(cuModuleGetFunction(&cub, mod, "cub_block"));
    CHECK(cuModuleGetFunction(&gs, mod, "grid_sum"));
    CHECK(cuModuleGetFunction(&env, mod, "grid_env"));

    /* Occupancy of the shapes rig's probe prints its own figure for. */
    CHECK(cuFuncSetAttribute(gs, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 200 * 1024));
    struct { const char *name; CUfunction f; int block; size_t dyn; } shapes[] = {
        {"grid_sum", gs, 256, 0},         {"grid_sum", gs, 1024, 0},
        {"grid_sum", gs, 64, 100 * 1024}, {"grid_sum", gs, 32, 7 * 1024},
        {"grid_sum", gs, 32, 0},          {"cub_block", cub, 256, 0},
        {"partial_warp", pw, 256, 0},     {"shuffle_atomic", shuffle, 256, 0},
    };
    int gs_per_sm = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        int n;
        CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, shapes[i].f, shapes[i].block,
                                                          shapes[i].dyn));
        printf("anchor occupancy %s block %d dynamic %zu per_sm %d\n", shapes[i].name,
               shapes[i].block, shapes[i].dyn, n);
        if (i == 0) gs_per_sm = n;
    }

    unsigned n = (1u << 22) + 123;
    unsigned *hx = malloc((size_t)n * 4);
    unsigned long long sum = 0;
    for (unsigned i = 0; i < n; i++) { hx[i] = word(i); sum += hx[i]; }
    CUdeviceptr x, out, aux;
    CHECK(cuMemAlloc(&x, (size_t)n * 4));
    CHECK(cuMemAlloc(&out, 16 << 20));
    CHECK(cuMemAlloc(&aux, 1 << 20));
    CHECK(cuMemcpyHtoD(x, hx, (size_t)n * 4));

    /* shuffle_atomic three times, the __device__ total taken each time. */
    int wrong = 0;
    for (int r = 0; r < 3; r++) {
        void *a[] = {&x, &n};
        CHECK(cuLaunchKernel(shuffle, 264, 1, 1, 256, 1, 1, 0, 0, a, 0));
        void *b[] = {&out};
        CHECK(cuLaunchKernel(take, 1, 1, 1, 1, 1, 1, 0, 0, b, 0));
        unsigned long long got;
        CHECK(cuMemcpyDtoH(&got, out, 8));
        printf("anchor coop shuffle_atomic sum %llu want %llu\n", got, sum);
        wrong += got != sum;
    }
    check("coop_shuffle_atomic", wrong, 3);

    /* partial_warp: 1,000 threads in bounds of 1,024. */
    unsigned np = 1000, got4[128];
    CHECK(cuMemsetD8(out, 0, 512));
    void *pa[] = {&x, &out, &np};
    CHECK(cuLaunchKernel(pw, 4, 1, 1, 256, 1, 1, 0, 0, pa, 0));
    CHECK(cuMemcpyDtoH(got4, out, 512));
    wrong = 0;
    for (unsigned w = 0; w < 32; w++) {
        unsigned s = 0, cnt = 0, odd = 0, tile = 0;
        for (unsigned i = w * 32; i < w * 32 + 32 && i < np; i++) {
            s += word(i); cnt++;
            if (word(i) & 1) odd |= 1u << (i - w * 32);
            if (i < w * 32 + 16) tile += word(i);
        }
        unsigned *g = got4 + w * 4;
        if (g[0] != s || g[1] != cnt || g[2] != odd || g[3] != tile) wrong++;
    }
    check("coop_partial_warp", wrong, 32);

    /* cub_block: 64 blocks of 256 ints. */
    int nc = 64 * 256, *xi = malloc(nc * 4), *scan = malloc(nc * 4), sums[64], warps[512];
    for (int i = 0; i < nc; i++) xi[i] = (int)word(i) - 500;
    CHECK(cuMemcpyHtoD(aux, xi, nc * 4));
    CUdeviceptr dscan = out, dsums = out + (4 << 20), dwarps = out + (8 << 20);
    void *ca[] = {&aux, &dscan, &dsums, &dwarps};
    CHECK(cuLaunchKernel(cub, 64, 1, 1, 256, 1, 1, 0, 0, ca, 0));
    CHECK(cuMemcpyDtoH(scan, dscan, nc * 4));
    CHECK(cuMemcpyDtoH(sums, dsums, sizeof sums));
    CHECK(cuMemcpyDtoH(warps, dwarps, sizeof warps));
    wrong = 0;
    for (int b = 0; b < 64; b++) {
        int acc = 0;
        for (int t = 0; t < 256; t++) { acc += xi[b * 256 + t]; wrong += scan[b * 256 + t] != acc; }
        wrong += sums[b] != acc;
        for (int w = 0; w < 8; w++) {
            int s = 0;
            for (int l = 0; l < 32; l++) s += xi[b * 256 + w * 32 + l];
            wrong += warps[b * 8 + w] != s;
        }
    }
    check("coop_cub_block_reduce_scan_warp", wrong, nc + 64 + 512);

    /* grid_env: what a grid sees of its workspace, ordinary then cooperative. */
    for (int coop = 0; coop < 2; coop++) {
        unsigned w[5];
        CHECK(cuMemsetD8(out, 0xaa, 20));
        void *ea[] = {&out};
        if (coop)
            CHECK(cuLaunchCooperativeKernel(env, 2, 1, 1, 32, 1, 1, 0, 0, ea));
        else
            CHECK(cuLaunchKernel(env, 2, 1, 1, 32, 1, 1, 0, 0, ea, 0));
        CHECK(cuMemcpyDtoH(w, out, 20));
        printf("anchor coop grid_env cooperative=%s envreg1 %#x envreg2 %#x is_valid %u ws [%#x, %#x]\n",
               coop ? "true" : "false", w[0], w[1], w[2], w[3], w[4]);
    }

    /* grid_sum: the largest co-resident grid, then one of an SM each, then 7 blocks. */
    CUdeviceptr partial = out, total = out + (8 << 20), agree = out + (12 << 20);
    int grids[] = {gs_per_sm * sms, gs_per_sm * sms, sms, 7};
    double t[4];
    wrong = 0;
    for (int i = 0; i < 4; i++) {
        int g = grids[i];
        CHECK(cuMemsetD8(total, 0, 8));
        CHECK(cuMemsetD8(agree, 0, g * 4));
        void *ga[] = {&x, &n, &partial, &total, &agree};
        double t0 = now_us();
        CHECK(cuLaunchCooperativeKernel(gs, g, 1, 1, 256, 1, 1, 0, 0, ga));
        CHECK(cuCtxSynchronize());
        t[i] = now_us() - t0;
        unsigned long long got;
        CHECK(cuMemcpyDtoH(&got, total, 8));
        unsigned *ag = malloc(g * 4);
        CHECK(cuMemcpyDtoH(ag, agree, g * 4));
        int agreed = 0;
        for (int b = 0; b < g; b++) agreed += ag[b] == 1;
        free(ag);
        printf("anchor coop grid_sum grid %d: sum %llu want %llu, %d of %d blocks saw it\n", g,
               got, sum, agreed, g);
        wrong += got != sum || agreed != g;
    }
    check("coop_grid_sum_grid_sync", wrong, 4);
    report("coop_grid_sum_us", t, 4, "us");

    /* One block more than the GPU holds. */
    int g = gs_per_sm * sms + 1;
    void *ga[] = {&x, &n, &partial, &total, &agree};
    CUresult r = cuLaunchCooperativeKernel(gs, g, 1, 1, 256, 1, 1, 0, 0, ga);
    const char *name = "?";
    cuGetErrorName(r, &name);
    printf("anchor coop grid of %d: %s\n", g, name);
    check("coop_too_large_refused", r != CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, 1);
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    return wrong_total ? 1 : 0;
}
