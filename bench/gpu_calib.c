/* bench/gpu_calib.c - the stand-in's clock against a GPU (issue 35 §4): one
   fixed set of operations, timed on whatever runs it. Built with nvcc against
   CUDA and NCCL it measures a real GPU (CUDA events); built against the strict
   stand-in (tests/strict, -DVS_STRICT) the same source gets the stand-in's
   modelled times (its clock answers cudaEventElapsedTime, and the host's time
   is vs_strict_clock_host). tests/gpu/run.sh runs both and compares them.

     gpu_calib [--small] [--out FILE] [--no-step]
         runs the set on the current device and prints it (FILE: the raw rows,
         what --compare reads); --small: the test's shapes (make test)
     gpu_calib --compare MODELLED MEASURED [--spec-out FILE]
         per kernel class and per step: modelled, measured, measured /
         modelled; and the spec constants fitted from the measurement
         (FILE: a VS_STRICT_SPEC file of them)

   The set, at the bench GPT's shapes (bench/gpu_model.c: V 8,192, T 512,
   D 1,024, 16 heads, 32 rows: 16,384 tokens; bf16 weights, f32 activations):
   - examples/gpt_kernels.h's 16 kernels (matmul at four shapes and a square
     one), by class: GEMM, attention (forward, backward rows, backward),
     elementwise (embed, add_rows, gelu and its backward, scale), row
     reductions (layernorm's three, sum_rows, embed_bwd, cross-entropy, mean);
   - the library's own kernels (vescale_mesh.h's vs_mk_*: init, box, embed,
     cross-entropy, bias; vescale_ddp.h's vs_k_*: AdamW, casts, sum of squares);
   - launch: three kernels of almost no work (what a launch alone costs);
   - copies: host <-> device (pinned), within the device, a memset;
   - collectives: a one-rank NCCL all-reduce, small and large (one GPU says
     nothing about links: its floor only);
   - host: the host's time of one launch call (cudaLaunchKernel);
   - step: one steady step of the example GPT through vs_parallelize /
     vs_train_step on one GPU (bench/gpu_model.c's "1 GPU" row), the host's
     time of vs_train_step, the median of 3 after 2.
   Each operation is issued R times back to back behind a gate (a host
   function that holds the stream until the host has enqueued all R, so the
   GPU runs them without waiting for the host; on the stand-in the gate's
   virtual cost stands for that wait) between two events: its time is the
   events' interval / R. R: enough for ~20 ms, 3 to 100.

   Each kernel's flops, bytes and dtype are its declaration's
   (vs_kernel_cost_get): the same figures the stand-in prices. The fit
   (--compare) uses the rows the base spec prices clearly one way (arithmetic
   intensity a quarter below or four times above its balance):
     launch_us      the launch rows' median, less their bytes' time
     mem_gbps       the median over memory-bound kernel rows of bytes / (time - launch)
     <dt>_tflops    the median over compute-bound rows of that dtype of flops / (time - launch)
     host_gbps      the host <-> device copies: bytes / (time - launch)
     host_call_us   the host row
     nvlink_latency_us  the one-rank all-reduces' median (a floor, not a link)
   and keeps the base's other constants (NVLink and network bandwidths need two
   GPUs). Medians: a kernel that reaches a fraction of the bandwidth (a
   reduction over too few threads) is listed as one the fitted spec does not
   explain, the kernel's own cost, not the GPU's. The file is a VS_STRICT_SPEC file: the stand-in with it models this
   GPU running these kernels (not the datasheet's peak). */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#include "examples/gpt.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef VESCALE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif
#ifdef VS_STRICT
#include "tests/strict/vs_strict.h"
#include "tests/gpt_strict_kernels.h"
#endif

#if defined(__GNUC__) || defined(__clang__)
#define CAL_UNUSED __attribute__((unused))
#else
#define CAL_UNUSED
#endif
#define CAL_FN static CAL_UNUSED

/* ---- the rows: what a side ran, and how long each took --------------------------- */

enum { CL_GEMM, CL_ATTN, CL_ELEM, CL_RED, CL_LIB, CL_LAUNCH, CL_COPY, CL_COLL, CL_HOST, CL_N };
static const char* const cal_class_names[CL_N] = {"GEMM", "attention", "elementwise", "row reductions",
                                                  "library kernels", "launch", "copies", "collectives", "host call"};

#define CAL_MAXROWS 64
typedef struct cal_row {
    char name[48];
    int cls;
    double flops, bytes; /* the declaration's (kernels); bytes moved (copies, collectives) */
    int dtype;           /* vs_dtype of the arithmetic (kernels) */
    int reps;
    double s; /* seconds an operation */
} cal_row;

/* the stand-in spec's constants, as a side prints them (vs_strict_spec's order) */
enum { SP_BF16, SP_F16, SP_TF32, SP_F32, SP_MEM, SP_LAUNCH, SP_HOST, SP_NVLINK, SP_NET, SP_GPN, SP_NVLAT, SP_NETLAT,
       SP_HOSTCALL, SP_HOSTFACTOR, SP_KDEFAULT, SP_N };
static const char* const cal_spec_keys[SP_N] = {"bf16_tflops", "f16_tflops", "tf32_tflops", "f32_tflops", "mem_gbps",
                                                "launch_us", "host_gbps", "nvlink_gbps", "net_gbps", "gpus_per_node",
                                                "nvlink_latency_us", "net_latency_us", "host_call_us", "host_factor",
                                                "kernel_default_us"};
/* a key's unit: the struct's seconds / B/s / FLOP/s over the file's number */
static const double cal_spec_unit[SP_N] = {1e12, 1e12, 1e12, 1e12, 1e9, 1e-6, 1e9, 1e9, 1e9, 1, 1e-6, 1e-6, 1e-6, 1, 1e-6};

typedef struct cal_side {
    char side[16];   /* "measured" or "modelled" */
    char device[64]; /* the GPU's name, or the stand-in's spec */
    char spec_name[32];
    double spec[SP_N]; /* the stand-in's spec (modelled side), in its struct's units */
    int have_spec;
    cal_row r[CAL_MAXROWS];
    int n;
    double step;           /* seconds (0: not run) */
    double step_compute;   /* the stand-in's busy compute in the step (-1: not known) */
    double step_comm;      /* ... communication */
    int complete;          /* the "end" line was there */
} cal_side;

CAL_FN cal_row* cal_add(cal_side* S, const char* name, int cls)
{
    if (S->n == CAL_MAXROWS) return NULL;
    cal_row* r = &S->r[S->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->cls = cls;
    return r;
}

/* ---- the raw form (--out, --compare): tab-separated lines --------------------------- */

CAL_FN void cal_write(FILE* f, const cal_side* S, int complete)
{
    fprintf(f, "# bench/gpu_calib: one side of the comparison (--compare reads it)\n");
    fprintf(f, "side\t%s\ndevice\t%s\n", S->side, S->device);
    if (S->have_spec) {
        fprintf(f, "spec\t%s", S->spec_name);
        for (int i = 0; i < SP_N; i++) fprintf(f, "\t%.17g", S->spec[i]);
        fprintf(f, "\n");
    }
    for (int i = 0; i < S->n; i++) {
        const cal_row* r = &S->r[i];
        fprintf(f, "row\t%s\t%s\t%.17g\t%.17g\t%d\t%d\t%.17g\n", cal_class_names[r->cls], r->name, r->flops, r->bytes,
                r->dtype, r->reps, r->s);
    }
    if (S->step > 0) fprintf(f, "step\t%.17g\t%.17g\t%.17g\n", S->step, S->step_compute, S->step_comm);
    if (complete) fprintf(f, "end\n"); /* (without it --compare says the run did not finish) */
}

/* 0, or -1 with a message on stderr */
CAL_FN int cal_read(const char* path, cal_side* S)
{
    memset(S, 0, sizeof *S);
    FILE* f = fopen(path, "r");
    if (!f) return fprintf(stderr, "gpu_calib: %s: cannot open\n", path), -1;
    char line[1024];
    int ln = 0, bad = 0;
    while (!bad && fgets(line, sizeof line, f)) {
        ln++;
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0] || line[0] == '#') continue;
        char* tab = strchr(line, '\t');
        char* rest = tab ? tab + 1 : line + strlen(line);
        if (tab) *tab = 0;
        if (!strcmp(line, "side")) snprintf(S->side, sizeof S->side, "%s", rest);
        else if (!strcmp(line, "device")) snprintf(S->device, sizeof S->device, "%s", rest);
        else if (!strcmp(line, "end")) S->complete = 1;
        else if (!strcmp(line, "spec")) {
            char* p = strtok(rest, "\t");
            snprintf(S->spec_name, sizeof S->spec_name, "%s", p ? p : "");
            int i = 0;
            for (; i < SP_N && (p = strtok(NULL, "\t")); i++) S->spec[i] = strtod(p, NULL);
            S->have_spec = i == SP_N;
            bad = i != SP_N;
        } else if (!strcmp(line, "step")) {
            bad = sscanf(rest, "%lf\t%lf\t%lf", &S->step, &S->step_compute, &S->step_comm) != 3;
        } else if (!strcmp(line, "row") && S->n < CAL_MAXROWS) {
            char cls[32], name[48];
            cal_row* r = &S->r[S->n];
            memset(r, 0, sizeof *r);
            bad = sscanf(rest, "%31[^\t]\t%47[^\t]\t%lf\t%lf\t%d\t%d\t%lf", cls, name, &r->flops, &r->bytes, &r->dtype,
                         &r->reps, &r->s) != 7;
            r->cls = -1;
            for (int c = 0; c < CL_N; c++)
                if (!strcmp(cls, cal_class_names[c])) r->cls = c;
            bad |= r->cls < 0;
            snprintf(r->name, sizeof r->name, "%s", name);
            if (!bad) S->n++;
        } else {
            bad = 1;
        }
    }
    fclose(f);
    if (bad) return fprintf(stderr, "gpu_calib: %s:%d: not a line of gpu_calib's output\n", path, ln), -1;
    return 0;
}

/* ---- the comparison and the fit ---------------------------------------------------- */

typedef struct cal_fit {
    double spec[SP_N];  /* the base's constants with the fitted ones replaced */
    int fitted[SP_N];   /* rows the constant was fitted from (0: kept) */
    char name[32];
} cal_fit;

CAL_FN const cal_row* cal_find(const cal_side* S, const char* name)
{
    for (int i = 0; i < S->n; i++)
        if (!strcmp(S->r[i].name, name)) return &S->r[i];
    return NULL;
}

static int cal_dcmp(const void* x, const void* y)
{
    double a = *(const double*)x, b = *(const double*)y;
    return a < b ? -1 : a > b;
}
CAL_FN double cal_median(double* v, int n)
{
    if (n < 1) return 0;
    qsort(v, (size_t)n, sizeof v[0], cal_dcmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* the spec key of a kernel's dtype's peak */
static int cal_peak_key(int dtype) { return dtype == VS_BF16 ? SP_BF16 : dtype == VS_F16 ? SP_F16 : SP_F32; }

/* Fits the spec from the measured rows M, starting from base (the stand-in's
   spec, struct units); see the top comment. */
CAL_FN void cal_fit_spec(const double* base, const cal_side* M, cal_fit* F)
{
    memcpy(F->spec, base, sizeof F->spec);
    memset(F->fitted, 0, sizeof F->fitted);
    double v[CAL_MAXROWS];
    int k = 0;
    /* launch: first the launch rows alone, then less their bytes at the fitted bandwidth */
    for (int i = 0; i < M->n; i++)
        if (M->r[i].cls == CL_LAUNCH) v[k++] = M->r[i].s;
    double launch = k ? cal_median(v, k) : base[SP_LAUNCH];
    for (int pass = 0; pass < 2; pass++) {
        int nm = 0;
        for (int i = 0; i < M->n; i++) {
            const cal_row* r = &M->r[i];
            if (r->cls > CL_LIB || r->bytes <= 0) continue;
            double balance = base[cal_peak_key(r->dtype)] / base[SP_MEM];
            if (r->flops / r->bytes > balance / 4 || r->s <= launch) continue;
            v[nm++] = r->bytes / (r->s - launch);
        }
        if (nm) F->spec[SP_MEM] = cal_median(v, nm), F->fitted[SP_MEM] = nm;
        k = 0;
        for (int i = 0; i < M->n; i++)
            if (M->r[i].cls == CL_LAUNCH) v[k++] = M->r[i].s - M->r[i].bytes / F->spec[SP_MEM];
        if (k) launch = cal_median(v, k), F->fitted[SP_LAUNCH] = k;
    }
    F->spec[SP_LAUNCH] = launch;
    static const int dts[] = {VS_F32, VS_BF16, VS_F16};
    for (int d = 0; d < 3; d++) {
        int nc = 0, key = cal_peak_key(dts[d]);
        for (int i = 0; i < M->n; i++) {
            const cal_row* r = &M->r[i];
            if (r->cls > CL_LIB || r->dtype != dts[d] || r->bytes <= 0 || r->s <= launch) continue;
            if (r->flops / r->bytes < 4 * base[key] / base[SP_MEM]) continue;
            v[nc++] = r->flops / (r->s - launch);
        }
        if (nc) F->spec[key] = cal_median(v, nc), F->fitted[key] = nc;
    }
    double by = 0, t = 0;
    int nh = 0;
    k = 0;
    for (int i = 0; i < M->n; i++) {
        const cal_row* r = &M->r[i];
        if (r->cls == CL_COPY && (!strncmp(r->name, "H2D", 3) || !strncmp(r->name, "D2H", 3)) && r->s > launch)
            by += r->bytes, t += r->s - launch, nh++;
        if (r->cls == CL_COLL) v[k++] = r->s;
        if (r->cls == CL_HOST) F->spec[SP_HOSTCALL] = r->s, F->fitted[SP_HOSTCALL] = 1;
    }
    if (nh) F->spec[SP_HOST] = by / t, F->fitted[SP_HOST] = nh;
    if (k) F->spec[SP_NVLAT] = cal_median(v, k), F->fitted[SP_NVLAT] = k;
}

/* Row r's time by the stand-in's formulas (tests/strict/vs_strict_clock.h) under spec sp. */
CAL_FN double cal_model(const double* sp, const cal_row* r)
{
    if (r->cls <= CL_LAUNCH) {
        double tc = r->flops / sp[cal_peak_key(r->dtype)], tm = r->bytes / sp[SP_MEM];
        return (tc > tm ? tc : tm) + sp[SP_LAUNCH];
    }
    if (r->cls == CL_COPY) {
        double bw = !strncmp(r->name, "H2D", 3) || !strncmp(r->name, "D2H", 3) ? sp[SP_HOST]
                  : !strncmp(r->name, "D2D", 3)                                ? sp[SP_MEM] / 2
                                                                               : sp[SP_MEM];
        return sp[SP_LAUNCH] + r->bytes / bw;
    }
    return r->cls == CL_COLL ? sp[SP_NVLAT] : sp[SP_HOSTCALL];
}

/* The table: per class, per row, the step; then the fit (F, when base is known). */
CAL_FN void cal_compare(FILE* o, const cal_side* D, const cal_side* M, cal_fit* F)
{
    fprintf(o, "modelled: the stand-in (%s), measured: %s. Times are one operation's (ms), sums over a class's rows.\n\n",
            D->device, M->device);
    fprintf(o, "| class | rows | modelled ms | measured ms | measured / modelled |\n|---|---|---|---|---|\n");
    for (int c = 0; c < CL_N; c++) {
        double a = 0, b = 0;
        int n = 0;
        for (int i = 0; i < D->n; i++) {
            const cal_row* m = cal_find(M, D->r[i].name);
            if (D->r[i].cls != c || !m) continue;
            a += D->r[i].s, b += m->s, n++;
        }
        if (n) fprintf(o, "| %s | %d | %.4f | %.4f | %.3f |\n", cal_class_names[c], n, a * 1e3, b * 1e3, a > 0 ? b / a : 0);
        else fprintf(o, "| %s | 0 | - | - | - |\n", cal_class_names[c]);
    }
    if (D->step > 0 && M->step > 0)
        fprintf(o, "| step (the example GPT, 1 GPU) | 1 | %.4f | %.4f | %.3f |\n", D->step * 1e3, M->step * 1e3,
                M->step / D->step);
    else fprintf(o, "| step (the example GPT, 1 GPU) | 0 | - | - | - |\n");
    fprintf(o, "\n| row | class | GFLOP | MB | modelled us | measured us | measured / modelled | achieved GB/s | "
               "achieved TFLOP/s |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < D->n; i++) {
        const cal_row* d = &D->r[i];
        const cal_row* m = cal_find(M, d->name);
        if (!m) {
            fprintf(o, "| %s | %s | | | %.3f | (not measured) | | | |\n", d->name, cal_class_names[d->cls], d->s * 1e6);
            continue;
        }
        fprintf(o, "| %s | %s | %.4g | %.4g | %.3f | %.3f | %.3f | %.1f | %.3f |\n", d->name, cal_class_names[d->cls],
                d->flops * 1e-9, d->bytes * 1e-6, d->s * 1e6, m->s * 1e6, d->s > 0 ? m->s / d->s : 0,
                m->s > 0 ? m->bytes / m->s * 1e-9 : 0, m->s > 0 ? m->flops / m->s * 1e-12 : 0);
    }
    if (D->step_compute >= 0 && D->step > 0)
        fprintf(o, "\nthe modelled step: %.4f ms, of it compute busy %.4f ms, communication %.4f ms\n", D->step * 1e3,
                D->step_compute * 1e3, D->step_comm * 1e3);
    if (!F || !D->have_spec) return;
    cal_fit_spec(D->spec, M, F);
    snprintf(F->name, sizeof F->name, "%.20s-fit", D->spec_name);
    fprintf(o, "\nfitted from the measurement (the base: the stand-in's %s):\n\n| constant | base | fitted | rows |\n"
               "|---|---|---|---|\n", D->spec_name);
    for (int i = 0; i < SP_N; i++)
        if (F->fitted[i])
            fprintf(o, "| %s | %.4g | %.4g | %d |\n", cal_spec_keys[i], D->spec[i] / cal_spec_unit[i],
                    F->spec[i] / cal_spec_unit[i], F->fitted[i]);
    /* what one spec cannot explain: a kernel far from the fitted formulas is the kernel's own
       (its parallelism, its declared cost), not the GPU's */
    int k = 0;
    for (int i = 0; i < M->n; i++) {
        double t = cal_model(F->spec, &M->r[i]), q = t > 0 ? M->r[i].s / t : 0;
        if (q > 1.5 || q < 1 / 1.5)
            fprintf(o, "%s| %s | %.3f |\n", k++ ? "" : "\nrows the fitted spec does not explain (measured / the fitted "
                                                       "formulas outside [0.67, 1.5]):\n\n| row | ratio |\n|---|---|\n",
                    M->r[i].name, q);
    }
    if (!k) fprintf(o, "\nevery row within [0.67, 1.5] of the fitted formulas\n");
}

/* F as a VS_STRICT_SPEC file (every key: it needs no base). 0, or -1. */
CAL_FN int cal_write_spec(const char* path, const cal_fit* F, const cal_side* D, const cal_side* M)
{
    FILE* f = fopen(path, "w");
    if (!f) return fprintf(stderr, "gpu_calib: %s: cannot write\n", path), -1;
    fprintf(f, "# The strict stand-in's spec fitted to %s (bench/gpu_calib --compare, tests/gpu/run.sh),\n"
               "# from the stand-in's %s. Use: VS_STRICT_SPEC=<this file>. It models this GPU running vescale's\n"
               "# and the example's kernels as they are (not the datasheet's peaks); lines marked 'kept' were not\n"
               "# measured (two GPUs or more are needed for the links).\n",
            M->device, D->spec_name);
    fprintf(f, "name = %s\n", F->name);
    for (int i = 0; i < SP_N; i++) {
        double v = F->spec[i] / cal_spec_unit[i];
        if (i == SP_GPN) fprintf(f, "%s = %d # kept\n", cal_spec_keys[i], (int)(v + 0.5));
        else if (F->fitted[i]) fprintf(f, "%s = %.6g # fitted from %d rows (base %.6g)\n", cal_spec_keys[i], v, F->fitted[i],
                                       D->spec[i] / cal_spec_unit[i]);
        else fprintf(f, "%s = %.6g # kept\n", cal_spec_keys[i], v);
    }
    return fclose(f) ? -1 : 0;
}

/* ---- running the set ------------------------------------------------------------------ */

#ifdef VESCALE_NCCL

/* the shapes: the bench GPT's, or the test's */
typedef struct cal_shapes {
    gpt_config cfg;
    long long rows, sq, nopt, copy; /* rows a step; the square GEMM's side; optimizer elements; copy bytes */
} cal_shapes;
static const cal_shapes CAL_BENCH = {{8192, 512, 1024, 16, 8, 1234}, 32, 4096, 32ll << 20, 64ll << 20};
static const cal_shapes CAL_SMALL = {{256, 32, 64, 4, 2, 1234}, 4, 512, 1 << 16, 1 << 20};

#define CAL_GATE_S 20.0 /* the gate's deadline (the host enqueues R operations meanwhile) */
typedef struct cal_gate {
    int open, expired;
} cal_gate;

static double cal_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
/* the host's time: the wall clock, or the stand-in's host clock */
static double cal_host_now(void)
{
#ifdef VS_STRICT
    return vs_strict_clock_host();
#else
    return cal_wall();
#endif
}

static void CUDART_CB cal_gate_fn(void* p)
{
    cal_gate* g = (cal_gate*)p;
    double t0 = cal_wall();
    while (!__atomic_load_n(&g->open, __ATOMIC_ACQUIRE)) {
        if (cal_wall() - t0 > CAL_GATE_S) {
            __atomic_store_n(&g->expired, 1, __ATOMIC_RELEASE);
            return;
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

/* an operation of the set */
enum { OP_KERNEL, OP_H2D, OP_D2H, OP_D2D, OP_MEMSET, OP_ALLREDUCE, OP_HOSTCALL };
typedef union cal_arg {
    void* p;
    int i;
    long long l;
    unsigned long long u;
    float f;
    double d;
    char s[256];
} cal_arg;
typedef struct cal_op {
    int kind;
    const vs_kernel_decl* decl; /* OP_KERNEL, OP_HOSTCALL */
    const void* fn;
    long long blocks;
    int threads;
    cal_arg v[16];
    void* a[16];
    void *dst, *src; /* copies, the all-reduce */
    size_t bytes;
} cal_op;

typedef struct cal_run {
    cudaStream_t s;
    cudaEvent_t e0, e1;
    cal_gate gate;
    ncclComm_t nccl;
    int failed;
} cal_run;

/* A kernel launch: arguments by the declaration's letters (pointers as void*,
   'l' as long long, 'f' and 'd' as double, 's' a pointer to the struct). */
static void cal_kernel(cal_op* o, const vs_kernel_decl* d, const void* fn, long long blocks, int threads, ...)
{
    va_list ap;
    memset(o, 0, sizeof *o);
    o->kind = OP_KERNEL, o->decl = d, o->fn = fn, o->blocks = blocks < 1 ? 1 : blocks, o->threads = threads;
    va_start(ap, threads);
    for (int i = 0; d->args[i] && i < 16; i++) {
        switch (d->args[i]) {
        case 'w':
        case 'r': o->v[i].p = va_arg(ap, void*); break;
        case 'i': o->v[i].i = va_arg(ap, int); break;
        case 'l': o->v[i].l = va_arg(ap, long long); break;
        case 'u': o->v[i].u = va_arg(ap, unsigned long long); break;
        case 'f': o->v[i].f = (float)va_arg(ap, double); break;
        case 'd': o->v[i].d = va_arg(ap, double); break;
        default: memcpy(o->v[i].s, va_arg(ap, const void*), (size_t)d->struct_size); break;
        }
        o->a[i] = &o->v[i];
    }
    va_end(ap);
}

static int cal_issue(cal_run* R, const cal_op* o)
{
    dim3 grid, block;
    switch (o->kind) {
    case OP_KERNEL:
    case OP_HOSTCALL:
        grid.x = (unsigned)o->blocks, grid.y = grid.z = 1;
        block.x = (unsigned)o->threads, block.y = block.z = 1;
        return cudaLaunchKernel(o->fn, grid, block, (void**)o->a, 0, R->s) != cudaSuccess;
    case OP_H2D: return cudaMemcpyAsync(o->dst, o->src, o->bytes, cudaMemcpyHostToDevice, R->s) != cudaSuccess;
    case OP_D2H: return cudaMemcpyAsync(o->dst, o->src, o->bytes, cudaMemcpyDeviceToHost, R->s) != cudaSuccess;
    case OP_D2D: return cudaMemcpyAsync(o->dst, o->src, o->bytes, cudaMemcpyDeviceToDevice, R->s) != cudaSuccess;
    case OP_MEMSET: return cudaMemsetAsync(o->dst, 0, o->bytes, R->s) != cudaSuccess;
    default: return ncclAllReduce(o->dst, o->dst, o->bytes / 4, ncclFloat, ncclSum, R->nccl, R->s) != ncclSuccess;
    }
}

/* reps of o behind the gate: seconds an operation (the events' interval, or for
   OP_HOSTCALL the host's time of the calls), or -1 */
static double cal_time(cal_run* R, const cal_op* o, int reps)
{
    R->gate.open = 0, R->gate.expired = 0;
    if (cudaLaunchHostFunc(R->s, cal_gate_fn, &R->gate) != cudaSuccess) return -1;
    int bad = cudaEventRecord(R->e0, R->s) != cudaSuccess;
    double h0 = cal_host_now();
    for (int i = 0; i < reps && !bad; i++) bad = cal_issue(R, o);
    double h1 = cal_host_now();
    bad |= cudaEventRecord(R->e1, R->s) != cudaSuccess;
    __atomic_store_n(&R->gate.open, 1, __ATOMIC_RELEASE);
    bad |= cudaEventSynchronize(R->e1) != cudaSuccess;
    float ms = 0;
    bad |= cudaEventElapsedTime(&ms, R->e0, R->e1) != cudaSuccess;
    if (bad || __atomic_load_n(&R->gate.expired, __ATOMIC_ACQUIRE)) return -1;
    return o->kind == OP_HOSTCALL ? (h1 - h0) / reps : ms * 1e-3 / reps;
}

/* one row: once, once more timed (R's size), then R times */
static void cal_measure(cal_run* R, cal_side* S, const char* name, int cls, const cal_op* o)
{
    cal_row* r = cal_add(S, name, cls);
    if (!r) return;
    if (o->kind == OP_KERNEL || o->kind == OP_HOSTCALL) {
        vs_kernel_cost c;
        if (vs_kernel_cost_get(o->decl, (void**)o->a, &c) == VS_OK) r->flops = c.flops, r->bytes = c.bytes, r->dtype = (int)c.dtype;
    } else {
        r->bytes = (double)o->bytes;
    }
    /* once ungated first: a kernel's first launch may load its module (lazy loading), which
       must not wait behind the gate */
    if (cal_issue(R, o) || cudaStreamSynchronize(R->s) != cudaSuccess) {
        fprintf(stderr, "gpu_calib: %s failed (%s)\n", name, cudaGetErrorString(cudaGetLastError()));
        R->failed = 1, r->s = -1;
        return;
    }
    double t1 = cal_time(R, o, 1);
    int reps = o->kind == OP_HOSTCALL ? 100 : t1 > 0 ? (int)ceil(0.02 / t1) : 3;
    reps = reps < 3 ? 3 : reps > 100 ? 100 : reps;
    r->reps = reps, r->s = t1 < 0 ? -1 : cal_time(R, o, reps);
    if (r->s < 0) {
        fprintf(stderr, "gpu_calib: %s failed (%s)\n", name, cudaGetErrorString(cudaGetLastError()));
        R->failed = 1;
    }
}

#define LL(x) ((long long)(x))
#define NP ((void*)0)

/* every row but the step */
static int cal_kernels(const cal_shapes* sh, cal_side* S)
{
    cal_run R;
    memset(&R, 0, sizeof R);
    const gpt_config* g = &sh->cfg;
    long long V = g->vocab, T = g->seq, D = g->dim, H = g->heads, hd = D / H, B = sh->rows, n = B * T;
    long long wide = n * 4 * D > sh->sq * sh->sq ? n * 4 * D : sh->sq * sh->sq, att = B * H * T * T, lgn = n * V;
    long long wn = V * D > 4 * D * D ? V * D : 4 * D * D; /* (f32 elements) */
    if (wn < sh->sq * sh->sq) wn = sh->sq * sh->sq;
    if (cudaStreamCreateWithFlags(&R.s, cudaStreamNonBlocking) || cudaEventCreate(&R.e0) || cudaEventCreate(&R.e1))
        return fprintf(stderr, "gpu_calib: a stream or an event: %s\n", cudaGetErrorString(cudaGetLastError())), 1;
    /* device buffers (contents: zeros, ids and targets valid), pinned host memory */
    void *X0, *X1, *X2, *W, *W2, *P, *dS, *LG, *G, *small, *op[4], *part, *hbuf;
    int32_t *ids, *hids;
    size_t f4 = 4;
    void** bufs[] = {&X0, &X1, &X2, &W, &W2, &P, &dS, &LG, &G, &small, &op[0], &op[1], &op[2], &op[3], &part};
    size_t sizes[] = {wide * f4, wide * f4, wide * f4, wn * f4, wn * f4, att * f4, att * f4, lgn * f4, lgn * f4,
                      (size_t)(4 * n + 64) * f4, sh->nopt * f4, sh->nopt * f4, sh->nopt * f4, sh->nopt * f4, 1024};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (cudaMalloc(bufs[i], sizes[i]) != cudaSuccess || cudaMemsetAsync(*bufs[i], 0, sizes[i], R.s) != cudaSuccess)
            return fprintf(stderr, "gpu_calib: cudaMalloc of %zu bytes failed\n", sizes[i]), 1;
    }
    if (cudaMalloc((void**)&ids, (size_t)n * 4) || cudaMallocHost((void**)&hids, (size_t)n * 4) ||
        cudaMallocHost(&hbuf, (size_t)sh->copy))
        return fprintf(stderr, "gpu_calib: ids or pinned memory\n"), 1;
    for (long long i = 0; i < n; i++) hids[i] = (int32_t)(i * 7 % V);
    memset(hbuf, 0, (size_t)sh->copy);
    if (cudaMemcpyAsync(ids, hids, (size_t)n * 4, cudaMemcpyHostToDevice, R.s) || cudaStreamSynchronize(R.s))
        return fprintf(stderr, "gpu_calib: ids\n"), 1;
    float* mean = (float*)small;
    float *rstd = mean + n, *loss = mean + 2 * n, *num = mean + 3 * n, *mx = mean + 3 * n + 16;

    /* the kernels, compiled for this device (NVRTC: once; the stand-in runs them by their declarations) */
    gpt_kctx kc;
    void *mk[_VS_MK_N], *dk[_VS_KI_N];
    if (gpt_kctx_init(&kc, GPT_K_DEVICE, R.s) || vs_kernels_get(&_vs_mk_text, "gpu_calib", mk) ||
        vs_kernels_get(&_vs_ddp_text, "gpu_calib", dk))
        return fprintf(stderr, "gpu_calib: %s\n", vs_last_error()), 1;
    const vs_kernel_decl* gd = gpt_kernel_decls;
    const int F = GPT_KF32, BF = GPT_KBF16, KB = GPT_KBLOCK;
#define GB(x) (((x) + KB - 1) / KB)
#define GC(b) ((b) > 16384 ? 16384 : (b)) /* gpt_kernels.h's launches: at most 16,384 blocks (grid-strided) */
#define GK(ki) &gd[ki], (const void*)kc.k[ki]
    cal_op o;
    /* GEMM: the layer's (qkv, fc), the head's, a weight gradient (A transposed, accumulated), a square one */
    static const char* const mmn[] = {"gptk_mm qkv", "gptk_mm fc", "gptk_mm head", "gptk_mm fc weight grad", "gptk_mm square"};
    long long mmM[] = {n, n, n, 4 * D, sh->sq}, mmK[] = {D, D, D, n, sh->sq}, mmN[] = {3 * D, 4 * D, V, D, sh->sq};
    int mmt[] = {GPT_KMM_NN, GPT_KMM_NN, GPT_KMM_NT, GPT_KMM_TN, GPT_KMM_NN}, mmb[] = {0, 0, 0, 1, 0};
    for (int i = 0; i < 5; i++) {
        int tb = i == 3 ? F : BF; /* a weight gradient: two f32 activations */
        cal_kernel(&o, GK(GPT_KI_MM), GC((mmM[i] + 31) / 32 * ((mmN[i] + 31) / 32)), KB, i == 3 ? W : X1, F, X0, F,
                   i == 3 ? X2 : W, tb, i < 2 ? W2 : NP, BF, LL(mmM[i]), LL(mmK[i]), LL(mmN[i]), mmt[i], mmb[i]);
        if (i == 2) o.v[0].p = LG; /* the logits [n, V] */
        cal_measure(&R, S, mmn[i], CL_GEMM, &o);
    }
    /* attention (q, k, v, y: [n, D] slices of X0; dq, dk, dv of X1) */
    char* x0 = (char*)X0;
    char* x1 = (char*)X1;
    size_t nd4 = (size_t)(n * D) * 4;
    cal_kernel(&o, GK(GPT_KI_ATTN_FWD), GC(B * H * T), KB, P, x0 + 3 * nd4, F, x0, x0 + nd4, x0 + 2 * nd4, F, B, T, H, hd);
    cal_measure(&R, S, "gptk_attn_fwd", CL_ATTN, &o);
    cal_kernel(&o, GK(GPT_KI_ATTN_BWD_ROWS), GC(B * H * T), KB, dS, P, x0 + 3 * nd4, x0 + 2 * nd4, F, B, T, H, hd);
    cal_measure(&R, S, "gptk_attn_bwd_rows", CL_ATTN, &o);
    cal_kernel(&o, GK(GPT_KI_ATTN_BWD), GC(GB(B * T * H * hd)), KB, x1, x1 + nd4, x1 + 2 * nd4, F, dS, P, x0, x0 + nd4,
               x0 + 3 * nd4, F, B, T, H, hd);
    cal_measure(&R, S, "gptk_attn_bwd", CL_ATTN, &o);
    /* elementwise */
    cal_kernel(&o, GK(GPT_KI_EMBED), GC(GB(n * D)), KB, X0, F, W, W2, BF, ids, n, T, D, LL(0), V);
    cal_measure(&R, S, "gptk_embed", CL_ELEM, &o);
    cal_kernel(&o, GK(GPT_KI_ADD_ROWS), GC(GB(n * D)), KB, X0, F, X1, F, n, n, D, LL(0));
    cal_measure(&R, S, "gptk_add_rows residual", CL_ELEM, &o);
    cal_kernel(&o, GK(GPT_KI_GELU_FWD), GC(GB(4 * n * D)), KB, X1, F, X0, F, 4 * n * D);
    cal_measure(&R, S, "gptk_gelu_fwd", CL_ELEM, &o);
    cal_kernel(&o, GK(GPT_KI_GELU_BWD), GC(GB(4 * n * D)), KB, X2, F, X1, F, X0, F, 4 * n * D);
    cal_measure(&R, S, "gptk_gelu_bwd", CL_ELEM, &o);
    cal_kernel(&o, GK(GPT_KI_SCALE), GC(GB(lgn)), KB, G, F, LG, num, lgn, n);
    cal_measure(&R, S, "gptk_scale logits", CL_ELEM, &o);
    /* row reductions */
    cal_kernel(&o, GK(GPT_KI_LN_FWD), GC(n), KB, X1, F, mean, rstd, X0, F, W, W2, BF, n, D);
    cal_measure(&R, S, "gptk_ln_fwd", CL_RED, &o);
    cal_kernel(&o, GK(GPT_KI_LN_BWD), GC(n), KB, X2, F, X1, F, X0, F, W, BF, mean, rstd, n, D);
    cal_measure(&R, S, "gptk_ln_bwd", CL_RED, &o);
    cal_kernel(&o, GK(GPT_KI_LN_BWD_W), GC(GB(D)), KB, W, W2, F, X1, F, X0, F, mean, rstd, n, D);
    cal_measure(&R, S, "gptk_ln_bwd_w", CL_RED, &o);
    cal_kernel(&o, GK(GPT_KI_SUM_ROWS), GC(GB(D)), KB, W, F, X0, F, n, LL(1), D, LL(0));
    cal_measure(&R, S, "gptk_sum_rows bias", CL_RED, &o);
    long long nb = 65536 / D > V ? V : 65536 / D < 1 ? 1 : 65536 / D;
    cal_kernel(&o, GK(GPT_KI_EMBED_BWD), GC(GB(D * nb)), KB, W, F, X0, F, ids, n, D, LL(0), V, nb);
    cal_measure(&R, S, "gptk_embed_bwd", CL_RED, &o);
    cal_kernel(&o, GK(GPT_KI_CE), GC(n), KB, G, loss, LG, F, ids, n, V);
    cal_measure(&R, S, "gptk_ce", CL_RED, &o);
    cal_kernel(&o, GK(GPT_KI_MEAN), GC(1), KB, num, loss, n);
    cal_measure(&R, S, "gptk_mean", CL_RED, &o);
#undef GK
    /* the library's kernels: vescale_mesh.h's (one block a row for the row kernels), vescale_ddp.h's */
    const int MT = VS_MKT, DT = _VS_KTHREADS;
#define MB(w) ((w) > 65535 ? 65535 : (w))
#define MK(ki) &_vs_mk_decls[ki], (const void*)mk[ki]
#define DK(ki) &_vs_ddp_kdecls[ki], (const void*)dk[ki]
    _vs_mk_ibox ib;
    memset(&ib, 0, sizeof ib);
    ib.nd = 2, ib.ls[0] = ib.shape[0] = 4 * D, ib.ls[1] = ib.shape[1] = D;
    cal_kernel(&o, MK(_VS_MK_INIT), MB(GB(4 * D * D)), MT, W, (int)VS_BF16, 4 * D * D, &ib, 42ull, (int)VS_INIT_NORMAL,
               0.0, 0.02, 0.02);
    cal_measure(&R, S, "vs_mk_init normal bf16", CL_LIB, &o);
    int64_t full[2] = {n, D}, half[2] = {n, D / 2}, z[2] = {0, 0}, at[2] = {0, D / 2};
    _vs_mk_geo geo = _vs_mk_geometry(half, z, full, at, half, 2, 4);
    cal_kernel(&o, MK(_VS_MK_BOX), MB(GB(n * D / 2)), MT, X1, X0, n * (D / 2), &geo);
    cal_measure(&R, S, "vs_mk_box half columns", CL_LIB, &o);
    cal_kernel(&o, MK(_VS_MK_EMBED_FWD), MB(GB(n * D)), MT, X0, W, ids, n, D, LL(0), V);
    cal_measure(&R, S, "vs_mk_embed_fwd", CL_LIB, &o);
    cal_kernel(&o, MK(_VS_MK_CE_MAX), MB(n), MT, mx, LG, n, V);
    cal_measure(&R, S, "vs_mk_ce_max", CL_LIB, &o);
    cal_kernel(&o, MK(_VS_MK_CE_SUM), MB(n), MT, mean, loss, LG, mx, ids, n, V, LL(0));
    cal_measure(&R, S, "vs_mk_ce_sum", CL_LIB, &o);
    cal_kernel(&o, MK(_VS_MK_CE_GRAD), MB(GB(n * V)), MT, G, LG, mx, mean, ids, n, V, LL(0));
    cal_measure(&R, S, "vs_mk_ce_grad", CL_LIB, &o);
    cal_kernel(&o, MK(_VS_MK_BIAS_ADD), MB(GB(4 * n * D)), MT, X0, W, n, 4 * D, (int)VS_F32, (int)VS_BF16);
    cal_measure(&R, S, "vs_mk_bias_add", CL_LIB, &o);
    long long no = sh->nopt, db = no / DT + 1 > 8192 ? 8192 : no / DT + 1;
    cal_kernel(&o, DK(_VS_KI_ADAMW), db, DT, op[0], op[1], op[2], op[3], no, 0.9, 0.95, 0.1, 0.05, 3e-4, 1.0, 1e-8, 0.01);
    cal_measure(&R, S, "vs_k_adamw", CL_LIB, &o);
    cal_kernel(&o, DK(_VS_KI_TO_F32), db, DT, op[0], op[1], 1, no);
    cal_measure(&R, S, "vs_k_to_f32 from bf16", CL_LIB, &o);
    cal_kernel(&o, DK(_VS_KI_ADD_F32), db, DT, op[0], op[1], 0, no);
    cal_measure(&R, S, "vs_k_add_f32", CL_LIB, &o);
    cal_kernel(&o, DK(_VS_KI_SUMSQ), _VS_KPARTS, DT, op[1], no, part);
    cal_measure(&R, S, "vs_k_sumsq", CL_LIB, &o);
    /* launch: kernels of one element */
    cal_kernel(&o, DK(_VS_KI_SCALE), 1, DT, op[0], 0, LL(1), 1.0);
    cal_measure(&R, S, "launch: vs_k_scale 1 element", CL_LAUNCH, &o);
    cal_kernel(&o, &gd[GPT_KI_SCALE], (const void*)kc.k[GPT_KI_SCALE], 1, KB, X0, F, X1, num, LL(1), LL(1));
    cal_measure(&R, S, "launch: gptk_scale 1 element", CL_LAUNCH, &o);
    cal_kernel(&o, MK(_VS_MK_BIAS_ADD), 1, MT, X0, W, LL(1), LL(1), (int)VS_F32, (int)VS_F32);
    cal_measure(&R, S, "launch: vs_mk_bias_add 1 element", CL_LAUNCH, &o);
    /* the host's time of a launch call */
    cal_kernel(&o, DK(_VS_KI_SCALE), 1, DT, op[0], 0, LL(1), 1.0);
    o.kind = OP_HOSTCALL;
    cal_measure(&R, S, "host: cudaLaunchKernel", CL_HOST, &o);
#undef MK
#undef DK
#undef MB
#undef GB
#undef GC
    /* copies */
    memset(&o, 0, sizeof o);
    o.kind = OP_H2D, o.dst = X0, o.src = hbuf, o.bytes = (size_t)sh->copy;
    cal_measure(&R, S, "H2D pinned", CL_COPY, &o);
    o.kind = OP_D2H, o.dst = hbuf, o.src = X0;
    cal_measure(&R, S, "D2H pinned", CL_COPY, &o);
    o.kind = OP_H2D, o.dst = X0, o.src = hbuf, o.bytes = 4096;
    cal_measure(&R, S, "H2D pinned 4 KiB", CL_COPY, &o);
    o.kind = OP_D2D, o.dst = X1, o.src = X0, o.bytes = (size_t)(4 * n * D) * 4;
    cal_measure(&R, S, "D2D", CL_COPY, &o);
    o.kind = OP_MEMSET, o.dst = X2;
    cal_measure(&R, S, "memset", CL_COPY, &o);
    /* a one-rank all-reduce, in place */
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&R.nccl, 1, id, 0) != ncclSuccess) {
        fprintf(stderr, "gpu_calib: a one-rank NCCL communicator failed\n");
        R.failed = 1;
    } else {
        o.kind = OP_ALLREDUCE, o.dst = op[0], o.bytes = 4096;
        cal_measure(&R, S, "all-reduce 1 rank 4 KiB", CL_COLL, &o);
        o.bytes = (size_t)sh->nopt * 4;
        cal_measure(&R, S, "all-reduce 1 rank large", CL_COLL, &o);
        ncclCommDestroy(R.nccl);
    }
    cudaStreamSynchronize(R.s);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(*bufs[i]);
    cudaFree(ids), cudaFreeHost(hids), cudaFreeHost(hbuf);
    cudaEventDestroy(R.e0), cudaEventDestroy(R.e1), cudaStreamDestroy(R.s);
    return R.failed;
}

/* ---- the step: the example GPT through vs_parallelize on one GPU --------------------------- */

typedef struct cal_step {
    const cal_shapes* sh;
    double t[5];
    double compute, comm;
    int failed;
} cal_step;

static int cal_step_rank(vs_world* w, void* arg)
{
    cal_step* C = (cal_step*)arg;
    const gpt_config* g = &C->sh->cfg;
    (void)w;
    gpt_model_storage st;
    vs_model_desc model;
    int32_t *tok = NULL, *tgt = NULL;
    size_t bytes = sizeof(int32_t) * (size_t)C->sh->rows * (size_t)g->seq;
    if (gpt_model(g, &st, &model) || gpt_model_dtype(&st, VS_BF16) || cudaMallocHost((void**)&tok, bytes) ||
        cudaMallocHost((void**)&tgt, bytes))
        return 1;
    gpt_batch(g, 0, (int)C->sh->rows, tok, tgt);
    vs_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.pp = plan.dp = plan.tp = 1, plan.schedule = VS_PIPE_1F1B, plan.microbatches = 1;
    vs_train_desc d;
    memset(&d, 0, sizeof d);
    d.model = &model, d.plan = &plan;
    d.optim.kind = VS_OPTIM_ADAMW, d.optim.weight_decay = 0.01;
    d.lr.lr = 3e-4, d.clip = 1.0, d.grad_fp32 = 1;
    vs_train* t = NULL;
    vs_result r = vs_parallelize(w, &d, &t);
    vs_batch b = gpt_batch_view(C->sh->rows, g->seq, tok, tgt);
    for (int s = 0; s < 7 && !r; s++) {
#ifdef VS_STRICT
        if (s == 2) vs_strict_clock_reset(-1);
#endif
        double h0 = cal_host_now(), l = 0;
        r = vs_train_step(t, &b, &l);
        if (s >= 2) C->t[s - 2] = cal_host_now() - h0;
    }
#ifdef VS_STRICT
    int dev = 0;
    cudaGetDevice(&dev);
    vs_strict_clock_stats cs = vs_strict_clock_device(dev);
    C->compute = cs.compute / 5, C->comm = cs.comm / 5;
#endif
    if (r) fprintf(stderr, "gpu_calib: the step: %s\n", vs_last_error()), C->failed = 1;
    vs_train_free(t);
    cudaFreeHost(tok), cudaFreeHost(tgt);
    return r ? 1 : 0;
}

static int cal_run_step(const cal_shapes* sh, cal_side* S)
{
    cal_step C;
    memset(&C, 0, sizeof C);
    C.sh = sh, C.compute = C.comm = -1;
    vs_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.nranks = 1, ld.transport = VS_TRANSPORT_NCCL, ld.timeout_s = 600;
#ifdef VS_STRICT
    ld.log_level = VS_LOG_ERROR; /* cost-only reads back no gradient norm: every step warns that it skips */
#endif
    if (vs_launch_ex(&ld, cal_step_rank, &C) || C.failed) return 1;
    S->step = cal_median(C.t, 5), S->step_compute = C.compute, S->step_comm = C.comm;
    return 0;
}

/* The set on the current device into S (0, or 1 when something failed). */
CAL_FN int cal_run_all(const cal_shapes* sh, int step, cal_side* S)
{
    memset(S, 0, sizeof *S);
    S->step_compute = S->step_comm = -1;
#ifdef VS_STRICT
    vs_strict_spec sp = vs_strict_clock_spec();
    snprintf(S->side, sizeof S->side, "modelled");
    snprintf(S->device, sizeof S->device, "stand-in, spec %s", sp.name);
    snprintf(S->spec_name, sizeof S->spec_name, "%s", sp.name);
    double v[SP_N] = {sp.flops_bf16, sp.flops_f16, sp.flops_tf32, sp.flops_f32, sp.mem_bw, sp.launch_s, sp.host_bw,
                      sp.nvlink_bw, sp.net_bw, (double)sp.gpus_per_node, sp.nvlink_latency_s, sp.net_latency_s,
                      sp.host_call_s, sp.host_factor, sp.kernel_default_s};
    memcpy(S->spec, v, sizeof v), S->have_spec = 1;
    gpt_strict_register();
    vs_strict_clock_host_fn_cost(1.0); /* the gate: holds the stream while the host enqueues (a virtual second) */
#else
    struct cudaDeviceProp pr;
    snprintf(S->side, sizeof S->side, "measured");
    if (cudaGetDeviceProperties(&pr, 0) == cudaSuccess) snprintf(S->device, sizeof S->device, "%.63s", pr.name);
#endif
    int bad = cal_kernels(sh, S);
#ifdef VS_STRICT
    vs_strict_clock_host_fn_cost(-1);
#endif
    if (step) bad |= cal_run_step(sh, S);
    return bad;
}

/* the rows as a table for people */
CAL_FN void cal_print(FILE* o, const cal_side* S)
{
    fprintf(o, "%s on %s\n\n| row | class | reps | us | GB/s | TFLOP/s |\n|---|---|---|---|---|---|\n", S->side, S->device);
    for (int i = 0; i < S->n; i++) {
        const cal_row* r = &S->r[i];
        fprintf(o, "| %s | %s | %d | %.3f | %.1f | %.3f |\n", r->name, cal_class_names[r->cls], r->reps, r->s * 1e6,
                r->s > 0 ? r->bytes / r->s * 1e-9 : 0, r->s > 0 ? r->flops / r->s * 1e-12 : 0);
    }
    if (S->step > 0) fprintf(o, "| step (the example GPT, 1 GPU) | step | 5 | %.3f | | |\n", S->step * 1e6);
}
#endif /* VESCALE_NCCL */

#ifndef GPU_CALIB_NO_MAIN
int main(int argc, char** argv)
{
    const char *out = NULL, *spec_out = NULL, *cmp[2] = {NULL, NULL};
    int small = 0, step = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--small")) small = 1;
        else if (!strcmp(argv[i], "--no-step")) step = 0;
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--spec-out") && i + 1 < argc) spec_out = argv[++i];
        else if (!strcmp(argv[i], "--compare") && i + 2 < argc) cmp[0] = argv[i + 1], cmp[1] = argv[i + 2], i += 2;
        else return fprintf(stderr, "gpu_calib: unknown argument '%s' (see bench/gpu_calib.c)\n", argv[i]), 2;
    }
    if (cmp[0]) {
        cal_side D, M;
        if (cal_read(cmp[0], &D) || cal_read(cmp[1], &M)) return 1;
        if (!D.complete || !M.complete)
            fprintf(stderr, "gpu_calib: %s did not finish (no 'end' line): its rows only\n", !D.complete ? cmp[0] : cmp[1]);
        cal_fit F;
        cal_compare(stdout, &D, &M, &F);
        if (spec_out && !D.have_spec) return fprintf(stderr, "gpu_calib: %s has no spec line: no fit\n", cmp[0]), 1;
        if (spec_out && cal_write_spec(spec_out, &F, &D, &M)) return 1;
        if (spec_out) printf("\nwritten: %s (VS_STRICT_SPEC=%s runs the stand-in with it)\n", spec_out, spec_out);
        return D.complete && M.complete ? 0 : 1;
    }
#ifdef VESCALE_NCCL
#ifdef VS_STRICT
    setenv("VS_STRICT_COST_ONLY", "1", 0); /* timed, not run (before the stand-in's first call) */
#endif
    static cal_side S;
    int bad = cal_run_all(small ? &CAL_SMALL : &CAL_BENCH, step, &S);
    cal_print(stdout, &S);
    if (out) {
        FILE* f = fopen(out, "w");
        if (!f) return fprintf(stderr, "gpu_calib: %s: cannot write\n", out), 1;
        cal_write(f, &S, !bad);
        fclose(f);
    }
    return bad;
#else
    (void)small, (void)step, (void)out;
    fprintf(stderr, "gpu_calib: built without CUDA (VESCALE_NCCL): --compare only\n");
    return 2;
#endif
}
#endif
