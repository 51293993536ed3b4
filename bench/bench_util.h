/* bench_util.h - what the benchmarks share: a monotonic clock and medians. */
#ifndef VS_BENCH_UTIL_H
#define VS_BENCH_UTIL_H
#include <stdlib.h>
#include <time.h>

#if defined(__GNUC__) || defined(__clang__)
#define VS_BENCH_UNUSED __attribute__((unused))
#else
#define VS_BENCH_UNUSED
#endif

VS_BENCH_UNUSED static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

VS_BENCH_UNUSED static int cmp_double(const void* a, const void* b)
{
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorts v). */
VS_BENCH_UNUSED static double median(double* v, int n)
{
    if (n <= 0) return -1;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
#endif
