/* fuzz_ckpt_dir.c - libFuzzer harness for a whole checkpoint directory: what
   vs_ckpt_load and vs_train_saved_plan read.
   Input: the directory's files joined by the separator "@@vsfile@@": index.json,
   then shard-00000.safetensors, then shard-00001.safetensors (a part not given
   is no file). They are written into a temporary folder; then, on the rank
   thread of a 1-rank job (a mesh of one and its checkpointer, built once):
   vs_train_saved_plan, and vs_ckpt_load of every entry the index names (up to
   8, each at most 1 MiB, as the index says: its dtype and global shape, whole
   on the one rank; blobs with their stored size).
   Properties: never crashes, leaks, hangs or reads past a file; every error
   leaves a message; a plan that comes back prints; a load that succeeds flags
   every entry loaded, and a blob's stored size is what the index says. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define FZ_ASSERT(c)                                                                 \
    do {                                                                             \
        if (!(c)) {                                                                  \
            fprintf(stderr, "fuzz_ckpt_dir: %s:%d: %s\n", __FILE__, __LINE__, #c);   \
            abort();                                                                 \
        }                                                                            \
    } while (0)

#define SEP "@@vsfile@@"
static const char* const FILES[3] = {"index.json", "shard-00000.safetensors", "shard-00001.safetensors"};

static char DIR_[256];
static vs_ckpt* CK;
static vs_mesh* MESH;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pending, done_, ready;

/* One input's work, on the rank thread. */
static void work(void)
{
    vs_plan plan;
    vs_clear_error();
    vs_result r = vs_train_saved_plan(DIR_, &plan);
    if (r == VS_OK) FZ_ASSERT(vs_plan_print(&plan, NULL, 0) > 0);
    else FZ_ASSERT(vs_last_error()[0]);

    _vs_ckpt_index ix;
    memset(&ix, 0, sizeof ix);
    vs_clear_error();
    r = _vs_ckpt_read_index(CK, DIR_, &ix);
    if (r != VS_OK) {
        FZ_ASSERT(vs_last_error()[0]);
        return;
    }
    vs_ckpt_entry e[8];
    void* buf[8] = {0};
    int n = 0, loaded[8];
    uint64_t want_blob[8];
    memset(e, 0, sizeof e);
    for (int i = 0; i < ix.ne && n < 8; i++) {
        const _vs_ckpt_ientry* x = &ix.e[i];
        uint64_t bytes = x->kind == VS_CKPT_BLOB ? x->blob_bytes : vs_dtype_size(x->dtype);
        for (int d = 0; x->kind != VS_CKPT_BLOB && d < x->ndim && bytes <= ((uint64_t)1 << 20); d++)
            bytes *= (uint64_t)x->shape[d];
        if (bytes > ((uint64_t)1 << 20) || x->ndim > VS_TENSOR_MAX_DIMS) continue;
        buf[n] = calloc(1, bytes ? (size_t)bytes : 1);
        FZ_ASSERT(buf[n]);
        e[n].name = x->name;
        if (x->kind == VS_CKPT_BLOB) {
            e[n].kind = VS_CKPT_BLOB;
            e[n].blob = buf[n];
            e[n].blob_bytes = (size_t)bytes;
            want_blob[n] = x->blob_bytes;
        } else { // a tensor or a ZeRO range: loaded whole, replicated on the one rank
            e[n].t.layout.mesh = MESH;
            e[n].t.dtype = x->dtype;
            e[n].t.ndim = x->ndim;
            for (int d = 0; d < x->ndim; d++) e[n].t.shape[d] = x->shape[d];
            e[n].t.data = buf[n];
        }
        n++;
    }
    vs_clear_error();
    r = vs_ckpt_load(CK, DIR_, e, n, loaded);
    if (r == VS_OK) {
        for (int i = 0; i < n; i++) {
            FZ_ASSERT(loaded[i] == 1);
            if (e[i].kind == VS_CKPT_BLOB) FZ_ASSERT(e[i].blob_bytes == want_blob[i]);
        }
    } else {
        FZ_ASSERT(vs_last_error()[0]);
    }
    for (int i = 0; i < n; i++) free(buf[i]);
    _vs_ckpt_index_free(NULL, &ix);
}

static int rank_main(vs_world* w, void* arg)
{
    (void)arg;
    if (vs_mesh_init(w, &(vs_mesh_desc){.shape = {1}}, &MESH) ||
        vs_ckpt_init(&(vs_ckpt_desc){.mesh = MESH, .no_readahead = 1}, &CK)) {
        fprintf(stderr, "fuzz_ckpt_dir: setup: %s\n", vs_last_error());
        abort();
    }
    pthread_mutex_lock(&mu);
    ready = 1;
    pthread_cond_broadcast(&cv);
    for (;;) { // the job lives as long as the process: one input at a time
        while (!pending) pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
        work();
        pthread_mutex_lock(&mu);
        pending = 0, done_ = 1;
        pthread_cond_broadcast(&cv);
    }
    return 0;
}

static void* job(void* arg)
{
    (void)arg;
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = 1;
    d.timeout_s = INFINITY;
    d.log_level = VS_LOG_OFF;
    vs_launch_ex(&d, rank_main, NULL);
    return NULL;
}

/* The folder goes when the fuzzer exits (max_total_time ends in exit()). */
static void cleanup(void)
{
    for (int f = 0; f < 3; f++) {
        char path[400];
        snprintf(path, sizeof path, "%s/%s", DIR_, FILES[f]);
        unlink(path);
    }
    rmdir(DIR_);
}

int LLVMFuzzerInitialize(int* argc, char*** argv)
{
    (void)argc;
    (void)argv;
    const char* base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(DIR_, sizeof DIR_, "%s/vs-fuzz-ckpt-XXXXXX", base);
    FZ_ASSERT(mkdtemp(DIR_) != NULL);
    atexit(cleanup);
    pthread_t t;
    FZ_ASSERT(pthread_create(&t, NULL, job, NULL) == 0);
    pthread_detach(t);
    pthread_mutex_lock(&mu);
    while (!ready) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const uint8_t* p = data;
    size_t left = size;
    const size_t sl = strlen(SEP);
    for (int f = 0; f < 3; f++) {
        char path[400];
        snprintf(path, sizeof path, "%s/%s", DIR_, FILES[f]);
        unlink(path);
        if (f > 0 && p == NULL) continue;
        const uint8_t* end = NULL;
        for (size_t i = 0; left >= sl && i <= left - sl && !end; i++)
            if (!memcmp(p + i, SEP, sl)) end = p + i;
        size_t n = end ? (size_t)(end - p) : left;
        FILE* fp = fopen(path, "wb");
        FZ_ASSERT(fp);
        FZ_ASSERT(fwrite(p, 1, n, fp) == n || n == 0);
        fclose(fp);
        if (end) p = end + sl, left -= n + sl;
        else p = NULL, left = 0;
    }
    pthread_mutex_lock(&mu);
    pending = 1, done_ = 0;
    pthread_cond_broadcast(&cv);
    while (!done_) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return 0;
}
