/* vescale-ckpt - look into vescale checkpoints (vescale_ckpt.h's format) with
   only the index and safetensors code of the header and pread.

   vescale-ckpt ls <ckpt>                       entries: kind, dtype, global shape,
                                                layout at save time, bytes, pieces
   vescale-ckpt verify <ckpt> [-j N]            every file's size and safetensors
                                                header, every CRC32C block (N threads)
   vescale-ckpt export <ckpt> <out.safetensors> one safetensors file of the full
                                                tensors (blobs as U8), CRCs checked
   vescale-ckpt diff <a> <b> [--atol A] [--rtol R]
                                                entry by entry: missing, kind/dtype/
                                                shape, how many elements differ by more
                                                than A + R |b| (default 0: any bit) and
                                                the largest difference

   Exit status: 0 fine (diff: the same), 1 a failed check, a difference or an
   entry that cannot be read (the message names file, entry, piece and block),
   2 bad usage. */
#define VESCALE_IMPLEMENTATION
#include "vescale_ckpt.h"

#include <math.h>
#include <pthread.h>

typedef struct ck {
    char dir[4096];
    _vs_ckpt_index ix;
    int* fd; // per file, -1 until opened
} ck;

static int ck_open(ck* c, const char* dir)
{
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/index.json", dir);
    int fd;
    struct stat st;
    if (_vs_ckpt_open_file(path, &fd, &st) != VS_OK) { // (a FIFO is refused, not waited on)
        fprintf(stderr, "vescale-ckpt: %s\n", vs_last_error());
        return -1;
    }
    size_t n = (size_t)st.st_size;
    char* text = (char*)malloc(n + 1);
    size_t got = 0;
    while (text && got < n) {
        ssize_t r = pread(fd, text + got, n - got, (off_t)got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!text || got != n) {
        fprintf(stderr, "vescale-ckpt: %s: read %zu of %zu bytes\n", path, got, n);
        free(text);
        return -1;
    }
    vs_result r = _vs_ckpt_index_parse(NULL, path, text, n, &c->ix);
    free(text);
    if (r != VS_OK) {
        fprintf(stderr, "vescale-ckpt: %s\n", vs_last_error());
        return -1;
    }
    c->fd = (int*)malloc(sizeof(int) * (size_t)(c->ix.nfiles + 1));
    for (int f = 0; f < c->ix.nfiles; f++) c->fd[f] = -1;
    return 0;
}

static void ck_close(ck* c)
{
    for (int f = 0; c->fd && f < c->ix.nfiles; f++)
        if (c->fd[f] >= 0) close(c->fd[f]);
    free(c->fd);
    _vs_ckpt_index_free(NULL, &c->ix);
}

/* File f opened and its size checked against the index; -1 with a message. */
static int ck_file(ck* c, int f)
{
    if (c->fd[f] >= 0) return c->fd[f];
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", c->dir, c->ix.files[f]);
    int fd;
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "vescale-ckpt: %s: missing (%s)\n", path, strerror(errno));
        return -1;
    }
    if (_vs_ckpt_open_file(path, &fd, &st) != VS_OK) {
        fprintf(stderr, "vescale-ckpt: %s\n", vs_last_error());
        return -1;
    }
    if ((uint64_t)st.st_size != c->ix.file_bytes[f]) {
        fprintf(stderr, "vescale-ckpt: %s: %lld bytes, the index says %llu (%s)\n", path, (long long)st.st_size,
                (unsigned long long)c->ix.file_bytes[f],
                (uint64_t)st.st_size < c->ix.file_bytes[f] ? "truncated" : "grown");
        close(fd);
        return -1;
    }
    c->fd[f] = fd;
    return fd;
}

static int read_at(int fd, void* buf, size_t n, uint64_t at)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char*)buf + got, n - got, (off_t)(at + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

/* Bytes of piece k of entry e, CRCs checked; NULL with a message. */
static unsigned char* ck_piece(ck* c, const _vs_ckpt_ientry* e, int k)
{
    const _vs_ckpt_piece* p = &e->pieces[k];
    int fd = ck_file(c, p->file);
    if (fd < 0) return NULL;
    size_t n = (size_t)(p->data_end - p->data_begin);
    unsigned char* b = (unsigned char*)malloc(n + 1);
    if (!b || read_at(fd, b, n, p->data_begin)) {
        fprintf(stderr, "vescale-ckpt: %s/%s: entry \"%s\" piece %d: cannot read bytes [%llu, %llu)\n", c->dir,
                c->ix.files[p->file], e->name, k, (unsigned long long)p->data_begin, (unsigned long long)p->data_end);
        free(b);
        return NULL;
    }
    for (int i = 0; c->ix.block && i < p->ncrc; i++) {
        size_t b0 = (size_t)i * c->ix.block, b1 = b0 + c->ix.block < n ? b0 + c->ix.block : n;
        uint32_t got = _vs_crc32c(0, b + b0, b1 - b0);
        if (got != p->crc[i]) {
            fprintf(stderr, "vescale-ckpt: %s/%s: entry \"%s\" piece %d block %d: crc32c %08x, the index says %08x\n",
                    c->dir, c->ix.files[p->file], e->name, k, i, got, p->crc[i]);
            free(b);
            return NULL;
        }
    }
    return b;
}

static uint64_t numel(int nd, const int64_t* s)
{
    uint64_t n = 1;
    for (int d = 0; d < nd; d++) n *= (uint64_t)s[d];
    return n;
}

/* Elements [from, from + count) of piece box p (flattened row-major) from src
   into the full tensor of e at dst. */
static void scatter(const _vs_ckpt_ientry* e, const _vs_ckpt_piece* p, uint64_t from, uint64_t count,
                    const unsigned char* src, unsigned char* dst)
{
    size_t es = vs_dtype_size(e->dtype);
    if (e->ndim == 0) {
        if (count) memcpy(dst, src, es);
        return;
    }
    int64_t idx[VS_TENSOR_MAX_DIMS];
    uint64_t r = from;
    for (int d = e->ndim - 1; d >= 0; d--) {
        idx[d] = p->box[d] ? (int64_t)(r % (uint64_t)p->box[d]) : 0;
        r = p->box[d] ? r / (uint64_t)p->box[d] : 0;
    }
    int last = e->ndim - 1;
    while (count) {
        uint64_t run = (uint64_t)(p->box[last] - idx[last]);
        if (run > count) run = count;
        uint64_t lin = 0;
        for (int d = 0; d < e->ndim; d++) lin = lin * (uint64_t)e->shape[d] + (uint64_t)(p->off[d] + idx[d]);
        memcpy(dst + lin * es, src, run * es);
        src += run * es;
        count -= run;
        idx[last] += (int64_t)run;
        for (int d = last; d > 0 && idx[d] >= p->box[d]; d--) idx[d] = 0, idx[d - 1]++;
    }
}

/* The whole of entry e (a tensor from its boxes or ranges; a blob's bytes);
   NULL with a message, also when the pieces do not cover it. */
static unsigned char* ck_assemble(ck* c, const _vs_ckpt_ientry* e, size_t* bytes)
{
    size_t es = vs_dtype_size(e->dtype);
    if (e->kind == VS_CKPT_BLOB) {
        *bytes = (size_t)e->blob_bytes;
        return ck_piece(c, e, 0);
    }
    uint64_t n = numel(e->ndim, e->shape), covered = 0;
    *bytes = (size_t)(n * es);
    unsigned char* full = (unsigned char*)calloc(1, *bytes + 1);
    if (!full) {
        fprintf(stderr, "vescale-ckpt: entry \"%s\": out of memory for %zu bytes\n", e->name, *bytes);
        return NULL;
    }
    for (int k = 0; k < e->npieces; k++) {
        const _vs_ckpt_piece* p = &e->pieces[k];
        unsigned char* b = ck_piece(c, e, k);
        if (!b) {
            free(full);
            return NULL;
        }
        uint64_t from = e->kind == VS_CKPT_RANGE ? (uint64_t)p->range_begin : 0;
        uint64_t cnt = e->kind == VS_CKPT_RANGE ? (uint64_t)(p->range_end - p->range_begin) : numel(e->ndim, p->box);
        scatter(e, p, from, cnt, b, full);
        covered += cnt; // the index parser refused overlapping pieces: a sum is coverage
        free(b);
    }
    if (covered != n) {
        fprintf(stderr, "vescale-ckpt: %s: entry \"%s\": the pieces hold %llu of its %llu elements\n", c->dir, e->name,
                (unsigned long long)covered, (unsigned long long)n);
        free(full);
        return NULL;
    }
    return full;
}

static void shape_str(const _vs_ckpt_ientry* e, char* s, size_t cap)
{
    int o = snprintf(s, cap, "[");
    for (int d = 0; d < e->ndim && (size_t)o < cap; d++) o += snprintf(s + o, cap - (size_t)o, "%s%lld", d ? ", " : "", (long long)e->shape[d]);
    if ((size_t)o < cap) snprintf(s + o, cap - (size_t)o, "]");
}

static uint64_t entry_bytes(const _vs_ckpt_ientry* e)
{
    return e->kind == VS_CKPT_BLOB ? e->blob_bytes : numel(e->ndim, e->shape) * vs_dtype_size(e->dtype);
}

static int cmd_ls(const char* dir)
{
    ck c;
    if (ck_open(&c, dir)) return 1;
    printf("%s: mesh (", dir);
    for (int d = 0; d < c.ix.mesh_ndims; d++) printf("%s%s=%d", d ? ", " : "", c.ix.mesh_dims[d], c.ix.mesh_shape[d]);
    uint64_t fb = 0, tb = 0;
    for (int f = 0; f < c.ix.nfiles; f++) fb += c.ix.file_bytes[f];
    printf("), %d files, %llu bytes, ", c.ix.nfiles, (unsigned long long)fb);
    if (c.ix.block) printf("crc32c per %llu bytes\n", (unsigned long long)c.ix.block);
    else printf("no checksums\n");
    printf("%-32s %-6s %-5s %-20s %-28s %12s %6s\n", "entry", "kind", "dtype", "shape", "layout", "bytes", "pieces");
    for (int i = 0; i < c.ix.ne; i++) {
        const _vs_ckpt_ientry* e = &c.ix.e[i];
        char sh[256];
        shape_str(e, sh, sizeof sh);
        printf("%-32s %-6s %-5s %-20s %-28s %12llu %6d\n", e->name, _vs_ckpt_kind_name(e->kind), vs_dtype_name(e->dtype),
               sh, e->layout ? e->layout : "-", (unsigned long long)entry_bytes(e), e->npieces);
        tb += entry_bytes(e);
    }
    printf("%d entries, %llu bytes\n", c.ix.ne, (unsigned long long)tb);
    ck_close(&c);
    return 0;
}

/* ---- verify ---------------------------------------------------------------- */

typedef struct vjob {
    ck* c;
    pthread_mutex_t mu;
    int next, nitems, bad;
    int* item_e; // item -> entry, piece
    int* item_k;
    uint64_t blocks, bytes;
} vjob;

static void* verify_worker(void* arg)
{
    vjob* j = (vjob*)arg;
    size_t cap = 0;
    unsigned char* buf = NULL;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int it = j->next < j->nitems ? j->next++ : -1;
        pthread_mutex_unlock(&j->mu);
        if (it < 0) break;
        const _vs_ckpt_ientry* e = &j->c->ix.e[j->item_e[it]];
        int k = j->item_k[it];
        const _vs_ckpt_piece* p = &e->pieces[k];
        int fd = j->c->fd[p->file];
        uint64_t block = j->c->ix.block, n = p->data_end - p->data_begin, nb = 0, bad = 0;
        if (cap < block) {
            free(buf);
            cap = (size_t)block;
            buf = (unsigned char*)malloc(cap);
        }
        for (int i = 0; i < p->ncrc; i++) {
            uint64_t b0 = (uint64_t)i * block, len = b0 + block < n ? block : n - b0;
            char msg[600] = "";
            if (read_at(fd, buf, (size_t)len, p->data_begin + b0)) {
                snprintf(msg, sizeof msg, "cannot read");
            } else {
                uint32_t got = _vs_crc32c(0, buf, (size_t)len);
                if (got != p->crc[i]) snprintf(msg, sizeof msg, "crc32c %08x, the index says %08x", got, p->crc[i]);
            }
            if (msg[0]) {
                fprintf(stderr, "verify: %s/%s: entry \"%s\" piece %d block %d (bytes %llu..%llu): %s\n", j->c->dir,
                        j->c->ix.files[p->file], e->name, k, i, (unsigned long long)(p->data_begin + b0),
                        (unsigned long long)(p->data_begin + b0 + len), msg);
                bad++;
            }
            nb++;
        }
        pthread_mutex_lock(&j->mu);
        j->bad += (int)bad;
        j->blocks += nb;
        j->bytes += n;
        pthread_mutex_unlock(&j->mu);
    }
    free(buf);
    return NULL;
}

/* The shard's own safetensors header: parses by the format's rules and has
   every piece of the index under its key at the indexed bytes. */
static int verify_header(ck* c, int f)
{
    int fd = c->fd[f];
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", c->dir, c->ix.files[f]);
    unsigned char len8[8];
    if (c->ix.file_bytes[f] < 8 || read_at(fd, len8, 8, 0)) {
        fprintf(stderr, "verify: %s: no safetensors header\n", path);
        return 1;
    }
    uint64_t hl = 0;
    for (int k = 0; k < 8; k++) hl |= (uint64_t)len8[k] << (8 * k);
    if (hl > 100000000u || hl > c->ix.file_bytes[f] - 8) {
        fprintf(stderr, "verify: %s: safetensors header length %llu does not fit the file\n", path, (unsigned long long)hl);
        return 1;
    }
    char* h = (char*)malloc((size_t)hl + 1);
    _vs_st_tensor* t = NULL;
    int nt = 0, bad = 0;
    char* arena = NULL;
    if (!h || read_at(fd, h, (size_t)hl, 8) ||
        _vs_st_parse(NULL, path, h, (size_t)hl, c->ix.file_bytes[f], &t, &nt, &arena) != VS_OK) {
        fprintf(stderr, "verify: %s\n", h ? vs_last_error() : "out of memory");
        free(h);
        return 1;
    }
    for (int i = 0; i < c->ix.ne; i++)
        for (int k = 0; k < c->ix.e[i].npieces; k++) {
            const _vs_ckpt_piece* p = &c->ix.e[i].pieces[k];
            if (p->file != f) continue;
            int ok = 0;
            for (int s = 0; s < nt && !ok; s++)
                ok = !strcmp(t[s].key, p->key) && 8 + hl + t[s].begin == p->data_begin &&
                     8 + hl + t[s].end == p->data_end;
            if (!ok) {
                fprintf(stderr, "verify: %s: entry \"%s\" piece %d: no tensor \"%s\" at bytes [%llu, %llu) in the header\n",
                        path, c->ix.e[i].name, k, p->key, (unsigned long long)p->data_begin,
                        (unsigned long long)p->data_end);
                bad++;
            }
        }
    vs_free(NULL, t);
    vs_free(NULL, arena);
    free(h);
    return bad;
}

static int cmd_verify(const char* dir, int nthreads)
{
    ck c;
    if (ck_open(&c, dir)) return 1;
    int bad = 0, np = 0;
    for (int i = 0; i < c.ix.ne; i++) { // as the loader sees it: every element of every entry somewhere
        int64_t have, want;
        if (_vs_ckpt_covered(&c.ix.e[i], &have, &want)) continue;
        if (want < 0)
            fprintf(stderr, "verify: %s/index.json: entry \"%s\": its shape has more elements than 2^63\n", dir,
                    c.ix.e[i].name);
        else
            fprintf(stderr, "verify: %s/index.json: entry \"%s\": its pieces hold %lld of its %lld %s (a piece missing)\n",
                    dir, c.ix.e[i].name, (long long)have, (long long)want,
                    c.ix.e[i].kind == VS_CKPT_BLOB ? "bytes" : "elements");
        bad++;
    }
    for (int f = 0; f < c.ix.nfiles; f++)
        if (ck_file(&c, f) < 0) bad++;
        else bad += verify_header(&c, f);
    vjob j;
    memset(&j, 0, sizeof j);
    j.c = &c;
    pthread_mutex_init(&j.mu, NULL);
    for (int i = 0; i < c.ix.ne; i++) np += c.ix.e[i].npieces;
    j.item_e = (int*)malloc(sizeof(int) * (size_t)(np + 1));
    j.item_k = (int*)malloc(sizeof(int) * (size_t)(np + 1));
    for (int i = 0; i < c.ix.ne; i++)
        for (int k = 0; k < c.ix.e[i].npieces; k++)
            if (c.fd[c.ix.e[i].pieces[k].file] >= 0) j.item_e[j.nitems] = i, j.item_k[j.nitems++] = k;
    if (c.ix.block) {
        if (nthreads < 1) nthreads = 1;
        if (nthreads > 256) nthreads = 256;
        pthread_t th[256];
        int started = 0;
        for (int t = 0; t < nthreads; t++)
            if (pthread_create(&th[t], NULL, verify_worker, &j) == 0) started++;
            else break;
        if (!started) verify_worker(&j);
        for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    }
    bad += j.bad;
    if (bad)
        printf("%s: FAILED: %d problem(s)\n", dir, bad);
    else if (c.ix.block)
        printf("%s: ok: %d files, %d pieces, %llu bytes in %llu blocks verified (%d threads)\n", dir, c.ix.nfiles,
               j.nitems, (unsigned long long)j.bytes, (unsigned long long)j.blocks, nthreads);
    else
        printf("%s: ok: %d files, sizes and headers (the checkpoint has no checksums)\n", dir, c.ix.nfiles);
    free(j.item_e);
    free(j.item_k);
    pthread_mutex_destroy(&j.mu);
    ck_close(&c);
    return bad ? 1 : 0;
}

/* ---- export ---------------------------------------------------------------- */

static int cmd_export(const char* dir, const char* out)
{
    ck c;
    if (ck_open(&c, dir)) return 1;
    _vs_st_tensor* t = (_vs_st_tensor*)calloc((size_t)c.ix.ne + 1, sizeof *t);
    uint64_t at = 0;
    for (int i = 0; i < c.ix.ne; i++) {
        const _vs_ckpt_ientry* e = &c.ix.e[i];
        t[i].key = e->name;
        t[i].dtype = e->dtype;
        t[i].ndim = e->ndim;
        memcpy(t[i].shape, e->shape, sizeof t[i].shape);
        t[i].begin = at;
        at += entry_bytes(e);
        t[i].end = at;
    }
    char* h = NULL;
    size_t hl = 0;
    int rc = 1;
    FILE* f = NULL;
    if (_vs_st_header(NULL, t, c.ix.ne, "{\"format\":\"pt\",\"source\":\"vescale-ckpt export\"}", &h, &hl) != VS_OK) {
        fprintf(stderr, "export: %s\n", vs_last_error());
        goto done;
    }
    f = fopen(out, "wb");
    if (!f || fwrite(h, 1, hl, f) != hl) {
        fprintf(stderr, "export: %s: %s\n", out, strerror(errno));
        goto done;
    }
    for (int i = 0; i < c.ix.ne; i++) {
        size_t n = 0;
        unsigned char* b = ck_assemble(&c, &c.ix.e[i], &n);
        if (!b) goto done;
        size_t w = fwrite(b, 1, n, f);
        free(b);
        if (w != n) {
            fprintf(stderr, "export: %s: %s\n", out, strerror(errno));
            goto done;
        }
    }
    if (fclose(f) != 0) {
        f = NULL;
        fprintf(stderr, "export: %s: %s\n", out, strerror(errno));
        goto done;
    }
    f = NULL;
    printf("%s: %d entries, %llu bytes of tensors\n", out, c.ix.ne, (unsigned long long)at);
    rc = 0;
done:
    if (f) fclose(f);
    if (rc) remove(out);
    vs_free(NULL, h);
    free(t);
    ck_close(&c);
    return rc;
}

/* ---- diff ------------------------------------------------------------------ */

static double elem(vs_dtype dt, const unsigned char* p)
{
    switch (dt) {
    case VS_F32: { float x; memcpy(&x, p, 4); return x; }
    case VS_F64: { double x; memcpy(&x, p, 8); return x; }
    case VS_F16: { uint16_t x; memcpy(&x, p, 2); return vs_f16_to_f32(x); }
    case VS_BF16: { uint16_t x; memcpy(&x, p, 2); return vs_bf16_to_f32(x); }
    case VS_I32: { int32_t x; memcpy(&x, p, 4); return x; }
    case VS_I64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    default: return *p;
    }
}

static const _vs_ckpt_ientry* find(const ck* c, const char* name)
{
    for (int i = 0; i < c->ix.ne; i++)
        if (!strcmp(c->ix.e[i].name, name)) return &c->ix.e[i];
    return NULL;
}

/* The index (i0, i1, ...) of element lin of entry x, into at. */
static void index_str(const _vs_ckpt_ientry* x, uint64_t lin, char* at, size_t cap)
{
    int64_t idx[VS_TENSOR_MAX_DIMS];
    for (int d = x->ndim - 1; d >= 0; d--) {
        idx[d] = x->shape[d] ? (int64_t)(lin % (uint64_t)x->shape[d]) : 0;
        lin = x->shape[d] ? lin / (uint64_t)x->shape[d] : 0;
    }
    size_t o = (size_t)snprintf(at, cap, "(");
    for (int d = 0; d < x->ndim && o < cap; d++) o += (size_t)snprintf(at + o, cap - o, "%s%lld", d ? ", " : "", (long long)idx[d]);
    if (o < cap) snprintf(at + o, cap - o, ")");
}

/* Compares two entries' bytes element by element: the same when every pair
   has |a - b| <= atol + rtol |b| (equal bits always; NaN only equals NaN).
   Prints the count and the largest difference; 1 when they differ. */
static int diff_entry(const _vs_ckpt_ientry* x, const unsigned char* bx, const unsigned char* by, size_t nb, double atol,
                      double rtol)
{
    size_t es = vs_dtype_size(x->dtype), n = nb / es;
    uint64_t nd = 0, worst = 0;
    double wd = -1;
    for (size_t q = 0; q < n; q++) {
        if (!memcmp(bx + q * es, by + q * es, es)) continue;
        double a = elem(x->dtype, bx + q * es), b = elem(x->dtype, by + q * es);
        if (a != a && b != b) continue;
        double d = a != a || b != b ? INFINITY : fabs(a - b);
        if (d <= atol + rtol * fabs(b)) continue;
        nd++;
        if (d > wd) wd = d, worst = q;
    }
    if (!nd) return 0;
    char at[256];
    index_str(x, worst, at, sizeof at);
    double a = elem(x->dtype, bx + worst * es), b = elem(x->dtype, by + worst * es);
    printf("%s: %llu of %zu elements differ; largest at %s: %.17g vs %.17g (|a-b| %.3g)\n", x->name,
           (unsigned long long)nd, n, at, a, b, wd);
    return 1;
}

static int cmd_diff(const char* da, const char* db, double atol, double rtol)
{
    ck a, b;
    if (ck_open(&a, da)) return 1;
    if (ck_open(&b, db)) {
        ck_close(&a);
        return 1;
    }
    int ndiff = 0, err = 0, same = 0;
    for (int i = 0; i < a.ix.ne; i++) {
        const _vs_ckpt_ientry* x = &a.ix.e[i];
        const _vs_ckpt_ientry* y = find(&b, x->name);
        char sx[256], sy[256];
        if (!y) {
            printf("only in %s: %s\n", da, x->name);
            ndiff++;
            continue;
        }
        shape_str(x, sx, sizeof sx);
        shape_str(y, sy, sizeof sy);
        if (x->kind == VS_CKPT_BLOB || y->kind == VS_CKPT_BLOB) {
            if (x->kind != y->kind) {
                printf("%s: kind %s vs %s\n", x->name, _vs_ckpt_kind_name(x->kind), _vs_ckpt_kind_name(y->kind));
                ndiff++;
                continue;
            }
        }
        if (x->dtype != y->dtype || strcmp(sx, sy)) {
            printf("%s: %s %s vs %s %s\n", x->name, vs_dtype_name(x->dtype), sx, vs_dtype_name(y->dtype), sy);
            ndiff++;
            continue;
        }
        size_t nx = 0, ny = 0;
        unsigned char* bx = ck_assemble(&a, x, &nx);
        unsigned char* by = bx ? ck_assemble(&b, y, &ny) : NULL;
        if (!bx || !by) err++;
        else if (nx != ny || diff_entry(x, bx, by, nx, x->kind == VS_CKPT_BLOB ? 0 : atol, x->kind == VS_CKPT_BLOB ? 0 : rtol))
            ndiff++;
        else same++;
        free(bx);
        free(by);
    }
    for (int i = 0; i < b.ix.ne; i++)
        if (!find(&a, b.ix.e[i].name)) {
            printf("only in %s: %s\n", db, b.ix.e[i].name);
            ndiff++;
        }
    if (err) printf("%d entries could not be read\n", err);
    printf("%d entries the same, %d different\n", same, ndiff);
    ck_close(&a);
    ck_close(&b);
    return err || ndiff ? 1 : 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: vescale-ckpt ls <ckpt>\n"
                    "       vescale-ckpt verify <ckpt> [-j N]\n"
                    "       vescale-ckpt export <ckpt> <out.safetensors>\n"
                    "       vescale-ckpt diff <a> <b> [--atol A] [--rtol R]\n");
    return 2;
}

int main(int argc, char** argv)
{
    if (argc < 3) return usage();
    const char* cmd = argv[1];
    if (!strcmp(cmd, "ls") && argc == 3) return cmd_ls(argv[2]);
    if (!strcmp(cmd, "verify") && (argc == 3 || (argc == 5 && !strcmp(argv[3], "-j")))) {
        long j = 4;
        if (argc == 5) {
            char* end;
            j = strtol(argv[4], &end, 10);
            if (*end || j < 1 || j > 256) return usage();
        }
        return cmd_verify(argv[2], (int)j);
    }
    if (!strcmp(cmd, "export") && argc == 4) return cmd_export(argv[2], argv[3]);
    if (!strcmp(cmd, "diff") && argc >= 4 && argc % 2 == 0) {
        double tol[2] = {0, 0}; // --atol, --rtol
        for (int i = 4; i < argc; i += 2) {
            int k = !strcmp(argv[i], "--atol") ? 0 : !strcmp(argv[i], "--rtol") ? 1 : -1;
            char* end;
            double v = k < 0 ? 0 : strtod(argv[i + 1], &end);
            if (k < 0 || *end || !(v >= 0) || v == INFINITY) return usage();
            tol[k] = v;
        }
        return cmd_diff(argv[2], argv[3], tol[0], tol[1]);
    }
    return usage();
}
