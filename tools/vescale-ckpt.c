/* vescale-ckpt - look into vescale checkpoints (vescale_ckpt.h's format) with
   only the index and safetensors code of the header and pread.

   vescale-ckpt ls <ckpt>                       entries: kind, dtype, global shape,
                                                layout at save time, bytes, pieces
   vescale-ckpt verify <ckpt> [-j N]            every file's size and safetensors
                                                header, every CRC32C block (N threads)
   vescale-ckpt export <ckpt> <out.safetensors> one safetensors file of every entry,
                                                full (blobs as U8), CRCs checked
   vescale-ckpt export --weights-only [--max-shard-size 5GB] [--strip-prefix model.]
                       [--include PREFIX]... <ckpt> <out-dir>
                                                the weights as Hugging Face writes
                                                them (below)
   vescale-ckpt diff <a> <b> [--atol A] [--rtol R]
                                                entry by entry: missing, kind/dtype/
                                                shape, how many elements differ by more
                                                than A + R |b| (default 0: any bit) and
                                                the largest difference; the training
                                                state's plan ("__plan": the mesh it was
                                                saved on) is a note, not a difference,
                                                so checkpoints of two meshes compare

   Exit status: 0 fine (diff: the same), 1 a failed check, a difference or an
   entry that cannot be read (the message names file, entry, piece and block),
   2 bad usage.

   export. Every tensor is written whole (assembled from the pieces of any
   mesh, each CRC32C block checked), in its dtype under safetensors' name (F32
   F16 BF16 F64 I32 I64 U8). Nothing is ever replaced: an output that exists
   is an error (exit 1), and the output appears only once complete (written
   under a temporary name, fsynced, then linked or renamed in place; a failure
   leaves nothing behind).

   Which entries are weights (--weights-only): the entries of kind "tensor"
   whose name does not end in ".master", ".exp_avg", ".exp_avg_sq",
   ".momentum", ".custom0" or ".custom1". So a checkpoint of vs_ckpt_save_ddp
   (vs_train_save: prefix "") gives its parameters "<prefix><param>" and
   leaves out
     - the optimizer state "<prefix><param>.master" / ".exp_avg" / ... : these
       are "range" entries (ZeRO shards; a "range" entry is never a weight),
       and the suffixes catch the same states saved as plain tensors;
     - the blobs: "<prefix>__step", vs_train_save's "__plan", the caller's
       extra blobs (RNG, data position).
   A caller's extra tensor entries (vs_ckpt_entry with .t) count as weights.
   --include PREFIX (repeatable) replaces the rule: the "tensor" and "range"
   entries whose names start with one of the prefixes, each of which must
   match something. `vescale-ckpt ls` shows every entry's kind.

   --strip-prefix P: a name that starts with P loses it ("model.w1" -> "w1");
   others keep theirs. A name that becomes empty, or two that become the same,
   is an error naming the entries.

   The layout (with --weights-only, --include, --max-shard-size, or when out
   ends in '/' or is a directory): the tensors in order, into files of at most
   --max-shard-size bytes of tensor data (default 5GB; huggingface_hub's
   split: a tensor that does not fit starts the next file, and one larger than
   the limit gets a file of its own), each with "__metadata__" {"format":
   "pt"}, named as transformers' save_pretrained names them:
     - one file: model.safetensors, and no index (transformers writes none
       then, and from_pretrained looks for model.safetensors first);
     - N files: model-00001-of-0000N.safetensors ... and
       model.safetensors.index.json, {"metadata": {"total_size": <bytes of
       tensor data>}, "weight_map": {"<name>": "<file>", ...}} (keys sorted,
       indented by 2, as transformers writes it).
   out is made (a new directory appears by one rename), or is an existing
   directory (e.g. with the model's config.json) that holds no model*.safetensors
   or index of an earlier export: there the files are linked in, the index
   last, and removed again if one fails. A directory named *.safetensors that
   does not exist is refused (exit 2): it is probably meant as a file. A
   killed export leaves its temporary behind: <out>.tmp-<pid> beside out, or
   .vescale-ckpt-export.tmp-<pid> inside an existing directory.
   Sizes: bytes, or a whole number with B, KB MB GB TB (10^3 .. 10^12, as
   huggingface_hub and transformers read "5GB") or KiB MiB GiB TiB (2^10 ..);
   a lowercase final b ("5Gb", gigabits to transformers) is refused. */
#define VESCALE_IMPLEMENTATION
#include "vescale_ckpt.h"

#include <dirent.h>
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
    for (int f = 0; f < c.ix.nfiles; f++) {
        char path[4400];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", c.dir, c.ix.files[f]);
        if (c.ix.file_bytes[f] == 0 && stat(path, &st) != 0 && errno == ENOENT)
            continue; // (a rank with nothing to save writes no file: its 0 bytes, no piece in it)
        if (ck_file(&c, f) < 0) bad++;
        else bad += verify_header(&c, f);
    }
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

/* What export writes: which entries, under which names, how many bytes a file. */
typedef struct xopt {
    int weights_only;        // the weight rule picks the entries (the top comment)
    const char* include[64]; // --include: these name prefixes pick them instead
    int ninclude;
    uint64_t max_shard;      // --max-shard-size in bytes; 0: not given
    const char* strip;       // --strip-prefix; NULL: the names as saved
} xopt;

#define HF_INDEX "model.safetensors.index.json"
#define HF_SINGLE "model.safetensors"
#define HF_SHARD_DEFAULT 5000000000ull // "5GB": huggingface_hub's and transformers' default

/* The optimizer states vs_ckpt_save_ddp saves as "<prefix><param>.<state>"
   (_vs_ckpt_state_names in vescale_ckpt.h's >>ckpt-ddp; this tool does not
   compile the DDP part, so the list is repeated here). */
static const char* const optim_states[] = {"master", "exp_avg", "exp_avg_sq", "momentum", "custom0", "custom1"};

static int optim_name(const char* name)
{
    const char* dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof optim_states / sizeof optim_states[0]; i++)
        if (!strcmp(dot + 1, optim_states[i])) return 1;
    return 0;
}

/* Whether export writes entry e (the rule in the top comment). */
static int picked(const xopt* o, const _vs_ckpt_ientry* e)
{
    if (o->ninclude) {
        for (int i = 0; e->kind != VS_CKPT_BLOB && i < o->ninclude; i++)
            if (!strncmp(e->name, o->include[i], strlen(o->include[i]))) return 1;
        return 0;
    }
    return !o->weights_only || (e->kind == VS_CKPT_TENSOR && !optim_name(e->name));
}

/* "5GB" -> 5 * 10^9: a whole number of bytes with no unit or B, KB MB GB TB
   (10^3 .. 10^12, as huggingface_hub and transformers read them) or KiB MiB
   GiB TiB (2^10 .. 2^40); letters in any case but the final B (transformers
   reads "5Gb" as gigabits). 0 for anything else, for 0 and past 2^62. */
static uint64_t parse_size(const char* s)
{
    static const struct {
        const char* unit;
        uint64_t mul;
    } units[] = {{"", 1},          {"B", 1},          {"KB", 1000ull},         {"MB", 1000000ull},
                 {"GB", 1000000000ull}, {"TB", 1000000000000ull}, {"KIB", 1ull << 10}, {"MIB", 1ull << 20},
                 {"GIB", 1ull << 30},  {"TIB", 1ull << 40}};
    const uint64_t lim = (uint64_t)1 << 62;
    uint64_t v = 0;
    const char* p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > lim / 10) return 0;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (p == s || !v || strlen(p) > 3 || (*p && p[strlen(p) - 1] != 'B')) return 0;
    char u[4] = "";
    for (int k = 0; p[k]; k++) u[k] = (char)(p[k] >= 'a' && p[k] <= 'z' ? p[k] - 'a' + 'A' : p[k]);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(u, units[i].unit)) return v > lim / units[i].mul ? 0 : v * units[i].mul;
    return 0;
}

static int write_all(int fd, const void* p, size_t n)
{
    const char* c = (const char*)p;
    while (n) {
        ssize_t k = write(fd, c, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        c += k, n -= (size_t)k;
    }
    return 0;
}

/* One exported tensor: its name in the output, its entry, its file. */
typedef struct xent {
    const char* name;
    int e, file;
} xent;

static int xent_cmp(const void* a, const void* b) // by name, then entry (two names the same: in index order)
{
    const xent* x = (const xent*)a;
    const xent* y = (const xent*)b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->e > y->e) - (x->e < y->e);
}

/* Entries x[0..n) of c whose file is f (all when f < 0), full (CRC-checked by
   ck_assemble), as one safetensors file created at path (never replacing
   one) and fsynced. 0, or 1 with a message. */
static int write_st(ck* c, const xent* x, int n, int f, const char* meta, const char* path)
{
    _vs_st_tensor* t = (_vs_st_tensor*)calloc((size_t)n + 1, sizeof *t);
    int nt = 0, rc = 1, fd = -1;
    uint64_t at = 0;
    char* h = NULL;
    size_t hl = 0;
    if (!t) {
        fprintf(stderr, "export: out of memory\n");
        return 1;
    }
    for (int i = 0; i < n; i++) {
        if (f >= 0 && x[i].file != f) continue;
        const _vs_ckpt_ientry* e = &c->ix.e[x[i].e];
        t[nt].key = x[i].name;
        t[nt].dtype = e->dtype;
        t[nt].ndim = e->ndim;
        memcpy(t[nt].shape, e->shape, sizeof t[nt].shape);
        t[nt].begin = at;
        at += entry_bytes(e);
        t[nt++].end = at;
    }
    if (_vs_st_header(NULL, t, nt, meta, &h, &hl) != VS_OK) {
        fprintf(stderr, "export: %s: %s\n", path, vs_last_error());
        goto done;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 || write_all(fd, h, hl)) goto io;
    for (int i = 0; i < n; i++) {
        if (f >= 0 && x[i].file != f) continue;
        size_t nb = 0;
        unsigned char* b = ck_assemble(c, &c->ix.e[x[i].e], &nb);
        if (!b) goto done;
        int bad = write_all(fd, b, nb);
        free(b);
        if (bad) goto io;
    }
    if (fsync(fd) != 0) goto io;
    int fdc = fd;
    fd = -1;
    if (close(fdc) != 0) goto io;
    rc = 0;
    goto done;
io:
    fprintf(stderr, "export: %s: %s\n", path, strerror(errno));
done:
    if (fd >= 0) close(fd);
    vs_free(NULL, h);
    free(t);
    return rc;
}

/* The directory that holds path (a file or directory name), fsynced so a
   rename or link in it lasts; best effort (some file systems refuse). */
static void fsync_parent(const char* path)
{
    char d[4400];
    snprintf(d, sizeof d, "%s", path);
    char* s = strrchr(d, '/');
    if (!s) snprintf(d, sizeof d, ".");
    else if (s == d) d[1] = 0;
    else *s = 0;
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) fsync(fd), close(fd);
}

/* from -> to, never replacing what is at `to`: a hard link (which fails with
   EEXIST where rename would replace) and the unlink of from; where the file
   system has no hard links, a check and a rename. 0, or 1 with a message. */
static int publish(const char* from, const char* to)
{
    struct stat st;
    if (link(from, to) == 0) {
        unlink(from);
        return 0;
    }
    if (errno == EEXIST || lstat(to, &st) == 0) {
        fprintf(stderr, "export: %s exists (export never replaces a file)\n", to);
        return 1;
    }
    if (rename(from, to) == 0) return 0;
    fprintf(stderr, "export: %s: %s\n", to, strerror(errno));
    return 1;
}

/* The output names (after --strip-prefix), checked: none empty, none twice. */
static int name_check(const ck* c, const xopt* o, xent* x, int n)
{
    size_t sl = o->strip ? strlen(o->strip) : 0;
    for (int i = 0; i < n; i++) {
        const char* nm = c->ix.e[x[i].e].name;
        x[i].name = sl && !strncmp(nm, o->strip, sl) ? nm + sl : nm;
        if (!x[i].name[0]) {
            fprintf(stderr, "export: entry \"%s\" is all prefix: --strip-prefix %s leaves it no name\n", nm, o->strip);
            return 1;
        }
    }
    xent* s = (xent*)malloc(sizeof *s * ((size_t)n + 1));
    if (!s) return 1;
    memcpy(s, x, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, xent_cmp);
    int bad = 0;
    for (int i = 1; i < n; i++)
        if (!strcmp(s[i - 1].name, s[i].name)) {
            fprintf(stderr, "export: entries \"%s\" and \"%s\" are both \"%s\" after --strip-prefix %s\n",
                    c->ix.e[s[i - 1].e].name, c->ix.e[s[i].e].name, s[i].name, o->strip);
            bad = 1;
        }
    free(s);
    return bad;
}

/* The index transformers writes (json.dumps(index, indent=2, sort_keys=True)
   plus a newline): the total bytes of the tensors and, by name, each one's file. */
static int write_hf_index(const xent* x, int n, char (*fname)[64], uint64_t total, const char* path)
{
    xent* s = (xent*)malloc(sizeof *s * ((size_t)n + 1));
    if (!s) return 1;
    memcpy(s, x, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, xent_cmp);
    _vs_sbuf b;
    memset(&b, 0, sizeof b);
    _vs_sb_printf(&b, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {", (unsigned long long)total);
    for (int i = 0; i < n; i++) {
        _vs_sb_printf(&b, "%s\n    ", i ? "," : "");
        _vs_sb_json_str(&b, s[i].name);
        _vs_sb_printf(&b, ": \"%s\"", fname[s[i].file]);
    }
    _vs_sb_printf(&b, "\n  }\n}\n");
    free(s);
    int rc = 1, fd = b.oom ? -1 : open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 && !write_all(fd, b.p, b.len) && !fsync(fd)) rc = 0;
    if (fd >= 0 && close(fd) != 0) rc = 1;
    if (rc) fprintf(stderr, "export: %s: %s\n", path, b.oom ? "out of memory" : strerror(errno));
    _vs_sb_free(&b);
    return rc;
}

/* A file of an earlier export in directory d (name into hit): refused, so a
   set is never mixed with another's files. */
static int earlier_export(const char* d, char* hit, size_t cap)
{
    DIR* dp = opendir(d);
    struct dirent* de;
    int found = 0;
    while (dp && !found && (de = readdir(dp)) != NULL) {
        size_t l = strlen(de->d_name);
        found = !strcmp(de->d_name, HF_INDEX) ||
                (!strncmp(de->d_name, "model", 5) && l >= 17 && !strcmp(de->d_name + l - 12, ".safetensors"));
        if (found) snprintf(hit, cap, "%s", de->d_name);
    }
    if (dp) closedir(dp);
    return found;
}

/* The selected entries x[0..n) as model.safetensors, or as
   model-0000k-of-0000N.safetensors + model.safetensors.index.json, into the
   directory out (made, or existing without an earlier export's files). */
static int export_dir(ck* c, xent* x, int n, const xopt* o, const char* out, uint64_t* total, int* nfiles)
{
    uint64_t lim = o->max_shard ? o->max_shard : HF_SHARD_DEFAULT, cur_bytes = 0;
    int cur = -1, nf = 0;
    for (int i = 0; i < n; i++) { // huggingface_hub's split: in order, an oversized tensor alone
        uint64_t b = entry_bytes(&c->ix.e[x[i].e]);
        *total += b;
        if (b > lim) {
            x[i].file = nf++;
            continue;
        }
        if (cur < 0 || cur_bytes + b > lim) cur = nf++, cur_bytes = 0;
        x[i].file = cur;
        cur_bytes += b;
    }
    *nfiles = nf;
    char(*fname)[64] = (char(*)[64])calloc((size_t)nf + 1, 64);
    char base[4096], tmp[4200], p[4400], q[4400], hit[300];
    snprintf(base, sizeof base, "%s", out);
    for (size_t l = strlen(base); l > 1 && base[l - 1] == '/'; l--) base[l - 1] = 0;
    struct stat st;
    int exists = stat(base, &st) == 0, rc = 1, made = 0, moved = 0;
    if (!fname) return 1;
    if (exists && !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "export: %s exists and is not a directory (export never replaces a file)\n", base);
        goto done;
    }
    if (exists && earlier_export(base, hit, sizeof hit)) {
        fprintf(stderr, "export: %s holds %s of an earlier export: remove it or name another directory\n", base, hit);
        goto done;
    }
    // a new directory appears whole by one rename; in an existing one the files are linked in, the index last
    if (exists) snprintf(tmp, sizeof tmp, "%s/.vescale-ckpt-export.tmp-%ld", base, (long)getpid());
    else snprintf(tmp, sizeof tmp, "%s.tmp-%ld", base, (long)getpid());
    if (mkdir(tmp, exists ? 0700 : 0777) != 0) {
        fprintf(stderr, "export: cannot make %s: %s\n", tmp, strerror(errno));
        goto done;
    }
    made = 1;
    for (int f = 0; f < nf; f++) {
        if (nf == 1) snprintf(fname[f], 64, HF_SINGLE);
        else snprintf(fname[f], 64, "model-%05d-of-%05d.safetensors", f + 1, nf);
        snprintf(p, sizeof p, "%s/%s", tmp, fname[f]);
        if (write_st(c, x, n, f, "{\"format\":\"pt\"}", p)) goto done;
    }
    snprintf(p, sizeof p, "%s/" HF_INDEX, tmp);
    if (nf > 1 && write_hf_index(x, n, fname, *total, p)) goto done; // (transformers writes none for one file)
    if (!exists) {
        if (lstat(base, &st) == 0) {
            fprintf(stderr, "export: %s appeared while exporting (export never replaces it)\n", base);
            goto done;
        }
        if (rename(tmp, base) != 0) {
            fprintf(stderr, "export: %s: %s\n", base, strerror(errno));
            goto done;
        }
        made = 0;
        fsync_parent(base);
        rc = 0;
        goto done;
    }
    for (; moved < nf + (nf > 1); moved++) {
        const char* nm = moved < nf ? fname[moved] : HF_INDEX;
        snprintf(p, sizeof p, "%s/%s", tmp, nm);
        snprintf(q, sizeof q, "%s/%s", base, nm);
        if (publish(p, q)) break;
    }
    if (moved == nf + (nf > 1)) {
        snprintf(p, sizeof p, "%s/.", base);
        fsync_parent(p);
        rc = 0;
    } else {
        for (int k = 0; k < moved; k++) { // undo: nothing of a failed set stays
            snprintf(q, sizeof q, "%s/%s", base, k < nf ? fname[k] : HF_INDEX);
            unlink(q);
        }
    }
done:
    for (int f = 0; made && f <= nf; f++) { // what is left of the temporary directory
        if (f < nf && !fname[f][0]) continue;
        snprintf(p, sizeof p, "%s/%s", tmp, f < nf ? fname[f] : HF_INDEX);
        unlink(p);
    }
    if (made) rmdir(tmp);
    free(fname);
    return rc;
}

/* exit status: 0, 1 a failure, 2 bad usage (found only here: a directory
   named like a file) */
static int cmd_export(const char* dir, const char* out, const xopt* o)
{
    int dirl = o->weights_only || o->ninclude || o->max_shard;
    size_t ol = strlen(out);
    struct stat st;
    if (!dirl) dirl = out[ol - 1] == '/' || (stat(out, &st) == 0 && S_ISDIR(st.st_mode));
    else if (ol > 12 && !strcmp(out + ol - 12, ".safetensors") && stat(out, &st) != 0) {
        fprintf(stderr, "export: %s: --weights-only, --include and --max-shard-size write a directory (%s or "
                        "model-*.safetensors + %s): name a directory\n", out, HF_SINGLE, HF_INDEX);
        return 2;
    }
    ck c;
    if (ck_open(&c, dir)) return 1;
    xent* x = (xent*)calloc((size_t)c.ix.ne + 1, sizeof *x);
    int n = 0, rc = 1, nfiles = 1, left[3] = {0, 0, 0}, optim = 0; // left out, by kind
    uint64_t total = 0;
    char tmp[4200];
    tmp[0] = 0;
    if (!x) goto done;
    for (int i = 0; i < c.ix.ne; i++) {
        const _vs_ckpt_ientry* e = &c.ix.e[i];
        if (picked(o, e)) {
            x[n++].e = i;
            continue;
        }
        left[e->kind == VS_CKPT_TENSOR ? 0 : e->kind == VS_CKPT_RANGE ? 1 : 2]++;
        optim += e->kind == VS_CKPT_TENSOR && optim_name(e->name);
    }
    for (int k = 0; k < o->ninclude; k++) {
        int hits = 0;
        for (int i = 0; i < n; i++) hits += !strncmp(c.ix.e[x[i].e].name, o->include[k], strlen(o->include[k]));
        if (!hits) {
            fprintf(stderr, "export: --include %s: no tensor or range entry of %s starts so (see vescale-ckpt ls)\n",
                    o->include[k], dir);
            goto done;
        }
    }
    if (!n && dirl) { // (one file of nothing is a valid safetensors file; a directory of nothing is not a model)
        fprintf(stderr, "export: %s: no %s among its %d entries (the rule: vescale-ckpt's top comment; "
                        "--include PREFIX picks entries by name)\n",
                dir, o->weights_only ? "weights" : "entries", c.ix.ne);
        goto done;
    }
    if (name_check(&c, o, x, n)) goto done;
    if (dirl) {
        if (export_dir(&c, x, n, o, out, &total, &nfiles)) goto done;
        if (nfiles > 1)
            printf("%s: %d tensors, %llu bytes in %d files and %s\n", out, n, (unsigned long long)total, nfiles, HF_INDEX);
        else printf("%s: %d tensors, %llu bytes in %s\n", out, n, (unsigned long long)total, HF_SINGLE);
    } else {
        if (lstat(out, &st) == 0) {
            fprintf(stderr, "export: %s exists (export never replaces a file)\n", out);
            goto done;
        }
        snprintf(tmp, sizeof tmp, "%s.tmp-%ld", out, (long)getpid());
        if (write_st(&c, x, n, -1, "{\"format\":\"pt\",\"source\":\"vescale-ckpt export\"}", tmp) || publish(tmp, out))
            goto done;
        fsync_parent(out);
        for (int i = 0; i < n; i++) total += entry_bytes(&c.ix.e[x[i].e]);
        printf("%s: %d entries, %llu bytes of tensors\n", out, n, (unsigned long long)total);
    }
    if (left[0] + left[1] + left[2]) { // e.g. "left out 5 entries: 2 range, 2 blob, 1 optimizer-state tensor"
        printf("left out %d entries:", left[0] + left[1] + left[2]);
        const char* sep = " ";
        if (left[1]) printf("%s%d range", sep, left[1]), sep = ", ";
        if (left[2]) printf("%s%d blob", sep, left[2]), sep = ", ";
        if (optim) printf("%s%d optimizer-state tensor", sep, optim), sep = ", ";
        if (left[0] > optim) printf("%s%d tensor not included", sep, left[0] - optim);
        printf("\n");
    }
    rc = 0;
done:
    if (tmp[0]) unlink(tmp); // (gone after a publish; a failed write's partial file)
    free(x);
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

/* The plans of two training states' checkpoints (vescale.h's "__plan", text):
   a note naming the first line that differs; the values compare whatever mesh
   saved them, so a plan difference is not a difference of the checkpoints. */
static void plan_note(const unsigned char* bx, size_t nx, const unsigned char* by, size_t ny)
{
    if (nx == ny && !memcmp(bx, by, nx)) return;
    size_t i = 0, line = 0;
    while (i < nx && i < ny && bx[i] == by[i]) {
        if (bx[i] == '\n') line = i + 1;
        i++;
    }
    size_t ex = line, ey = line;
    while (ex < nx && bx[ex] != '\n') ex++;
    while (ey < ny && by[ey] != '\n') ey++;
    printf("note: __plan: saved on another plan (\"%.*s\" vs \"%.*s\"): values compared regardless\n",
           (int)(ex - line > 120 ? 120 : ex - line), (const char*)bx + line, (int)(ey - line > 120 ? 120 : ey - line),
           (const char*)by + line);
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
        if (x->kind == VS_CKPT_BLOB && y->kind == VS_CKPT_BLOB && !strcmp(x->name, "__plan")) { // a note, never a difference
            size_t nx = 0, ny = 0;
            unsigned char* bx = ck_assemble(&a, x, &nx);
            unsigned char* by = bx ? ck_assemble(&b, y, &ny) : NULL;
            if (!bx || !by) err++;
            else plan_note(bx, nx, by, ny), same++;
            free(bx);
            free(by);
            continue;
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
                    "       vescale-ckpt export [--strip-prefix P] <ckpt> <out.safetensors>\n"
                    "       vescale-ckpt export --weights-only [--max-shard-size 5GB] [--strip-prefix model.]\n"
                    "                           [--include PREFIX]... <ckpt> <out-dir>\n"
                    "       vescale-ckpt diff <a> <b> [--atol A] [--rtol R]\n"
                    "sizes: bytes, or a whole number with B, KB MB GB TB (10^3..) or KiB MiB GiB TiB (2^10..)\n");
    return 2;
}

static int usage_error(const char* what, const char* arg)
{
    fprintf(stderr, "vescale-ckpt export: %s%s\n", what, arg);
    return usage();
}

/* export's arguments: options (also --opt=value) anywhere, "--" ends them. */
static int main_export(int argc, char** argv)
{
    xopt o;
    memset(&o, 0, sizeof o);
    const char* pos[2] = {NULL, NULL};
    int npos = 0, opts = 1;
    for (int i = 0; i < argc; i++) {
        const char* a = argv[i];
        if (!opts || a[0] != '-' || !a[1]) {
            if (npos == 2) return usage_error("one checkpoint and one output, and then ", a);
            pos[npos++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            opts = 0;
            continue;
        }
        char opt[64];
        const char* eq = strchr(a, '=');
        size_t ol = eq ? (size_t)(eq - a) : strlen(a);
        snprintf(opt, sizeof opt, "%.*s", (int)(ol < sizeof opt ? ol : sizeof opt - 1), a);
        if (!strcmp(opt, "--weights-only") && !eq) {
            o.weights_only = 1;
            continue;
        }
        if (strcmp(opt, "--include") && strcmp(opt, "--max-shard-size") && strcmp(opt, "--strip-prefix"))
            return usage_error("unknown option ", a);
        if (!eq && i + 1 >= argc) return usage_error("a value is missing after ", a);
        const char* v = eq ? eq + 1 : argv[++i];
        if (!strcmp(opt, "--include")) {
            if (!v[0] || o.ninclude == 64)
                return usage_error("--include takes a non-empty prefix, at most 64 times", "");
            o.include[o.ninclude++] = v;
        } else if (!strcmp(opt, "--strip-prefix")) {
            if (!v[0] || o.strip) return usage_error("--strip-prefix takes one non-empty prefix, once", "");
            o.strip = v;
        } else {
            if (o.max_shard) return usage_error("--max-shard-size given twice", "");
            if (!(o.max_shard = parse_size(v))) return usage_error("--max-shard-size: not a size above 0: ", v);
        }
    }
    if (npos != 2 || !pos[0][0] || !pos[1][0]) return usage_error("give a checkpoint and an output", "");
    return cmd_export(pos[0], pos[1], &o);
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
    if (!strcmp(cmd, "export")) return main_export(argc - 2, argv + 2);
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
