/* fuzz_mesh.h - meshes of several shapes for the libFuzzer harnesses, built once.

   A mesh needs a world whose communicator has as many ranks as the mesh. A thread
   here runs a vs_launch job (threads transport) of FZ_RANKS ranks: rank 0 builds
   the meshes (vs_mesh_init over the world's communicator is local) and publishes
   them; every rank then parks for the life of the process, so the job and its
   meshes stay valid while the fuzzer runs. A second job of one rank gives the
   1-rank mesh. Include after vescale_mesh.h (with VESCALE_IMPLEMENTATION). */
#ifndef FUZZ_MESH_H
#define FUZZ_MESH_H
#include <pthread.h>
#include <stdlib.h>

#define FZ_UNUSED __attribute__((unused))
#define FZ_RANKS 24
#define FZ_MAX_MESHES 16

typedef struct fz_shape {
    int nranks;
    int shape[VS_MESH_MAX_DIMS];
    const char* names[VS_MESH_MAX_DIMS]; /* NULL: the defaults (1-3 dims) */
} fz_shape;

/* Dim names include a 31-character one (VS_MESH_NAME_MAX - 1) and one-letter ones. */
static const fz_shape fz_shapes[] = {
    {FZ_RANKS, {24}, {NULL}},
    {FZ_RANKS, {2, 12}, {NULL}},
    {FZ_RANKS, {2, 3, 4}, {NULL}},
    {FZ_RANKS, {4, 3, 2}, {"PP", "DP", "TP"}},
    {FZ_RANKS, {2, 2, 2, 3}, {"PP", "DP", "CP", "TP"}},
    {FZ_RANKS, {3, 8}, {"EXPERT_PARALLEL_GROUP_NAME_31ch", "x"}},
    {FZ_RANKS, {1, 24}, {"one", "all"}},
    {FZ_RANKS, {24, 1}, {"all", "one"}},
    {FZ_RANKS, {1, 2, 1, 3, 1, 4, 1, 1}, {"a", "b", "c", "d", "e", "f", "g", "h"}},
    {1, {1}, {NULL}},
    {1, {1, 1, 1}, {NULL}},
};
#define FZ_NSHAPES ((int)(sizeof fz_shapes / sizeof fz_shapes[0]))

static vs_mesh* fz_mesh[FZ_MAX_MESHES];
static int fz_nmesh;
static int fz_built_jobs;
static pthread_mutex_t fz_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fz_cv = PTHREAD_COND_INITIALIZER;

static int fz_rank(vs_world* w, void* arg)
{
    int nranks = *(int*)arg;
    if (vs_world_rank(w) == 0) {
        for (int s = 0; s < FZ_NSHAPES; s++) {
            if (fz_shapes[s].nranks != nranks) continue;
            vs_mesh_desc d;
            memset(&d, 0, sizeof d);
            memcpy(d.shape, fz_shapes[s].shape, sizeof d.shape);
            memcpy(d.dim_names, fz_shapes[s].names, sizeof d.dim_names);
            vs_mesh* m = NULL;
            if (vs_mesh_init(w, &d, &m) != VS_OK) {
                fprintf(stderr, "fuzz_mesh: mesh %d: %s\n", s, vs_last_error());
                abort();
            }
            pthread_mutex_lock(&fz_mu);
            fz_mesh[fz_nmesh++] = m;
            pthread_mutex_unlock(&fz_mu);
        }
        pthread_mutex_lock(&fz_mu);
        fz_built_jobs++;
        pthread_cond_broadcast(&fz_cv);
        pthread_mutex_unlock(&fz_mu);
    }
    pthread_mutex_lock(&fz_mu);
    for (;;) pthread_cond_wait(&fz_cv, &fz_mu); /* park: the world must outlive the meshes */
    return 0;
}

static void* fz_job(void* arg)
{
    vs_launch_desc d;
    memset(&d, 0, sizeof d);
    d.nranks = *(int*)arg;
    d.timeout_s = INFINITY;
    d.log_level = VS_LOG_OFF;
    vs_launch_ex(&d, fz_rank, arg);
    return NULL;
}

/* Builds the meshes once; returns how many there are (fz_mesh[0..n)). */
FZ_UNUSED static int fz_meshes(void)
{
    static int sizes[2] = {FZ_RANKS, 1};
    pthread_mutex_lock(&fz_mu);
    int started = fz_built_jobs > 0 || fz_nmesh > 0;
    pthread_mutex_unlock(&fz_mu);
    if (!started) {
        for (int j = 0; j < 2; j++) {
            pthread_t t;
            if (pthread_create(&t, NULL, fz_job, &sizes[j]) != 0) abort();
            pthread_detach(t);
            pthread_mutex_lock(&fz_mu);
            while (fz_built_jobs < j + 1) pthread_cond_wait(&fz_cv, &fz_mu);
            pthread_mutex_unlock(&fz_mu);
        }
    }
    return fz_nmesh;
}

/* Input reader: bytes are taken from the front; past the end reads give zeros. */
typedef struct fz_in {
    const uint8_t* p;
    size_t n;
} fz_in;

FZ_UNUSED static uint64_t fz_take(fz_in* in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) {
        v = v << 8 | (in->n ? *in->p : 0);
        if (in->n) in->p++, in->n--;
    }
    return v;
}

/* The rest of the input as a NUL-terminated string (malloc'd). */
FZ_UNUSED static char* fz_rest(fz_in* in)
{
    char* s = (char*)malloc(in->n + 1);
    if (!s) abort();
    memcpy(s, in->p, in->n);
    s[in->n] = 0;
    in->p += in->n;
    in->n = 0;
    return s;
}

#define FZ_ASSERT(c)                      \
    do {                                  \
        if (!(c)) __builtin_trap();       \
    } while (0)

#endif
