/*
 * What CUDA's side of rig's device figures shares (tests/h200/cuda_anchor.c,
 * cuda_compute_anchor.c, deps/cuda_deps.c): the error check, the clock, and the
 * median/p99 line in the form rig's probes print (`anchor NAME median X p99 Y UNIT
 * (n N)`, the p99 at the same index rig's `report` takes). Define ANCHOR as the
 * program's name before including it.
 */
#ifndef RIG_ANCHOR_H
#define RIG_ANCHOR_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(x)                                                             \
    do {                                                                     \
        CUresult r_ = (x);                                                   \
        if (r_ != CUDA_SUCCESS) {                                            \
            const char *s_ = "?";                                            \
            cuGetErrorName(r_, &s_);                                         \
            fprintf(stderr, "%s: %s failed: %s\n", ANCHOR, #x, s_);          \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts `v` and prints its median and p99. */
static void report(const char *name, double *v, int n, const char *unit) {
    qsort(v, n, sizeof *v, cmp_double);
    printf("anchor %s median %.3f p99 %.3f %s (n %d)\n", name, v[n / 2],
           v[(int)((n - 1) * 0.99 + 0.5)], unit, n);
}

/* The whole file at `path`, or exit. */
static void *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc(n);
    if (fread(b, 1, n, f) != (size_t)n) { perror(path); exit(1); }
    fclose(f);
    return b;
}

#endif
