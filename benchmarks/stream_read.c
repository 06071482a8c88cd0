/* A STREAM-style read kernel: every thread ORs its share of a buffer, best of N passes.
   Built by bench_bandwidth.py with: cc -O3 -march=native -fopenmp. Prints GB/s. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s BYTES PASSES\n", argv[0]);
        return 2;
    }
    size_t bytes = (size_t)atoll(argv[1]);
    int passes = atoi(argv[2]);
    size_t n = bytes / sizeof(uint64_t);
    uint64_t *a = aligned_alloc(4096, n * sizeof(uint64_t));
    if (!a) return 1;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = i;
    double best = 1e30;
    uint64_t sink = 0;
    for (int p = 0; p < passes; p++) {
        double t0 = now();
        uint64_t acc = 0;
#pragma omp parallel for reduction(| : acc) schedule(static)
        for (size_t i = 0; i < n; i++) acc |= a[i];
        double t = now() - t0;
        sink ^= acc;
        if (t < best) best = t;
    }
    printf("%.3f\n", (double)bytes / best / 1e9);
    fprintf(stderr, "checksum %llu\n", (unsigned long long)sink);
    free(a);
    return 0;
}
