/* device_layout_cases.h - the layout, TP and init runs that tests/test_device_layout.c
   (device path over a stand-in CUDA runtime) and tests/test_nccl.c (NCCL on a GPU)
   both make: each rank logs every output, copied to the host, and a device run's
   log must equal the host run's (bit for bit; entries marked DL_NEAR within 1e-6
   relative where NCCL's sums may round apart from the threads transport's).
   Written in the common subset of C and C++ (nvcc compiles it as CUDA C++).
   Include after vescale_mesh.h, vs_test.h and cuda_runtime.h; define
   DL_CHECK_DEVICE(p, bytes) to check a device allocation (may be empty). */
#ifndef DEVICE_LAYOUT_CASES_H
#define DEVICE_LAYOUT_CASES_H
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DL_MAXR 8
#define DL_EXACT 0
#define DL_NEAR 1
typedef struct {
    unsigned char* p;
    size_t n, cap;
} dl_log;
static dl_log dl_logs[2][DL_MAXR]; /* [run: 0 host, 1 device][rank] */
static int dl_all_exact; /* 1: DL_NEAR entries must match bit for bit too */

/* An entry: kind, dtype, length, then the bytes. */
static void dl_put(int dev, int rank, int kind, vs_dtype dt, const void* data, size_t bytes)
{
    dl_log* l = &dl_logs[dev][rank];
    if (l->n + bytes + 16 > l->cap) {
        l->cap = (l->n + bytes + 16) * 2;
        l->p = (unsigned char*)realloc(l->p, l->cap);
    }
    uint64_t head[2] = {(uint64_t)kind * 256 + (uint64_t)dt, (uint64_t)bytes};
    memcpy(l->p + l->n, head, 16);
    l->n += 16;
    if (bytes) {
        if (dev)
            VT_CHECK(cudaMemcpy(l->p + l->n, data, bytes, cudaMemcpyDefault) == cudaSuccess, "log copy");
        else
            memcpy(l->p + l->n, data, bytes);
    }
    l->n += bytes;
}
#define dl_log_out(dev, rank, data, bytes) dl_put((dev), (rank), DL_EXACT, VS_U8, (data), (bytes))

static void dl_reset(void)
{
    for (int m = 0; m < 2; m++)
        for (int r = 0; r < DL_MAXR; r++) dl_logs[m][r].n = 0;
}

static void dl_release(void)
{
    for (int m = 0; m < 2; m++)
        for (int r = 0; r < DL_MAXR; r++) {
            free(dl_logs[m][r].p);
            dl_logs[m][r].p = NULL;
            dl_logs[m][r].n = dl_logs[m][r].cap = 0;
        }
}

/* Every rank's device log against its host log. */
static void dl_compare(int nranks)
{
    for (int r = 0; r < nranks; r++) {
        dl_log *h = &dl_logs[0][r], *d = &dl_logs[1][r];
        VT_CHECK(h->n > 0, "rank %d logged nothing", r);
        VT_CHECK(h->n == d->n, "rank %d: the device run logged %zu bytes, the host run %zu", r, d->n, h->n);
        size_t at = 0;
        int entry = 0;
        while (at + 16 <= h->n && at + 16 <= d->n) {
            uint64_t hh[2], dh[2];
            memcpy(hh, h->p + at, 16);
            memcpy(dh, d->p + at, 16);
            if (hh[0] != dh[0] || hh[1] != dh[1]) {
                VT_CHECK(0, "rank %d: output %d: the runs logged different things", r, entry);
                break;
            }
            at += 16;
            size_t nb = (size_t)hh[1];
            if (at + nb > h->n) break;
            const unsigned char *a = h->p + at, *b = d->p + at;
            if (hh[0] / 256 == DL_NEAR && !dl_all_exact) { /* f32 */
                double worst = 0;
                for (size_t i = 0; i + 4 <= nb; i += 4) {
                    float x, y;
                    memcpy(&x, a + i, 4);
                    memcpy(&y, b + i, 4);
                    double e = fabs((double)x - (double)y) / (fabs((double)x) > 1 ? fabs((double)x) : 1.0);
                    worst = e > worst ? e : worst;
                }
                VT_CHECK(worst <= 1e-6, "rank %d: output %d differs by %.3g (relative)", r, entry, worst);
            } else {
                size_t k = 0;
                while (k < nb && a[k] == b[k]) k++;
                VT_CHECK(k == nb, "rank %d: output %d (%zu bytes): the device run differs at byte %zu", r, entry, nb,
                         k);
            }
            at += nb;
            entry++;
        }
    }
}

/* A buffer of the run's kind: device memory (through the world's hook) or host. */
static void* dl_new(vs_world* w, int dev, size_t bytes)
{
    void* p = dev ? vs_device_alloc(w, bytes ? bytes : 1) : malloc(bytes ? bytes : 1);
    VT_CHECK(p != NULL, "alloc");
    if (dev && p) DL_CHECK_DEVICE(p, bytes);
    return p;
}
static void dl_free(vs_world* w, int dev, void* p)
{
    if (dev) {
        /* the calls that used p returned when enqueued (>>tp, >>layout-device): their
           work is done in stream order on the caller's stream, waited for here, so
           no cudaFree runs beside a collective waiting for its peers */
        VT_CHECK(cudaStreamSynchronize(0) == cudaSuccess, "cudaStreamSynchronize");
        vs_device_free(w, p);
    } else {
        free(p);
    }
}
static void dl_upload(int dev, void* dst, const void* src, size_t bytes)
{
    if (!bytes) return;
    if (dev)
        VT_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) == cudaSuccess, "upload");
    else
        memcpy(dst, src, bytes);
}

/* small integers: exact in every dtype, sums of a few too */
static double val(uint64_t g, int salt) { return (double)((int64_t)((g * 7 + (uint64_t)salt * 13) % 23) - 11); }

static void put_val(vs_dtype dt, void* p, int64_t i, double v)
{
    switch (dt) {
    case VS_F32: ((float*)p)[i] = (float)v; break;
    case VS_BF16: ((uint16_t*)p)[i] = vs_f32_to_bf16((float)v); break;
    default: ((int32_t*)p)[i] = (int32_t)v; break;
    }
}

static const char* const pairs2d[][2] = {
    {"[S(0), R]", "[R, R]"},          {"[R, S(1)]", "[S(1), R]"},       {"[S(0), S(1)]", "[S(1), S(0)]"},
    {"[P, S(2)]", "[S(1), R]"},       {"[P, P]", "[S(0), S(0)]"},       {"[S(2), R]", "[S(0), S(2)]"},
    {"[R, R]", "[P, S(1)]"},          {"[S(1), S(1)]", "[R, S(0)]"},    {"[S(0), R]", "[S(0), R]"},
    {"[P(max), R]", "[R, S(2)]"},     {"[S(2), S(2)]", "[S(1), S(0)]"}, {"[P, S(1)]", "[S(2), S(1)]"},
};
static const char* const pairs1d[][2] = {
    {"[S(0)]", "[S(1)]"}, {"[P]", "[S(1)]"}, {"[S(1)]", "[R]"}, {"[R]", "[S(2)]"},
    {"[P]", "[R]"},       {"[S(2)]", "[S(0)]"}, {"[P]", "[S(2)]"}, {"[S(1)]", "[S(2)]"},
};

static int dl_run_redistribute(vs_world* w, int dev, const int* mshape, int mnd, const char* const (*pairs)[2], int np)
{
    int me = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    for (int k = 0; k < mnd; k++) md.shape[k] = mshape[k];
    VT_OK(vs_mesh_init(w, &md, &mesh));
    if (!mesh) return 1;
    const vs_dtype dts[] = {VS_F32, VS_BF16, VS_I32};
    const int64_t shapes[][3] = {{5, 6, 3}, {4, 4, 2}, {7, 1, 5}};
    for (int s = 0; s < 3; s++)
        for (int di = 0; di < 3; di++)
            for (int p = 0; p < np; p++) {
                vs_dtype dt = dts[di];
                vs_dtensor a, b;
                memset(&a, 0, sizeof a);
                a.dtype = dt;
                a.ndim = 3;
                memcpy(a.shape, shapes[s], sizeof a.shape[0] * 3);
                b = a;
                VT_OK(vs_layout_parse(mesh, pairs[p][0], &a.layout));
                VT_OK(vs_layout_parse(mesh, pairs[p][1], &b.layout));
                int64_t na = 0, nb = 0, ls[3], off[3];
                VT_OK(vs_dtensor_local_numel(&a, &na));
                VT_OK(vs_dtensor_local_numel(&b, &nb));
                VT_OK(vs_layout_local(&a.layout, 3, a.shape, vs_mesh_rank(mesh), ls, off));
                size_t esz = vs_dtype_size(dt);
                unsigned char* h = (unsigned char*)malloc((size_t)na * esz + 1);
                int64_t i = 0;
                for (int64_t x = 0; x < ls[0]; x++)
                    for (int64_t y = 0; y < ls[1]; y++)
                        for (int64_t z = 0; z < ls[2]; z++, i++) {
                            uint64_t g = (uint64_t)(((off[0] + x) * a.shape[1] + off[1] + y) * a.shape[2] + off[2] + z);
                            put_val(dt, h, i, val(g, me)); /* Partial: rank-dependent parts */
                        }
                a.data = dl_new(w, dev, (size_t)na * esz);
                b.data = dl_new(w, dev, (size_t)nb * esz);
                dl_upload(dev, a.data, h, (size_t)na * esz);
                vs_result r = vs_redistribute(&a, &b);
                VT_CHECK(r == VS_OK, "redistribute %s -> %s %s: %s", pairs[p][0], pairs[p][1], vs_dtype_name(dt),
                         vs_last_error());
                dl_log_out(dev, me, b.data, (size_t)nb * esz);
                /* the source is left as it was */
                dl_log_out(dev, me, a.data, (size_t)na * esz);
                dl_free(w, dev, a.data);
                dl_free(w, dev, b.data);
                free(h);
            }
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

/* A vocab call given an id out of range returned r. Host buffers: r is the
   error. Device buffers (>>tp): the call returns when enqueued (VS_OK); after a
   host sync (the check is complete) the mesh's next vocab call (here one of no
   tokens) fails naming the call (`fn`, "the previous call"), the id and its
   position; that result is returned. */
static vs_result dl_bad_id(int dev, vs_mesh* tp, vs_result r, const char* fn)
{
    if (!dev) return r;
    VT_CHECK(r == VS_OK, "%s, a bad id on the device: %d %s (want VS_OK: reported by the next call)", fn, r,
             vs_last_error());
    VT_CHECK(cudaStreamSynchronize(0) == cudaSuccess, "cudaStreamSynchronize");
    r = vs_vocab_embedding_backward(tp, NULL, NULL, 0, 1, 0, NULL);
    VT_CHECK(strstr(vs_last_error(), fn) && strstr(vs_last_error(), "(the previous call on this mesh)"),
             "the report names %s, the previous call: %s", fn, vs_last_error());
    return r;
}

/* embedding forward and backward, cross-entropy with and without the gradient */
static int dl_rank_vocab(vs_world* w, void* arg)
{
    int dev = *(int*)arg, me = vs_world_rank(w);
    vs_mesh* tp = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = vs_world_size(w);
    md.dim_names[0] = "TP";
    VT_OK(vs_mesh_init(w, &md, &tp));
    if (!tp) return 1;
    const int64_t vocabs[] = {37, 3, 300}; /* uneven; ranks without rows; > 256 columns a rank */
    int last_bad = 0; /* a bad id left for vs_mesh_free to report (device) */
    for (int vi = 0; vi < 3; vi++) {
        int64_t V = vocabs[vi], D = 5, n = 13, start = 0, rows = 0;
        VT_OK(vs_vocab_range(tp, V, &start, &rows));
        int32_t ids[13];
        for (int i = 0; i < n; i++) ids[i] = (int32_t)((i * 11 + 3) % V);
        ids[n - 1] = ids[1]; /* a repeat */
        float* table = (float*)malloc(sizeof(float) * (size_t)(rows * D) + 4);
        for (int64_t i = 0; i < rows * D; i++) table[i] = (float)(0.25 * val((uint64_t)(start * D + i), 1));
        float* go = (float*)malloc(sizeof(float) * (size_t)(n * D));
        for (int64_t i = 0; i < n * D; i++) go[i] = (float)(0.1 * val((uint64_t)i, 2)) + 0.01f * (float)i;
        float* lg = (float*)malloc(sizeof(float) * (size_t)(n * rows) + 4);
        for (int64_t t = 0; t < n; t++)
            for (int64_t j = 0; j < rows; j++)
                lg[t * rows + j] = (float)(0.37 * val((uint64_t)(t * V + start + j), 3) + 0.001 * (double)(start + j));

        void* dids = dl_new(w, dev, sizeof ids);
        void* dtab = dl_new(w, dev, sizeof(float) * (size_t)(rows * D));
        void* dout = dl_new(w, dev, sizeof(float) * (size_t)(n * D));
        void* dgo = dl_new(w, dev, sizeof(float) * (size_t)(n * D));
        void* dlg = dl_new(w, dev, sizeof(float) * (size_t)(n * rows));
        void* dloss = dl_new(w, dev, sizeof(float) * (size_t)n);
        void* dgrad = dl_new(w, dev, sizeof(float) * (size_t)(n * rows));
        dl_upload(dev, dids, ids, sizeof ids);
        dl_upload(dev, dtab, table, sizeof(float) * (size_t)(rows * D));
        dl_upload(dev, dgo, go, sizeof(float) * (size_t)(n * D));
        dl_upload(dev, dlg, lg, sizeof(float) * (size_t)(n * rows));

        VT_OK(vs_vocab_embedding_forward(tp, rows ? (const float*)dtab : NULL, V, D, (const int32_t*)dids, n,
                                         (float*)dout));
        dl_log_out(dev, me, dout, sizeof(float) * (size_t)(n * D));
        VT_OK(vs_vocab_embedding_backward(tp, (const float*)dgo, (const int32_t*)dids, n, V, D,
                                          rows ? (float*)dtab : NULL));
        dl_log_out(dev, me, dtab, sizeof(float) * (size_t)(rows * D));
        VT_OK(vs_vocab_cross_entropy(tp, rows ? (const float*)dlg : NULL, n, V, (const int32_t*)dids, (float*)dloss,
                                     rows ? (float*)dgrad : NULL));
        dl_put(dev, me, DL_NEAR, VS_F32, dloss, sizeof(float) * (size_t)n);
        dl_put(dev, me, DL_NEAR, VS_F32, dgrad, sizeof(float) * (size_t)(n * rows));
        VT_OK(vs_vocab_cross_entropy(tp, rows ? (const float*)dlg : NULL, n, V, (const int32_t*)dids, (float*)dloss,
                                     NULL));
        dl_put(dev, me, DL_NEAR, VS_F32, dloss, sizeof(float) * (size_t)n);
        /* a bad id is caught on the device path too, naming it and its position;
           there (>>tp: the call returns when enqueued, S2-3: no copy of the ids
           to the host) the mesh's next vocab call reports it once the check is
           complete, here after a host sync: dl_bad_id */
        int32_t bad[13];
        memcpy(bad, ids, sizeof bad);
        bad[5] = (int32_t)V;
        dl_upload(dev, dids, bad, sizeof bad);
        vs_result r = vs_vocab_embedding_forward(tp, rows ? (const float*)dtab : NULL, V, D, (const int32_t*)dids, n,
                                                 (float*)dout);
        r = dl_bad_id(dev, tp, r, "vs_vocab_embedding_forward");
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "position 5"), "bad id: %d %s", r, vs_last_error());
        /* the first of two bad ids is named, by every function, on every rank
           (rows or not); on the device after the kernels ran, so a good call
           afterwards works */
        bad[9] = -1;
        dl_upload(dev, dids, bad, sizeof bad);
        r = vs_vocab_embedding_backward(tp, (const float*)dgo, (const int32_t*)dids, n, V, D, rows ? (float*)dtab : NULL);
        r = dl_bad_id(dev, tp, r, "vs_vocab_embedding_backward");
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "position 5"), "bad ids, backward: %d %s", r,
                 vs_last_error());
        memcpy(bad, ids, sizeof bad);
        bad[12] = -7;
        dl_upload(dev, dids, bad, sizeof bad);
        r = vs_vocab_cross_entropy(tp, rows ? (const float*)dlg : NULL, n, V, (const int32_t*)dids, (float*)dloss, NULL);
        r = dl_bad_id(dev, tp, r, "vs_vocab_cross_entropy");
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), "id -7 at position 12"), "bad target: %d %s", r,
                 vs_last_error());
        dl_upload(dev, dids, ids, sizeof ids);
        VT_OK(vs_vocab_cross_entropy(tp, rows ? (const float*)dlg : NULL, n, V, (const int32_t*)dids, (float*)dloss, NULL));
        if (vi == 2) { /* a bad id in the mesh's last vocab call: on the device, vs_mesh_free reports it */
            memcpy(bad, ids, sizeof bad);
            bad[3] = (int32_t)(V + 9);
            dl_upload(dev, dids, bad, sizeof bad);
            r = vs_vocab_embedding_forward(tp, rows ? (const float*)dtab : NULL, V, D, (const int32_t*)dids, n,
                                           (float*)dout);
            VT_CHECK(dev ? r == VS_OK : r == VS_ERR_INVALID && strstr(vs_last_error(), "id 309 at position 3"),
                     "bad id, last call: %d %s", r, vs_last_error());
            last_bad = dev;
        }
        void* bufs[] = {dids, dtab, dout, dgo, dlg, dloss, dgrad};
        for (int i = 0; i < 7; i++) dl_free(w, dev, bufs[i]);
        free(table), free(go), free(lg);
    }
    vs_result fr = vs_mesh_free(tp);
    if (last_bad)
        VT_CHECK(fr == VS_ERR_INVALID && strstr(vs_last_error(), "vs_mesh_free: vs_vocab_embedding_forward (the previous "
                                                                 "call on this mesh): id 309 at position 3 out of range"),
                 "vs_mesh_free after a bad id on the device: %d %s", fr, vs_last_error());
    else
        VT_OK(fr);
    return 0;
}

/* A float of dtype dt (f32, f64, f16, bf16) at p[i]. */
static void dl_put_f(vs_dtype dt, void* p, int64_t i, double v)
{
    switch (dt) {
    case VS_F64: ((double*)p)[i] = v; break;
    case VS_F16: ((uint16_t*)p)[i] = vs_f32_to_f16((float)v); break;
    case VS_BF16: ((uint16_t*)p)[i] = vs_f32_to_bf16((float)v); break;
    default: ((float*)p)[i] = (float)v; break;
    }
}
static double dl_get_f(vs_dtype dt, const void* p, int64_t i)
{
    switch (dt) {
    case VS_F64: return ((const double*)p)[i];
    case VS_F16: return vs_f16_to_f32(((const uint16_t*)p)[i]);
    case VS_BF16: return vs_bf16_to_f32(((const uint16_t*)p)[i]);
    default: return ((const float*)p)[i];
    }
}

/* vs_tp_reduce_forward_bias (the row-parallel output's TP sum, its bias added
   once after it): y f32, f64, f16 and bf16 with a bias of y's dtype, f16 and bf16
   with an f32 bias; rows x cols with cols > 256. Every rank's y is checked
   against the sum of the ranks' parts (small integers: exact in every dtype and
   transport) plus the bias, rounded as the kernel does (f64: a double add; else
   an f32 add rounded once to y's dtype), and logged. */
static int dl_rank_bias(vs_world* w, void* arg)
{
    int dev = *(int*)arg, me = vs_world_rank(w), n = vs_world_size(w);
    vs_mesh* tp = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = n;
    md.dim_names[0] = "TP";
    VT_OK(vs_mesh_init(w, &md, &tp));
    if (!tp) return 1;
    const vs_dtype ydt[] = {VS_F32, VS_F64, VS_F16, VS_BF16, VS_F16, VS_BF16};
    const vs_dtype bdt[] = {VS_F32, VS_F64, VS_F16, VS_BF16, VS_F32, VS_F32};
    const int64_t rows = 7, cols = 300;
    for (int c = 0; c < 6; c++) {
        size_t ye = vs_dtype_size(ydt[c]), be = vs_dtype_size(bdt[c]);
        unsigned char* hy = (unsigned char*)malloc((size_t)(rows * cols) * ye);
        unsigned char* hb = (unsigned char*)malloc((size_t)cols * be);
        unsigned char* got = (unsigned char*)malloc((size_t)(rows * cols) * ye);
        for (int64_t i = 0; i < rows * cols; i++) dl_put_f(ydt[c], hy, i, val((uint64_t)i, me));
        for (int64_t j = 0; j < cols; j++) dl_put_f(bdt[c], hb, j, 0.1 * val((uint64_t)j, 5) + 0.03);
        void* y = dl_new(w, dev, (size_t)(rows * cols) * ye);
        void* b = dl_new(w, dev, (size_t)cols * be);
        dl_upload(dev, y, hy, (size_t)(rows * cols) * ye);
        dl_upload(dev, b, hb, (size_t)cols * be);
        VT_OK(vs_tp_reduce_forward_bias(tp, y, rows, cols, ydt[c], b, bdt[c]));
        if (dev)
            VT_CHECK(cudaStreamSynchronize(0) == cudaSuccess && cudaMemcpy(got, y, (size_t)(rows * cols) * ye,
                                                                          cudaMemcpyDefault) == cudaSuccess,
                     "copy y back");
        else
            memcpy(got, y, (size_t)(rows * cols) * ye);
        int64_t bad = -1;
        double want = 0;
        for (int64_t i = 0; i < rows * cols && bad < 0; i++) {
            double sum = 0, bv = dl_get_f(bdt[c], hb, i % cols);
            for (int r = 0; r < n; r++) sum += val((uint64_t)i, r);
            want = ydt[c] == VS_F64 ? sum + bv : (double)(float)(sum + bv); /* (float + float: exact in double) */
            if (ydt[c] == VS_F16 || ydt[c] == VS_BF16) { /* rounded once more, to y's dtype */
                uint16_t h[1];
                dl_put_f(ydt[c], h, 0, want);
                want = dl_get_f(ydt[c], h, 0);
            }
            if (dl_get_f(ydt[c], got, i) != want) bad = i;
        }
        VT_CHECK(bad < 0, "rank %d, %s y, %s bias: y[%lld] = %.9g, want %.9g", me, vs_dtype_name(ydt[c]),
                 vs_dtype_name(bdt[c]), (long long)bad, bad < 0 ? 0.0 : dl_get_f(ydt[c], got, bad), want);
        dl_log_out(dev, me, y, (size_t)(rows * cols) * ye);
        dl_free(w, dev, y);
        dl_free(w, dev, b);
        free(hy), free(hb), free(got);
    }
    VT_OK(vs_mesh_free(tp));
    return 0;
}

/* vs_init_fill: every kind, on shards of a 2x2 mesh, every dtype it takes */
static int dl_rank_init(vs_world* w, void* arg)
{
    int dev = *(int*)arg, me = vs_world_rank(w);
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = 2, md.shape[1] = vs_world_size(w) / 2 ? vs_world_size(w) / 2 : 1;
    md.shape[0] = vs_world_size(w) / md.shape[1];
    VT_OK(vs_mesh_init(w, &md, &mesh));
    if (!mesh) return 1;
    const vs_dtype fl[] = {VS_F32, VS_F16, VS_BF16, VS_F64}, in[] = {VS_I32, VS_I64, VS_U8};
    const char* lays[] = {"[S(0), S(1)]", "[R, S(0)]", "[S(1), R]"};
    for (int kind = VS_INIT_ZEROS; kind <= VS_INIT_SCALED_NORMAL; kind++)
        for (int di = 0; di < 7; di++) {
            vs_dtype dt = di < 4 ? fl[di] : in[di - 4];
            if (kind >= VS_INIT_UNIFORM && di >= 4) continue;
            for (int li = 0; li < 3; li++) {
                vs_dtensor t;
                memset(&t, 0, sizeof t);
                t.dtype = dt;
                t.ndim = 2;
                t.shape[0] = 67, t.shape[1] = 45;
                VT_OK(vs_layout_parse(mesh, lays[li], &t.layout));
                int64_t n = 0;
                VT_OK(vs_dtensor_local_numel(&t, &n));
                size_t bytes = (size_t)n * vs_dtype_size(dt);
                t.data = dl_new(w, dev, bytes);
                vs_init_desc d;
                memset(&d, 0, sizeof d);
                d.kind = (vs_init_kind)kind;
                d.seed = 1234 + (uint64_t)kind;
                d.name = "layers.0.w";
                d.a = kind == VS_INIT_UNIFORM ? -0.5 : kind == VS_INIT_CONSTANT ? 3.0 : 0.1;
                d.b = kind == VS_INIT_UNIFORM ? 0.5 : 0.02;
                d.num_layers = 12;
                VT_OK(vs_init_fill(&t, &d));
                dl_log_out(dev, me, t.data, bytes);
                dl_free(w, dev, t.data);
            }
        }
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

#endif
