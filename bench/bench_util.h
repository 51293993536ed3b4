/* bench_util.h - what the benchmarks share: a monotonic clock, medians, filled
   page-aligned buffers, the memcpy bound, the machine's load from other programs and
   the rank-function error check. */
#ifndef VS_BENCH_UTIL_H
#define VS_BENCH_UTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

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

/* "1.23 0.98 0.50" from /proc/loadavg: the machine is shared; say how busy it was. */
VS_BENCH_UNUSED static const char* loadavg(char* buf, size_t cap)
{
    FILE* f = fopen("/proc/loadavg", "r");
    double a = 0, b = 0, c = 0;
    int ok = f && fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3;
    if (f) fclose(f);
    if (ok)
        snprintf(buf, cap, "%.2f %.2f %.2f", a, b, c);
    else
        snprintf(buf, cap, "n/a");
    return buf;
}

/* How busy the machine was outside this program: the VM is shared, and another
   program on one of its two cores halves what the thread ranks get (they then take
   turns on the other core). snap_now() takes the machine's busy CPU time (/proc/stat:
   user, nice, system, irq, softirq and steal, the host's time on our vCPUs) and this
   process's own (getrusage); other_cores() is the CPU the rest took between two
   snapshots, in cores, given the CPU seconds the benchmark's processes used meanwhile.
   Jiffy resolution (10 ms): meaningful over parts of a second or more. */
typedef struct cpu_snap {
    double wall, busy, self; /* seconds; busy < 0: /proc/stat unreadable */
} cpu_snap;

VS_BENCH_UNUSED static cpu_snap snap_now(void)
{
    cpu_snap s;
    struct rusage ru;
    unsigned long long v[8] = {0};
    long hz = sysconf(_SC_CLK_TCK);
    FILE* f = fopen("/proc/stat", "r");
    int got = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                         &v[3], &v[4], &v[5], &v[6], &v[7])
                : 0;
    if (f) fclose(f);
    s.wall = now();
    /* v: user nice system idle iowait irq softirq steal */
    s.busy = got == 8 && hz > 0 ? (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)hz : -1;
    s.self = 0;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        s.self = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                 (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    return s;
}

/* Cores' worth of CPU used by other programs between a and b; `ours` = CPU seconds
   our processes used meanwhile (b.self - a.self for one process). -1 if unknown. */
VS_BENCH_UNUSED static double other_cores(cpu_snap a, cpu_snap b, double ours)
{
    double o, dt = b.wall - a.wall;
    if (a.busy < 0 || b.busy < 0 || dt <= 0) return -1;
    o = (b.busy - a.busy - ours) / dt;
    return o < 0 ? 0 : o;
}

/* Page-aligned, every page written with nonzero data now: no calloc'd zero pages
   (gcc -O2 turns malloc+memset(0) into calloc), no first-touch faults when timed. */
VS_BENCH_UNUSED static void* balloc(size_t bytes)
{
    void* p = NULL;
    size_t i, n = bytes / sizeof(float);
    float* f;
    if (posix_memalign(&p, 4096, bytes ? bytes : 1)) return NULL;
    f = (float*)p;
    for (i = 0; i < n; i++) f[i] = (float)(i & 1023) + 1.0f;
    return p;
}

/* Single-thread memcpy bandwidth on `bytes`-byte buffers (median of 7), GB/s;
   the physical bound the benches quote. -1 when out of memory. */
VS_BENCH_UNUSED static double memcpy_bw(size_t bytes)
{
    char* a = (char*)balloc(bytes);
    char* b = (char*)balloc(bytes);
    double t[7], bw;
    int k;
    if (!a || !b) {
        free(a);
        free(b);
        return -1;
    }
    memcpy(b, a, bytes); /* warm */
    for (k = 0; k < 7; k++) {
        double t0 = now();
        memcpy(k % 2 ? a : b, k % 2 ? b : a, bytes);
        t[k] = now() - t0;
    }
    bw = (double)bytes / median(t, 7) / 1e9;
    free(a);
    free(b);
    return bw;
}

/* In a rank function (reads its `w`, jumps to its `out:`): on error say so, abort
   the communicator (the world's before a submesh exists; peers blocked in it
   return at once instead of waiting for the timeout) and leave. */
#define THR_CHK(T, c, r, expr, what)                                                  \
    do {                                                                              \
        vs_result chk_ = (expr);                                                      \
        if (chk_ != VS_OK) {                                                          \
            if (chk_ != VS_ERR_ABORTED)                                               \
                fprintf(stderr, "bench: thread rank %d: %s: %s: %s\n", (r), (what),   \
                        vs_result_string(chk_), vs_last_error());                     \
            (T)->err[(r)] = chk_;                                                     \
            vs_comm_abort((c) ? (c) : vs_world_comm(w));                              \
            goto out;                                                                 \
        }                                                                             \
    } while (0)
#endif
