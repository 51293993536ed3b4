/* vescale_ckpt.h - v0.1.0 (2026-11-23) - distributed checkpoint: sharded, atomic save and resharding load.

   Status: skeleton. This header compiles and links so trainers can include it;
   its API arrives with its own issue. Everything it builds on is in
   vescale_mesh.h, which it includes.

   Do this in *one* C or C++ file:
       #define VESCALE_IMPLEMENTATION        (every part), or
       #define VESCALE_CKPT_IMPLEMENTATION   (this part only; the mesh
                                              implementation must then be
                                              enabled somewhere as well)
       #include "vescale_ckpt.h"
   (VESCALE_STATIC, see vescale_mesh.h, implies the implementation.)

   Platforms and link lines: as vescale_mesh.h (POSIX.1-2008 + pthreads;
   -lpthread -lm). MIT license (end of file).
*/
/* Before the guard, so a later include with VESCALE_IMPLEMENTATION still works. */
/* VESCALE_STATIC: every part included is implemented here, static inline. */
#if defined(VESCALE_STATIC) && !defined(VESCALE_IMPLEMENTATION)
#define VESCALE_IMPLEMENTATION
#endif
#if defined(VESCALE_IMPLEMENTATION) && !defined(VESCALE_CKPT_IMPLEMENTATION)
#define VESCALE_CKPT_IMPLEMENTATION
#endif

#ifndef VESCALE_CKPT_INCLUDED
#define VESCALE_CKPT_INCLUDED

#include "vescale_mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

// >>ckpt-api -------------------------------------------------------------------

/* The VESCALE_VERSION_NUMBER this part was built with (catches a part compiled
   from a different release than vescale_mesh.h). */
VS_API int vs_ckpt_version(void);

#define VS_CKPT_NAME_MAX 256 // bytes of an entry name, with the NUL

typedef enum vs_ckpt_kind {
    VS_CKPT_TENSOR = 0, // t.data is this rank's whole shard of t (its box under t.layout)
    VS_CKPT_RANGE,      // t.data holds elements [range_begin, range_end) of this rank's box,
                        // flattened row-major: a ZeRO shard of an optimizer state
    VS_CKPT_BLOB        // bytes: small state (step, RNG, data position, plan text)
} vs_ckpt_kind;

/* One named thing to save or load. Names are unique in a checkpoint.
   TENSOR/RANGE: t gives the global shape, dtype, layout (on any mesh or
   submesh of the saving job: a PP stage's parameters live on that stage's
   DP x TP submesh) and this rank's data. Partial placements are refused:
   reduce first. On save, several ranks may hold the same box (replicated
   dims) or the same range: it is written once, by one of them, chosen so the
   work spreads over the ranks. skip = 1: this rank takes no part in the entry
   (e.g. a ZeRO range it does not own as primary); the other ranks still save it.
   BLOB: blob/blob_bytes; on save every rank that lists it must give the same
   bytes (one writes them); on load blob_bytes is the capacity, and the entry's
   stored size comes back in blob_bytes. */
typedef struct vs_ckpt_entry {
    const char* name;
    vs_ckpt_kind kind;
    vs_dtensor t;
    int64_t range_begin, range_end; // RANGE
    void* blob;                     // BLOB
    size_t blob_bytes;
    int device; // t.data is CUDA device memory (NCCL builds; copied through pinned host memory)
    int skip;
} vs_ckpt_entry;

typedef struct vs_ckpt vs_ckpt;

typedef struct vs_ckpt_desc {
    vs_mesh* mesh;            // required: every rank of it saves and loads together
    int no_checksum;          // 0: CRC32C of every 1 MiB block of every piece, verified on load
    size_t async_max_bytes;   // async saves copy at most this much host memory (0: 4 GiB)
    int keep_last;            // vs_ckpt_save into a folder keeps the newest N (0: all)
} vs_ckpt_desc;

/* Collective over desc->mesh: makes the checkpointer (its own communicator, so
   an async save's background writes never touch the trainer's). */
VS_API vs_result vs_ckpt_init(const vs_ckpt_desc* desc, vs_ckpt** out);
VS_API vs_result vs_ckpt_free(vs_ckpt* ck); // waits for an async save first

typedef struct vs_ckpt_save_opts {
    int async;     // 1: copy the buffers and return; a background thread writes (vs_ckpt_wait)
    int overwrite; // path exists: replace it, the old one durable until the new one is
} vs_ckpt_save_opts;

/* Saves the entries into the checkpoint directory `path` (collective; every
   rank gives its own entries, which may differ between PP stages). Written
   under a temporary name, every file fsynced, then renamed into place and the
   parent fsynced: a crash at any point leaves earlier checkpoints intact and
   path either complete or absent. An existing path is VS_ERR_STATE unless
   opts->overwrite. */
VS_API vs_result vs_ckpt_save(vs_ckpt* ck, const char* path, const vs_ckpt_entry* entries, int n,
                              const vs_ckpt_save_opts* opts);
/* Joins an async save: its result (errors of the background write surface here). */
VS_API vs_result vs_ckpt_wait(vs_ckpt* ck);

/* Loads the entries from `path` (collective): each rank gives what it needs
   (same names; any mesh, layouts and ranges) and reads only the bytes it needs,
   verifying checksums. loaded (may be NULL): n flags, 1 for each entry written
   into the caller's buffer; an error leaves the others untouched. */
VS_API vs_result vs_ckpt_load(vs_ckpt* ck, const char* path, vs_ckpt_entry* entries, int n, int* loaded);

/* Host memory the last async save copied into, and its bound. */
VS_API vs_result vs_ckpt_async_memory(const vs_ckpt* ck, size_t* used, size_t* bound);

// >>ckpt-commit ----------------------------------------------------------------

/* The newest complete checkpoint in `folder` (by name order of its
   subdirectories: name them so, e.g. "step-000100"), into out[cap]; partial
   ones (a temporary name, no complete index) are never returned.
   VS_ERR_INVALID naming the folder when there is none. Not collective. */
VS_API vs_result vs_ckpt_latest(const char* folder, char* out, size_t cap);
/* Deletes all but the newest `keep` complete checkpoints of `folder`, and
   leftovers of interrupted saves. Not collective: call it on one rank. */
VS_API vs_result vs_ckpt_retain(const char* folder, int keep);

// >>ckpt-ddp -------------------------------------------------------------------

struct vs_ddp;
/* The whole state of a vs_ddp (parameters, fp32 masters, optimizer moments, the
   step count) as entries "<prefix><param>", "<prefix><param>.master",
   ".exp_avg", ".exp_avg_sq", ".momentum", "<prefix>__step", in global,
   unflattened form: any DP size, ZeRO stage, TP layout or PP split loads it.
   Collective (as vs_ckpt_save / vs_ckpt_load). Needs vescale_ddp.h included
   before this header's implementation. */
VS_API vs_result vs_ckpt_save_ddp(vs_ckpt* ck, const char* path, struct vs_ddp* ddp, const char* prefix,
                                  const vs_ckpt_entry* extra, int nextra, const vs_ckpt_save_opts* opts);
VS_API vs_result vs_ckpt_load_ddp(vs_ckpt* ck, const char* path, struct vs_ddp* ddp, const char* prefix,
                                  vs_ckpt_entry* extra, int nextra);

#ifdef __cplusplus
}
#endif
#endif // VESCALE_CKPT_INCLUDED

#if defined(VESCALE_CKPT_IMPLEMENTATION) && !defined(VESCALE_CKPT_IMPLEMENTED)
#define VESCALE_CKPT_IMPLEMENTED
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <pthread.h>
#include <time.h>
#ifdef __cplusplus
extern "C" {
#endif

#define _VS_CKPT_PRIVATE static _VS_UNUSED

// >>ckpt-format ----------------------------------------------------------------
/* The on-disk format (the format helper's section; the rest of the file uses
   only what is declared here).

   A checkpoint is a directory:
       index.json                  the index (below), written last
       shard-00003.safetensors     what mesh rank 3 wrote (only ranks that wrote something)
   Each shard file is a valid safetensors file: 8-byte little-endian header
   length N, N bytes of JSON (padded with spaces to a multiple of 8, at most
   100 MB), then the data. Its tensors are the pieces the rank wrote, keyed
   "<entry name>#<piece number>", dtype one of F32 F16 BF16 F64 I32 I64 U8, shape
   the piece's box shape (a range piece or a blob: [count]), data_offsets
   contiguous from 0 in file order with no holes; "__metadata__" holds
   {"format": "vescale", "rank": "<r>"}.

   index.json:
   {"format": "vescale-ckpt", "version": 1,
    "mesh": {"shape": [2, 2, 2], "dims": ["PP", "DP", "TP"]},
    "checksum": {"kind": "crc32c", "block": 1048576},     (or "checksum": null)
    "files": [{"name": "shard-00000.safetensors", "bytes": 123456}, ...],
    "entries": [
      {"name": "w1", "kind": "tensor", "dtype": "f32", "shape": [64, 32],
       "layout": "[Shard(0), Replicate]",                 (as saved; for ls)
       "pieces": [{"file": 0, "key": "w1#0", "offset": [0, 0], "box": [32, 32],
                   "data": [256, 4352], "crc32c": ["e3069283", ...]}, ...]},
      {"name": "adam.m.w1", "kind": "range", ...
       "pieces": [{..., "offset": [0, 0], "box": [32, 32], "range": [0, 512], ...}]},
      {"name": "step", "kind": "blob", "bytes": 8,
       "pieces": [{"file": 0, "key": "step#0", "data": [0, 8], "crc32c": [...]}]}]}
   "data" is [begin, end) in bytes from the start of the file (absolute, so a
   reader preads it without parsing the shard's header); "crc32c" has one
   lower-case hex CRC32C per block of the piece (the last one short). A box is
   given by its global offset and shape; a range piece holds elements
   [range[0], range[1]) of its box, flattened row-major. Entry kinds "tensor",
   "range" and "blob"; dtypes are vs_dtype_name's. */

#define _VS_CKPT_MAXD VS_TENSOR_MAX_DIMS

/* CRC32C (Castagnoli, reflected 0x82F63B78), continuing from crc (0 to start):
   _vs_crc32c(0, "123456789", 9) == 0xE3069283. */
_VS_CKPT_PRIVATE uint32_t _vs_crc32c(uint32_t crc, const void* p, size_t n);

/* A growing text buffer through the world's hooks; oom set on failure. */
typedef struct _vs_sbuf {
    const vs_world* w;
    char* p;
    size_t len, cap;
    int oom;
} _vs_sbuf;
_VS_CKPT_PRIVATE _VS_PRINTF(2, 3) void _vs_sb_printf(_vs_sbuf* b, const char* fmt, ...);
_VS_CKPT_PRIVATE void _vs_sb_json_str(_vs_sbuf* b, const char* s); // a quoted, escaped JSON string
_VS_CKPT_PRIVATE void _vs_sb_free(_vs_sbuf* b);

/* safetensors */
typedef struct _vs_st_tensor {
    const char* key;
    vs_dtype dtype;
    int ndim;
    int64_t shape[_VS_CKPT_MAXD];
    uint64_t begin, end; // data_offsets, relative to the data section
} _vs_st_tensor;
_VS_CKPT_PRIVATE const char* _vs_st_dtype_name(vs_dtype dt); // "F32", ...; NULL for none
/* The whole header (8-byte length + padded JSON) for tensors t[0..n) whose
   offsets are contiguous from 0 in order (checked), with metadata given as a
   JSON object text (may be NULL). *out through the world's hooks. */
_VS_CKPT_PRIVATE vs_result _vs_st_header(const vs_world* w, const _vs_st_tensor* t, int n, const char* metadata,
                                         char** out, size_t* len);
/* Parses and checks a safetensors file's header (json, json_len bytes; the file
   has file_size bytes): the format's rules (dtype names, shapes, offsets
   contiguous from 0 with no holes or overlaps, matching dtype x shape, inside
   the file, header <= 100 MB). *out: n tensors (keys point into *arena), free
   both with vs_free(w, ...). Errors name `label` (the file) and the key. */
_VS_CKPT_PRIVATE vs_result _vs_st_parse(const vs_world* w, const char* label, const char* json, size_t json_len,
                                        uint64_t file_size, _vs_st_tensor** out, int* n, char** arena);

/* The index, parsed. */
typedef struct _vs_ckpt_piece {
    int file;
    char* key;
    int64_t off[_VS_CKPT_MAXD], box[_VS_CKPT_MAXD]; // tensor/range pieces
    int64_t range_begin, range_end;                 // range pieces; else 0, 0
    uint64_t data_begin, data_end;                  // absolute bytes in the file
    uint32_t* crc;                                  // ceil(bytes / block) CRCs, or NULL
    int ncrc;
} _vs_ckpt_piece;

typedef struct _vs_ckpt_ientry {
    char* name;
    vs_ckpt_kind kind;
    vs_dtype dtype; // blob: VS_U8
    int ndim;
    int64_t shape[_VS_CKPT_MAXD];
    char* layout;      // may be NULL
    uint64_t blob_bytes;
    _vs_ckpt_piece* pieces;
    int npieces;
} _vs_ckpt_ientry;

typedef struct _vs_ckpt_index {
    int mesh_ndims;
    int mesh_shape[VS_MESH_MAX_DIMS];
    char mesh_dims[VS_MESH_MAX_DIMS][VS_MESH_NAME_MAX];
    uint64_t block; // checksum block bytes; 0: no checksums
    int nfiles;
    char** files;
    uint64_t* file_bytes;
    _vs_ckpt_ientry* e;
    int ne;
} _vs_ckpt_index;

/* Parses and checks index.json (len bytes): the schema above; names unique;
   every piece inside its file (file_bytes), its box inside the entry's shape,
   its bytes == box numel (or range length) x dtype size, ranges inside their
   box, the CRC count matching the block size; pieces of one tensor entry do not
   overlap (boxes; ranges of one box) -- coverage of the whole tensor is the
   loader's check. Errors name `label` and the entry. Free with _vs_ckpt_index_free. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_index_parse(const vs_world* w, const char* label, const char* text, size_t len,
                                                _vs_ckpt_index* out);
/* index -> JSON text (parses back to the same index). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_index_write(const _vs_ckpt_index* ix, _vs_sbuf* out);
_VS_CKPT_PRIVATE void _vs_ckpt_index_free(const vs_world* w, _vs_ckpt_index* ix);

/* (the format's implementation) */
_VS_CKPT_PRIVATE uint32_t _vs_crc32c(uint32_t crc, const void* p, size_t n)
{
    (void)p, (void)n;
    return crc;
}
_VS_CKPT_PRIVATE void _vs_sb_printf(_vs_sbuf* b, const char* fmt, ...) { (void)b, (void)fmt; }
_VS_CKPT_PRIVATE void _vs_sb_json_str(_vs_sbuf* b, const char* s) { (void)b, (void)s; }
_VS_CKPT_PRIVATE void _vs_sb_free(_vs_sbuf* b) { (void)b; }
_VS_CKPT_PRIVATE const char* _vs_st_dtype_name(vs_dtype dt) { (void)dt; return NULL; }
_VS_CKPT_PRIVATE vs_result _vs_st_header(const vs_world* w, const _vs_st_tensor* t, int n, const char* metadata,
                                         char** out, size_t* len)
{
    (void)w, (void)t, (void)n, (void)metadata, (void)out, (void)len;
    return vs_set_error(VS_ERR_UNSUPPORTED, "not yet");
}
_VS_CKPT_PRIVATE vs_result _vs_st_parse(const vs_world* w, const char* label, const char* json, size_t json_len,
                                        uint64_t file_size, _vs_st_tensor** out, int* n, char** arena)
{
    (void)w, (void)label, (void)json, (void)json_len, (void)file_size, (void)out, (void)n, (void)arena;
    return vs_set_error(VS_ERR_UNSUPPORTED, "not yet");
}
_VS_CKPT_PRIVATE vs_result _vs_ckpt_index_parse(const vs_world* w, const char* label, const char* text, size_t len,
                                                _vs_ckpt_index* out)
{
    (void)w, (void)label, (void)text, (void)len, (void)out;
    return vs_set_error(VS_ERR_UNSUPPORTED, "not yet");
}
_VS_CKPT_PRIVATE vs_result _vs_ckpt_index_write(const _vs_ckpt_index* ix, _vs_sbuf* out)
{
    (void)ix, (void)out;
    return vs_set_error(VS_ERR_UNSUPPORTED, "not yet");
}
_VS_CKPT_PRIVATE void _vs_ckpt_index_free(const vs_world* w, _vs_ckpt_index* ix) { (void)w, (void)ix; }

// >>ckpt-commit ----------------------------------------------------------------

#define _VS_CKPT_INDEX "index.json"
#define _VS_CKPT_TMP ".tmp-"  // an unfinished save: <path>.tmp-<nonce>
#define _VS_CKPT_OLD ".old-"  // a replaced checkpoint, until the new one is durable

_VS_CKPT_PRIVATE vs_result _vs_ckpt_fsync_path(const char* path, int dir)
{
    int fd = open(path, dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0) return vs_set_error(VS_ERR_IO, "fsync: cannot open %s: %s", path, strerror(errno));
    int r = fsync(fd);
    int e = errno;
    close(fd);
    return r ? vs_set_error(VS_ERR_IO, "fsync %s: %s", path, strerror(e)) : VS_OK;
}

/* The directory that holds path ("." when path has no slash). */
_VS_CKPT_PRIVATE void _vs_ckpt_parent(const char* path, char* out, size_t cap)
{
    const char* s = strrchr(path, '/');
    if (!s) snprintf(out, cap, ".");
    else if (s == path) snprintf(out, cap, "/");
    else snprintf(out, cap, "%.*s", (int)(s - path), path);
}

/* Deletes a checkpoint directory (its files, then itself). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_rmdir(const char* dir)
{
    DIR* d = opendir(dir);
    if (!d) return errno == ENOENT ? VS_OK : vs_set_error(VS_ERR_IO, "cannot open %s: %s", dir, strerror(errno));
    struct dirent* de;
    char p[4096];
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
    if (rmdir(dir)) return vs_set_error(VS_ERR_IO, "cannot remove %s: %s", dir, strerror(errno));
    return VS_OK;
}

_VS_CKPT_PRIVATE int _vs_ckpt_complete(const char* folder, const char* name)
{
    if (name[0] == '.' || strstr(name, _VS_CKPT_TMP) || strstr(name, _VS_CKPT_OLD)) return 0;
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s/" _VS_CKPT_INDEX, folder, name);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

static int _vs_ckpt_strcmp_desc(const void* a, const void* b)
{
    return strcmp(*(const char* const*)b, *(const char* const*)a);
}

/* The complete checkpoints of folder, newest (greatest name) first. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_list(const char* folder, char*** names, int* n, int leftovers)
{
    *names = NULL;
    *n = 0;
    DIR* d = opendir(folder);
    if (!d) return vs_set_error(VS_ERR_IO, "cannot open the folder %s: %s", folder, strerror(errno));
    int cap = 0;
    struct dirent* de;
    vs_result r = VS_OK;
    while ((de = readdir(d)) != NULL && !r) {
        int left = strstr(de->d_name, _VS_CKPT_TMP) || strstr(de->d_name, _VS_CKPT_OLD);
        if (leftovers ? !left : !_vs_ckpt_complete(folder, de->d_name)) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char** nn = (char**)realloc(*names, sizeof(char*) * (size_t)cap); // (freed by the caller with free)
            if (!nn) r = vs_set_error(VS_ERR_NOMEM, "out of memory listing %s", folder);
            else *names = nn;
        }
        if (!r && !((*names)[*n] = strdup(de->d_name))) r = vs_set_error(VS_ERR_NOMEM, "out of memory listing %s", folder);
        if (!r) (*n)++;
    }
    closedir(d);
    if (*n) qsort(*names, (size_t)*n, sizeof(char*), _vs_ckpt_strcmp_desc);
    return r;
}

_VS_CKPT_PRIVATE void _vs_ckpt_list_free(char** names, int n)
{
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

VS_API vs_result vs_ckpt_latest(const char* folder, char* out, size_t cap)
{
    if (!folder || !out) return vs_set_error(VS_ERR_NULL, "vs_ckpt_latest: %s is NULL", folder ? "out" : "folder");
    char** names;
    int n;
    vs_result r = _vs_ckpt_list(folder, &names, &n, 0);
    if (!r && !n) r = vs_set_error(VS_ERR_INVALID, "vs_ckpt_latest: no complete checkpoint in %s", folder);
    if (!r && (size_t)snprintf(out, cap, "%s/%s", folder, names[0]) >= cap)
        r = vs_set_error(VS_ERR_INVALID, "vs_ckpt_latest: %zu bytes are too few for %s/%s", cap, folder, names[0]);
    _vs_ckpt_list_free(names, n);
    return r;
}

VS_API vs_result vs_ckpt_retain(const char* folder, int keep)
{
    if (!folder) return vs_set_error(VS_ERR_NULL, "vs_ckpt_retain: folder is NULL");
    if (keep < 1) return vs_set_error(VS_ERR_INVALID, "vs_ckpt_retain: keep = %d (at least 1)", keep);
    char** names;
    int n;
    char p[4096];
    _VS_TRY(_vs_ckpt_list(folder, &names, &n, 0));
    vs_result r = VS_OK;
    for (int i = keep; i < n && !r; i++) {
        snprintf(p, sizeof p, "%s/%s", folder, names[i]);
        r = _vs_ckpt_rmdir(p);
    }
    _vs_ckpt_list_free(names, n);
    if (r || (r = _vs_ckpt_list(folder, &names, &n, 1)) != VS_OK) return r;
    for (int i = 0; i < n && !r; i++) { // leftovers of interrupted saves
        snprintf(p, sizeof p, "%s/%s", folder, names[i]);
        r = _vs_ckpt_rmdir(p);
    }
    _vs_ckpt_list_free(names, n);
    return r ? r : _vs_ckpt_fsync_path(folder, 1);
}

/* Puts the finished temporary directory in place (rank 0): everything in it is
   durable already; an old checkpoint at path is renamed away, not deleted,
   until the new one's rename is durable. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_commit(const char* tmp, const char* path, const char* nonce, int overwrite)
{
    char parent[4096], old[4096];
    _vs_ckpt_parent(path, parent, sizeof parent);
    _VS_TRY(_vs_ckpt_fsync_path(tmp, 1));
    struct stat st;
    int exists = stat(path, &st) == 0;
    if (exists && !overwrite) return vs_set_error(VS_ERR_STATE, "%s exists (overwrite not asked)", path);
    if (exists) {
        snprintf(old, sizeof old, "%s" _VS_CKPT_OLD "%s", path, nonce);
        if (rename(path, old)) return vs_set_error(VS_ERR_IO, "rename %s -> %s: %s", path, old, strerror(errno));
    }
    if (rename(tmp, path)) {
        vs_result r = vs_set_error(VS_ERR_IO, "rename %s -> %s: %s", tmp, path, strerror(errno));
        if (exists) rename(old, path);
        return r;
    }
    _VS_TRY(_vs_ckpt_fsync_path(parent, 1));
    if (exists) _vs_ckpt_rmdir(old);
    return VS_OK;
}

// >>ckpt-api -------------------------------------------------------------------

VS_API int vs_ckpt_version(void) { return VESCALE_VERSION_NUMBER; }

struct vs_ckpt {
    vs_mesh* mesh;
    vs_world* w;
    vs_comm* comm; // a duplicate of the mesh's: async writes never meet the trainer's calls
    int rank, size;
    vs_ckpt_desc desc;
    // the async save in flight
    pthread_t thread;
    int running;
    vs_result async_result;
    char async_msg[512];
    struct _vs_ckpt_job* job;
    size_t async_used;
};

VS_API vs_result vs_ckpt_init(const vs_ckpt_desc* desc, vs_ckpt** out)
{
    if (!out) return vs_set_error(VS_ERR_NULL, "vs_ckpt_init: out is NULL");
    *out = NULL;
    if (!desc || !desc->mesh) return vs_set_error(VS_ERR_NULL, "vs_ckpt_init: %s is NULL", desc ? "desc.mesh" : "desc");
    if (desc->keep_last < 0) return vs_set_error(VS_ERR_INVALID, "vs_ckpt_init: keep_last = %d", desc->keep_last);
    vs_world* w = vs_mesh_world(desc->mesh);
    vs_ckpt* ck = (vs_ckpt*)vs_alloc(w, sizeof *ck);
    if (!ck) return vs_set_error(VS_ERR_NOMEM, "vs_ckpt_init: out of memory");
    memset(ck, 0, sizeof *ck);
    ck->mesh = desc->mesh;
    ck->w = w;
    ck->desc = *desc;
    if (!ck->desc.async_max_bytes) ck->desc.async_max_bytes = (size_t)4 << 30;
    vs_comm* mc = vs_mesh_comm(desc->mesh);
    ck->rank = vs_comm_rank(mc);
    ck->size = vs_comm_size(mc);
    vs_result r = vs_comm_split(mc, 0, ck->rank, &ck->comm);
    if (!r) r = vs_mesh_retain(desc->mesh);
    if (r) {
        if (ck->comm) vs_comm_free(ck->comm);
        vs_free(w, ck);
        return vs_set_error(r, "vs_ckpt_init: %s", vs_last_error());
    }
    *out = ck;
    return VS_OK;
}

/* A piece as every rank learns it from the all-gather (one per rank and entry). */
typedef struct _vs_ckpt_rec {
    char name[VS_CKPT_NAME_MAX];
    int rank;     // the rank that holds it
    int kind, dtype, ndim;
    int64_t shape[_VS_CKPT_MAXD];
    int64_t off[_VS_CKPT_MAXD], box[_VS_CKPT_MAXD];
    int64_t rb, re;     // range; tensor: 0, numel(box)
    uint64_t bytes;     // its bytes
    uint32_t blob_crc;  // blobs: every holder must give the same bytes
    char layout[128];
    int entry;          // index into the holder's entries
    // decided by every rank alike
    int writer;         // 1: this record's rank writes it
    int dup;            // 1: another record with the same content is written instead
    int key;            // piece number within the entry (writers only)
    // filled after writing (writers)
    uint64_t data_begin, data_end;
} _vs_ckpt_rec;

_VS_CKPT_PRIVATE int64_t _vs_ckpt_numel(int ndim, const int64_t* s)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= s[d];
    return n;
}

/* Checks one entry on this rank and fills its record (no communication). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_entry_rec(const char* fn, const vs_ckpt_entry* e, int i, int rank, _vs_ckpt_rec* rc)
{
    memset(rc, 0, sizeof *rc);
    if (!e->name || !e->name[0] || strlen(e->name) >= VS_CKPT_NAME_MAX)
        return vs_set_error(VS_ERR_INVALID, "%s: entry %d: name is NULL, empty or longer than %d bytes", fn, i,
                            VS_CKPT_NAME_MAX - 1);
    for (const char* c = e->name; *c; c++)
        if ((unsigned char)*c < 32 || *c == '#' || *c == '"' || *c == '\\')
            return vs_set_error(VS_ERR_INVALID, "%s: entry \"%s\": names may not hold control characters, #, \" or \\",
                                fn, e->name);
    snprintf(rc->name, sizeof rc->name, "%s", e->name);
    rc->rank = rank;
    rc->kind = (int)e->kind;
    rc->entry = i;
    if (e->kind == VS_CKPT_BLOB) {
        if (e->blob_bytes && !e->blob)
            return vs_set_error(VS_ERR_NULL, "%s: entry \"%s\": blob is NULL for %zu bytes", fn, e->name, e->blob_bytes);
        rc->dtype = VS_U8;
        rc->ndim = 1;
        rc->shape[0] = rc->box[0] = (int64_t)e->blob_bytes;
        rc->re = (int64_t)e->blob_bytes;
        rc->bytes = e->blob_bytes;
        rc->blob_crc = _vs_crc32c(0, e->blob, e->blob_bytes);
        return VS_OK;
    }
    if (e->kind != VS_CKPT_TENSOR && e->kind != VS_CKPT_RANGE)
        return vs_set_error(VS_ERR_INVALID, "%s: entry \"%s\": kind %d is not a vs_ckpt_kind", fn, e->name, (int)e->kind);
    const vs_dtensor* t = &e->t;
    size_t es = vs_dtype_size(t->dtype);
    if (!es) return vs_set_error(VS_ERR_INVALID, "%s: entry \"%s\": dtype %d", fn, e->name, (int)t->dtype);
    if (t->ndim < 0 || t->ndim > _VS_CKPT_MAXD)
        return vs_set_error(VS_ERR_INVALID, "%s: entry \"%s\": ndim %d (0..%d)", fn, e->name, t->ndim, _VS_CKPT_MAXD);
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 0 || t->shape[d] > ((int64_t)1 << 48))
            return vs_set_error(VS_ERR_INVALID, "%s: entry \"%s\": shape[%d] = %lld", fn, e->name, d,
                                (long long)t->shape[d]);
    if (!t->layout.mesh) return vs_set_error(VS_ERR_NULL, "%s: entry \"%s\": t.layout.mesh is NULL", fn, e->name);
    vs_result r = vs_layout_check(&t->layout, t->ndim);
    if (r) return vs_set_error(r, "%s: entry \"%s\": %s", fn, e->name, vs_last_error());
    for (int d = 0; d < vs_mesh_ndims(t->layout.mesh); d++)
        if (t->layout.p[d].kind == VS_PLACE_PARTIAL)
            return vs_set_error(VS_ERR_UNSUPPORTED, "%s: entry \"%s\" is Partial on mesh dim %d: reduce it first", fn,
                                e->name, d);
    r = vs_layout_local(&t->layout, t->ndim, t->shape, vs_mesh_rank(t->layout.mesh), rc->box, rc->off);
    if (r) return vs_set_error(r, "%s: entry \"%s\": %s", fn, e->name, vs_last_error());
    rc->dtype = (int)t->dtype;
    rc->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) rc->shape[d] = t->shape[d];
    int64_t n = _vs_ckpt_numel(t->ndim, rc->box);
    rc->rb = 0;
    rc->re = n;
    if (e->kind == VS_CKPT_RANGE) {
        if (e->range_begin < 0 || e->range_begin > e->range_end || e->range_end > n)
            return vs_set_error(VS_ERR_INVALID, "%s: entry \"%s\": range [%lld, %lld) outside this rank's %lld elements",
                                fn, e->name, (long long)e->range_begin, (long long)e->range_end, (long long)n);
        rc->rb = e->range_begin;
        rc->re = e->range_end;
    }
    rc->bytes = (uint64_t)(rc->re - rc->rb) * es;
    if (rc->bytes && !t->data) return vs_set_error(VS_ERR_NULL, "%s: entry \"%s\": t.data is NULL", fn, e->name);
    vs_layout_format(&t->layout, rc->layout, sizeof rc->layout);
    return VS_OK;
}

/* 1 when two records hold the same elements (the same content, for a blob). */
_VS_CKPT_PRIVATE int _vs_ckpt_same_piece(const _vs_ckpt_rec* a, const _vs_ckpt_rec* b)
{
    if (strcmp(a->name, b->name) || a->rb != b->rb || a->re != b->re) return 0;
    if (a->kind == VS_CKPT_BLOB) return a->blob_crc == b->blob_crc && a->bytes == b->bytes;
    for (int d = 0; d < a->ndim; d++)
        if (a->off[d] != b->off[d] || a->box[d] != b->box[d]) return 0;
    return 1;
}

static int _vs_ckpt_rec_cmp(const void* x, const void* y)
{
    const _vs_ckpt_rec* a = (const _vs_ckpt_rec*)x;
    const _vs_ckpt_rec* b = (const _vs_ckpt_rec*)y;
    int c = strcmp(a->name, b->name);
    if (c) return c;
    for (int d = 0; d < a->ndim && d < b->ndim; d++)
        if (a->off[d] != b->off[d]) return a->off[d] < b->off[d] ? -1 : 1;
    if (a->rb != b->rb) return a->rb < b->rb ? -1 : 1;
    return a->rank - b->rank;
}

/* Every rank decides alike: which records are written and by whom (among the
   ranks holding the same piece, by a hash of the name and the piece, so the
   work spreads), piece numbers, and whether the pieces cover each entry. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_plan(const char* fn, _vs_ckpt_rec* rc, int n)
{
    qsort(rc, (size_t)n, sizeof *rc, _vs_ckpt_rec_cmp);
    int e0 = 0;
    while (e0 < n) {
        int e1 = e0;
        while (e1 < n && !strcmp(rc[e1].name, rc[e0].name)) e1++;
        const _vs_ckpt_rec* f = &rc[e0];
        for (int i = e0 + 1; i < e1; i++) { // the ranks agree on what the entry is
            const _vs_ckpt_rec* g = &rc[i];
            int same = g->kind == f->kind && g->dtype == f->dtype && g->ndim == f->ndim;
            for (int d = 0; same && d < f->ndim; d++) same = g->shape[d] == f->shape[d];
            if (f->kind == VS_CKPT_BLOB && same && g->bytes != f->bytes) same = 0;
            if (!same)
                return vs_set_error(VS_ERR_MISMATCH,
                                    "%s: entry \"%s\": rank %d and rank %d give different kinds, dtypes, shapes or blob "
                                    "sizes",
                                    fn, f->name, f->rank, g->rank);
            if (f->kind == VS_CKPT_BLOB && g->blob_crc != f->blob_crc)
                return vs_set_error(VS_ERR_MISMATCH, "%s: blob \"%s\": rank %d and rank %d give different bytes", fn,
                                    f->name, f->rank, g->rank);
        }
        uint64_t h = 1469598103934665603ull;
        for (const char* c = f->name; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
        int key = 0;
        int64_t covered = 0;
        for (int i = e0; i < e1;) {
            int j = i;
            while (j < e1 && _vs_ckpt_same_piece(&rc[i], &rc[j])) j++;
            int pick = i + (int)((h + (uint64_t)key * 0x9E3779B97F4A7C15ull) % (uint64_t)(j - i));
            for (int k = i; k < j; k++) {
                rc[k].dup = k != pick;
                rc[k].writer = k == pick && rc[k].bytes > 0;
                rc[k].key = key;
            }
            covered += rc[i].re - rc[i].rb;
            if (rc[i].bytes > 0) key++;
            i = j;
        }
        int64_t total = f->kind == VS_CKPT_BLOB ? (int64_t)f->bytes : _vs_ckpt_numel(f->ndim, f->shape);
        if (covered != total) // overlapping ranges or missing pieces
            return vs_set_error(VS_ERR_INVALID,
                                "%s: entry \"%s\": the ranks' pieces hold %lld elements, the tensor has %lld (ranges "
                                "missing, skipped, or overlapping)",
                                fn, f->name, (long long)covered, (long long)total);
        e0 = e1;
    }
    return VS_OK;
}

/* All ranks' records, as every rank sees them (all-gather of variable size). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_gather(vs_ckpt* ck, const void* mine, size_t bytes, void** all, size_t** counts,
                                           size_t** displs, size_t* total)
{
    const int P = ck->size;
    *all = NULL;
    *counts = (size_t*)vs_alloc(ck->w, sizeof(size_t) * (size_t)P);
    *displs = (size_t*)vs_alloc(ck->w, sizeof(size_t) * (size_t)P);
    uint64_t* c64 = (uint64_t*)vs_alloc(ck->w, sizeof(uint64_t) * (size_t)P);
    uint64_t b64 = bytes;
    vs_result r = !*counts || !*displs || !c64 ? vs_set_error(VS_ERR_NOMEM, "checkpoint: out of memory") : VS_OK;
    if (!r) r = vs_all_gather(ck->comm, &b64, c64, 1, VS_I64, NULL);
    *total = 0;
    for (int i = 0; !r && i < P; i++) {
        (*counts)[i] = (size_t)c64[i];
        (*displs)[i] = *total;
        *total += (size_t)c64[i];
    }
    if (!r && !(*all = vs_alloc(ck->w, *total ? *total : 1))) r = vs_set_error(VS_ERR_NOMEM, "checkpoint: out of memory");
    if (!r) r = vs_all_gatherv(ck->comm, mine, *all, *counts, *displs, VS_U8, NULL);
    vs_free(ck->w, c64);
    return r;
}

/* Every rank's status: the first failing rank's result (and its rank), or VS_OK. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_agree(vs_ckpt* ck, vs_result mine, int* who)
{
    int64_t v[2] = {mine ? 1 : 0, mine ? -(int64_t)mine : 0}, all[2];
    int64_t me = mine ? (int64_t)(ck->size - ck->rank) : 0, first;
    vs_result r = vs_all_reduce(ck->comm, v, all, 2, VS_I64, VS_OP_MAX, NULL);
    if (!r) r = vs_all_reduce(ck->comm, &me, &first, 1, VS_I64, VS_OP_MAX, NULL);
    if (r) return r;
    *who = first ? ck->size - (int)first : -1;
    return all[0] ? (vs_result)(-all[1]) : VS_OK;
}

/* pwrite all of it, or an error naming the file (ENOSPC: the disk is full). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_pwrite(int fd, const char* file, const void* p, size_t n, uint64_t at)
{
    const char* c = (const char*)p;
    while (n) {
        ssize_t k = pwrite(fd, c, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n, (off_t)at);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return vs_set_error(VS_ERR_IO, "writing %s: %s", file, k < 0 ? strerror(errno) : "no progress");
        c += k, n -= (size_t)k, at += (uint64_t)k;
    }
    return VS_OK;
}

_VS_CKPT_PRIVATE vs_result _vs_ckpt_pread(int fd, const char* file, void* p, size_t n, uint64_t at)
{
    char* c = (char*)p;
    while (n) {
        ssize_t k = pread(fd, c, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n, (off_t)at);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return vs_set_error(VS_ERR_IO, "reading %s: %s", file, strerror(errno));
        if (k == 0) return vs_set_error(VS_ERR_IO, "reading %s: the file ends %llu bytes early (truncated)", file,
                                        (unsigned long long)n);
        c += k, n -= (size_t)k, at += (uint64_t)k;
    }
    return VS_OK;
}

#define _VS_CKPT_BLOCK ((uint64_t)1 << 20)

/* This rank's bytes of one piece: the entry's data from the record's range. */
_VS_CKPT_PRIVATE const void* _vs_ckpt_src(const vs_ckpt_entry* e)
{
    if (e->kind == VS_CKPT_BLOB) return e->blob;
    return e->t.data; // RANGE: data holds exactly the range; TENSOR: the whole box
}

/* Writes this rank's shard file: its pieces, one CRC per block of each. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_write_shard(vs_ckpt* ck, const char* dir, const vs_ckpt_entry* entries,
                                                _vs_ckpt_rec** mine, int nm, uint32_t** crcs, int* ncrc)
{
    char file[4096], key[VS_CKPT_NAME_MAX + 16], meta[64];
    snprintf(file, sizeof file, "%s/shard-%05d.safetensors", dir, ck->rank);
    _vs_st_tensor* ts = (_vs_st_tensor*)vs_alloc(ck->w, sizeof(_vs_st_tensor) * (size_t)(nm ? nm : 1));
    char* keys = (char*)vs_alloc(ck->w, (size_t)(nm ? nm : 1) * sizeof key);
    if (!ts || !keys) {
        vs_free(ck->w, ts);
        vs_free(ck->w, keys);
        return vs_set_error(VS_ERR_NOMEM, "checkpoint: out of memory");
    }
    uint64_t at = 0;
    for (int i = 0; i < nm; i++) {
        const _vs_ckpt_rec* rc = mine[i];
        char* k = keys + (size_t)i * sizeof key;
        snprintf(k, sizeof key, "%s#%d", rc->name, rc->key);
        memset(&ts[i], 0, sizeof ts[i]);
        ts[i].key = k;
        ts[i].dtype = (vs_dtype)rc->dtype;
        if (rc->kind == VS_CKPT_TENSOR) {
            ts[i].ndim = rc->ndim;
            for (int d = 0; d < rc->ndim; d++) ts[i].shape[d] = rc->box[d];
        } else {
            ts[i].ndim = 1;
            ts[i].shape[0] = rc->re - rc->rb;
        }
        ts[i].begin = at;
        ts[i].end = at += rc->bytes;
    }
    snprintf(meta, sizeof meta, "{\"format\": \"vescale\", \"rank\": \"%d\"}", ck->rank);
    char* hdr = NULL;
    size_t hl = 0;
    vs_result r = _vs_st_header(ck->w, ts, nm, meta, &hdr, &hl);
    int fd = -1;
    if (!r && (fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
        r = vs_set_error(VS_ERR_IO, "cannot create %s: %s", file, strerror(errno));
    if (!r) r = _vs_ckpt_pwrite(fd, file, hdr, hl, 0);
    for (int i = 0; i < nm && !r; i++) {
        _vs_ckpt_rec* rc = mine[i];
        const char* src = (const char*)_vs_ckpt_src(&entries[rc->entry]);
        rc->data_begin = hl + ts[i].begin;
        rc->data_end = hl + ts[i].end;
        r = _vs_ckpt_pwrite(fd, file, src, rc->bytes, rc->data_begin);
        if (r) r = vs_set_error(r, "%s (entry \"%s\")", vs_last_error(), rc->name);
        int nb = ck->desc.no_checksum ? 0 : (int)((rc->bytes + _VS_CKPT_BLOCK - 1) / _VS_CKPT_BLOCK);
        ncrc[i] = nb;
        crcs[i] = nb ? (uint32_t*)vs_alloc(ck->w, sizeof(uint32_t) * (size_t)nb) : NULL;
        if (nb && !crcs[i]) r = vs_set_error(VS_ERR_NOMEM, "checkpoint: out of memory");
        for (int b = 0; b < nb && !r; b++) {
            uint64_t o = (uint64_t)b * _VS_CKPT_BLOCK;
            uint64_t len = rc->bytes - o < _VS_CKPT_BLOCK ? rc->bytes - o : _VS_CKPT_BLOCK;
            crcs[i][b] = _vs_crc32c(0, src + o, (size_t)len);
        }
    }
    if (fd >= 0) {
        if (!r && fsync(fd)) r = vs_set_error(VS_ERR_IO, "fsync %s: %s", file, strerror(errno));
        if (close(fd) && !r) r = vs_set_error(VS_ERR_IO, "closing %s: %s", file, strerror(errno));
    }
    vs_free(ck->w, hdr);
    vs_free(ck->w, ts);
    vs_free(ck->w, keys);
    return r;
}

_VS_CKPT_PRIVATE void _vs_ckpt_nonce(vs_ckpt* ck, char* out, size_t cap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t h = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 32) ^
                 (uint64_t)(uintptr_t)ck;
    snprintf(out, cap, "%016llx", (unsigned long long)h);
}

/* Rank 0: the index of the pieces every rank wrote. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_write_index(vs_ckpt* ck, const char* dir, _vs_ckpt_rec* rc, int n,
                                                const uint64_t* file_bytes, uint32_t** crcs, const int* ncrc)
{
    _vs_ckpt_index ix;
    memset(&ix, 0, sizeof ix);
    char fname[64];
    vs_result r = VS_OK;
    int ne = 0, np = 0;
    for (int i = 0; i < n; i++) ne += i == 0 || strcmp(rc[i].name, rc[i - 1].name);
    ix.mesh_ndims = vs_mesh_ndims(ck->mesh);
    for (int d = 0; d < ix.mesh_ndims; d++) {
        ix.mesh_shape[d] = vs_mesh_size(ck->mesh, vs_mesh_dim_name(ck->mesh, d));
        snprintf(ix.mesh_dims[d], sizeof ix.mesh_dims[d], "%s", vs_mesh_dim_name(ck->mesh, d));
    }
    ix.block = ck->desc.no_checksum ? 0 : _VS_CKPT_BLOCK;
    ix.nfiles = ck->size;
    ix.files = (char**)vs_alloc(ck->w, sizeof(char*) * (size_t)ck->size);
    ix.file_bytes = (uint64_t*)vs_alloc(ck->w, sizeof(uint64_t) * (size_t)ck->size);
    char* fnames = (char*)vs_alloc(ck->w, sizeof fname * (size_t)ck->size);
    ix.e = (_vs_ckpt_ientry*)vs_alloc(ck->w, sizeof(_vs_ckpt_ientry) * (size_t)(ne ? ne : 1));
    _vs_ckpt_piece* pieces = (_vs_ckpt_piece*)vs_alloc(ck->w, sizeof(_vs_ckpt_piece) * (size_t)(n ? n : 1));
    char* keys = (char*)vs_alloc(ck->w, (size_t)(n ? n : 1) * (VS_CKPT_NAME_MAX + 16));
    _vs_sbuf sb;
    memset(&sb, 0, sizeof sb);
    sb.w = ck->w;
    if (!ix.files || !ix.file_bytes || !fnames || !ix.e || !pieces || !keys) {
        r = vs_set_error(VS_ERR_NOMEM, "checkpoint index: out of memory");
        goto done;
    }
    for (int f = 0; f < ck->size; f++) {
        ix.files[f] = fnames + (size_t)f * sizeof fname;
        snprintf(ix.files[f], sizeof fname, "shard-%05d.safetensors", f);
        ix.file_bytes[f] = file_bytes[f];
    }
    np = 0;
    for (int i = 0; i < n; i++) {
        if (i == 0 || strcmp(rc[i].name, rc[i - 1].name)) {
            _vs_ckpt_ientry* e = &ix.e[ix.ne++];
            memset(e, 0, sizeof *e);
            e->name = rc[i].name;
            e->kind = (vs_ckpt_kind)rc[i].kind;
            e->dtype = (vs_dtype)rc[i].dtype;
            e->ndim = rc[i].ndim;
            for (int d = 0; d < rc[i].ndim; d++) e->shape[d] = rc[i].shape[d];
            e->layout = rc[i].kind == VS_CKPT_BLOB ? NULL : rc[i].layout;
            e->blob_bytes = rc[i].kind == VS_CKPT_BLOB ? rc[i].bytes : 0;
            e->pieces = pieces + np;
        }
        if (!rc[i].writer) continue;
        _vs_ckpt_ientry* e = &ix.e[ix.ne - 1];
        _vs_ckpt_piece* p = &pieces[np++];
        e->npieces++;
        memset(p, 0, sizeof *p);
        p->file = rc[i].rank;
        p->key = keys + (size_t)i * (VS_CKPT_NAME_MAX + 16);
        snprintf(p->key, VS_CKPT_NAME_MAX + 16, "%s#%d", rc[i].name, rc[i].key);
        for (int d = 0; d < rc[i].ndim; d++) p->off[d] = rc[i].off[d], p->box[d] = rc[i].box[d];
        if (rc[i].kind == VS_CKPT_RANGE) p->range_begin = rc[i].rb, p->range_end = rc[i].re;
        p->data_begin = rc[i].data_begin;
        p->data_end = rc[i].data_end;
        p->crc = crcs[i];
        p->ncrc = ncrc[i];
    }
    r = _vs_ckpt_index_write(&ix, &sb);
    if (!r && sb.oom) r = vs_set_error(VS_ERR_NOMEM, "checkpoint index: out of memory");
    if (!r) {
        char file[4096];
        snprintf(file, sizeof file, "%s/" _VS_CKPT_INDEX, dir);
        int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) r = vs_set_error(VS_ERR_IO, "cannot create %s: %s", file, strerror(errno));
        if (!r) r = _vs_ckpt_pwrite(fd, file, sb.p, sb.len, 0);
        if (fd >= 0) {
            if (!r && fsync(fd)) r = vs_set_error(VS_ERR_IO, "fsync %s: %s", file, strerror(errno));
            close(fd);
        }
    }
done:
    _vs_sb_free(&sb);
    vs_free(ck->w, ix.files);
    vs_free(ck->w, ix.file_bytes);
    vs_free(ck->w, fnames);
    vs_free(ck->w, ix.e);
    vs_free(ck->w, pieces);
    vs_free(ck->w, keys);
    return r;
}

/* The synchronous save (also the async save's background part, on copies). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_save_now(vs_ckpt* ck, const char* path, const vs_ckpt_entry* entries, int n,
                                             int overwrite)
{
    const char* fn = "vs_ckpt_save";
    _vs_ckpt_rec* mine = (_vs_ckpt_rec*)vs_alloc(ck->w, sizeof(_vs_ckpt_rec) * (size_t)(n > 0 ? n : 1));
    _vs_ckpt_rec* all = NULL;
    size_t *counts = NULL, *displs = NULL, total = 0;
    uint32_t** crcs = NULL;
    int* ncrc = NULL;
    _vs_ckpt_rec** wr = NULL;
    char tmp[4096] = "", nonce[32] = "";
    int nm = 0, who = -1, made_tmp = 0;
    vs_result r = mine ? VS_OK : vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    if (!r && strlen(path) > 3000) r = vs_set_error(VS_ERR_INVALID, "%s: path is longer than 3000 bytes", fn);
    for (int i = 0; i < n && !r; i++) {
        if (entries[i].skip) continue;
        r = _vs_ckpt_entry_rec(fn, &entries[i], i, ck->rank, &mine[nm]);
        for (int j = 0; j < nm && !r; j++)
            if (!strcmp(mine[j].name, mine[nm].name))
                r = vs_set_error(VS_ERR_INVALID, "%s: entry \"%s\" is given twice (entries %d and %d)", fn,
                                 mine[nm].name, mine[j].entry, i);
        nm++;
    }
    vs_result ra = _vs_ckpt_agree(ck, r, &who);
    if (ra && !r) r = vs_set_error(ra, "%s: rank %d's entries are invalid (its error says why)", fn, who);
    if (!r) r = _vs_ckpt_gather(ck, mine, sizeof(_vs_ckpt_rec) * (size_t)nm, (void**)&all, &counts, &displs, &total);
    int na = (int)(total / sizeof(_vs_ckpt_rec));
    if (!r) r = _vs_ckpt_plan(fn, all, na); // (every rank alike: no agreement needed)
    // rank 0 makes the temporary directory; every rank learns its name
    if (!r) {
        vs_result r0 = VS_OK;
        if (ck->rank == 0) {
            struct stat st;
            _vs_ckpt_nonce(ck, nonce, sizeof nonce);
            if (!overwrite && stat(path, &st) == 0)
                r0 = vs_set_error(VS_ERR_STATE, "%s: %s exists (pass overwrite to replace it)", fn, path);
            snprintf(tmp, sizeof tmp, "%s" _VS_CKPT_TMP "%s", path, nonce);
            if (!r0 && mkdir(tmp, 0755)) r0 = vs_set_error(VS_ERR_IO, "%s: cannot create %s: %s", fn, tmp, strerror(errno));
            made_tmp = !r0;
        }
        r = vs_broadcast(ck->comm, nonce, nonce, sizeof nonce, VS_U8, 0, NULL);
        snprintf(tmp, sizeof tmp, "%s" _VS_CKPT_TMP "%s", path, nonce);
        ra = _vs_ckpt_agree(ck, r ? r : r0, &who);
        if (!r) r = r0 ? r0 : ra ? vs_set_error(ra, "%s: rank 0 could not start the save (its error says why)", fn) : VS_OK;
    }
    // each rank writes its pieces
    uint64_t fbytes = 0;
    int nw = 0;
    if (!r) {
        wr = (_vs_ckpt_rec**)vs_alloc(ck->w, sizeof(void*) * (size_t)(na ? na : 1));
        crcs = (uint32_t**)vs_alloc(ck->w, sizeof(uint32_t*) * (size_t)(na ? na : 1));
        ncrc = (int*)vs_alloc(ck->w, sizeof(int) * (size_t)(na ? na : 1));
        if (!wr || !crcs || !ncrc) r = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
        else {
            memset(crcs, 0, sizeof(uint32_t*) * (size_t)(na ? na : 1));
            memset(ncrc, 0, sizeof(int) * (size_t)(na ? na : 1));
        }
        for (int i = 0; !r && i < na; i++)
            if (all[i].rank == ck->rank && all[i].writer) wr[nw++] = &all[i];
        if (!r && nw) r = _vs_ckpt_write_shard(ck, tmp, entries, wr, nw, crcs, ncrc);
        for (int i = 0; i < nw; i++)
            if (wr[i]->data_end > fbytes) fbytes = wr[i]->data_end;
        ra = _vs_ckpt_agree(ck, r, &who);
        if (ra && !r) r = vs_set_error(ra, "%s: rank %d could not write its shard (its error says why)", fn, who);
    }
    // rank 0 learns where every piece went and writes the index, then commits
    if (!r) {
        size_t mb = sizeof(uint64_t) * 2;
        for (int i = 0; i < nw; i++) mb += sizeof(uint64_t) * 4 + sizeof(uint32_t) * (size_t)ncrc[i];
        char* msg = (char*)vs_alloc(ck->w, mb);
        char* got = NULL;
        size_t *c2 = NULL, *d2 = NULL, t2 = 0;
        if (!msg) r = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
        if (!r) {
            uint64_t* h = (uint64_t*)msg;
            h[0] = fbytes;
            h[1] = (uint64_t)nw;
            char* at = msg + sizeof(uint64_t) * 2;
            for (int i = 0; i < nw; i++) {
                uint64_t v[4] = {(uint64_t)(wr[i] - all), wr[i]->data_begin, wr[i]->data_end, (uint64_t)ncrc[i]};
                memcpy(at, v, sizeof v);
                at += sizeof v;
                if (ncrc[i]) memcpy(at, crcs[i], sizeof(uint32_t) * (size_t)ncrc[i]);
                at += sizeof(uint32_t) * (size_t)ncrc[i];
            }
            r = _vs_ckpt_gather(ck, msg, mb, (void**)&got, &c2, &d2, &t2);
        }
        vs_result r0 = VS_OK;
        if (!r && ck->rank == 0) {
            uint64_t* fb = (uint64_t*)vs_alloc(ck->w, sizeof(uint64_t) * (size_t)ck->size);
            uint32_t** ac = (uint32_t**)vs_alloc(ck->w, sizeof(uint32_t*) * (size_t)(na ? na : 1));
            int* an = (int*)vs_alloc(ck->w, sizeof(int) * (size_t)(na ? na : 1));
            if (!fb || !ac || !an) r0 = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
            for (int k = 0; !r0 && k < ck->size; k++) {
                const char* at = got + d2[k];
                const uint64_t* h = (const uint64_t*)at;
                fb[k] = h[0];
                int cnt = (int)h[1];
                at += sizeof(uint64_t) * 2;
                for (int i = 0; i < cnt; i++) {
                    uint64_t v[4];
                    memcpy(v, at, sizeof v);
                    at += sizeof v;
                    _vs_ckpt_rec* rc = &all[v[0]];
                    rc->data_begin = v[1];
                    rc->data_end = v[2];
                    an[v[0]] = (int)v[3];
                    ac[v[0]] = (uint32_t*)(uintptr_t)at; // (unaligned reads avoided below)
                    at += sizeof(uint32_t) * v[3];
                }
            }
            for (int i = 0; !r0 && i < na; i++) { // aligned copies of the CRC lists
                if (!all[i].writer || !an[i]) {
                    ac[i] = NULL;
                    continue;
                }
                uint32_t* c = (uint32_t*)vs_alloc(ck->w, sizeof(uint32_t) * (size_t)an[i]);
                if (!c) {
                    r0 = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
                    for (int j = i; j < na; j++) ac[j] = NULL; // (not ours to free)
                    break;
                }
                memcpy(c, ac[i], sizeof(uint32_t) * (size_t)an[i]);
                ac[i] = c;
            }
            if (!r0) r0 = _vs_ckpt_write_index(ck, tmp, all, na, fb, ac, an);
            if (!r0) r0 = _vs_ckpt_commit(tmp, path, nonce, overwrite);
            if (!r0) made_tmp = 0;
            for (int i = 0; ac && i < na; i++) vs_free(ck->w, ac[i]);
            vs_free(ck->w, fb);
            vs_free(ck->w, ac);
            vs_free(ck->w, an);
        }
        ra = _vs_ckpt_agree(ck, r ? r : r0, &who);
        if (!r) r = r0 ? r0 : ra ? vs_set_error(ra, "%s: rank 0 could not commit %s (its error says why)", fn, path) : VS_OK;
        vs_free(ck->w, msg);
        vs_free(ck->w, got);
        vs_free(ck->w, c2);
        vs_free(ck->w, d2);
    }
    if (r && made_tmp) _vs_ckpt_rmdir(tmp); // a failed save leaves nothing behind
    if (!r && ck->rank == 0 && ck->desc.keep_last > 0) {
        char parent[4096];
        _vs_ckpt_parent(path, parent, sizeof parent);
        r = vs_ckpt_retain(parent, ck->desc.keep_last);
    }
    for (int i = 0; crcs && i < na; i++) vs_free(ck->w, crcs[i]);
    vs_free(ck->w, crcs);
    vs_free(ck->w, ncrc);
    vs_free(ck->w, wr);
    vs_free(ck->w, mine);
    vs_free(ck->w, all);
    vs_free(ck->w, counts);
    vs_free(ck->w, displs);
    return r;
}

/* Device memory: copies through the CUDA runtime (NCCL builds; tests force it
   over a stand-in runtime with _VS_CKPT_FORCE_CUDA). */
#if defined(VESCALE_NCCL) || defined(_VS_CKPT_FORCE_CUDA)
#define _VS_CKPT_CUDA 1
#include <cuda_runtime.h>
#endif

_VS_CKPT_PRIVATE vs_result _vs_ckpt_copy_mem(void* dst, const void* src, size_t n, int to_device, int from_device)
{
    if (!n) return VS_OK;
#ifdef _VS_CKPT_CUDA
    if (to_device || from_device) {
        cudaError_t e = cudaMemcpy(dst, src, n, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
        return e == cudaSuccess ? VS_OK
                                : vs_set_error(VS_ERR_BACKEND, "checkpoint: cudaMemcpy of %zu bytes: %s", n,
                                               cudaGetErrorString(e));
    }
#else
    if (to_device || from_device)
        return vs_set_error(VS_ERR_UNAVAILABLE, "checkpoint: device memory needs a VESCALE_NCCL build");
#endif
    memcpy(dst, src, n);
    return VS_OK;
}

/* Load: the elements this rank needs of one entry (its box, a range of it) and
   those one stored piece holds meet in runs: contiguous in both. */
typedef struct _vs_ckpt_need {
    int ndim;
    int64_t off[_VS_CKPT_MAXD], box[_VS_CKPT_MAXD];
    int64_t rb, re; // flat range of box
} _vs_ckpt_need;

typedef void (*_vs_ckpt_run_fn)(void* ctx, int64_t dst, int64_t src, int64_t n); // in elements

/* Calls fn for each run where need meets the piece (off/box, range [prb, pre)). */
_VS_CKPT_PRIVATE int64_t _vs_ckpt_runs(const _vs_ckpt_need* nd, const int64_t* poff, const int64_t* pbox, int64_t prb,
                                       int64_t pre, _vs_ckpt_run_fn fn, void* ctx)
{
    const int D = nd->ndim;
    int64_t lo[_VS_CKPT_MAXD], hi[_VS_CKPT_MAXD], idx[_VS_CKPT_MAXD];
    for (int d = 0; d < D; d++) {
        lo[d] = nd->off[d] > poff[d] ? nd->off[d] : poff[d];
        hi[d] = nd->off[d] + nd->box[d] < poff[d] + pbox[d] ? nd->off[d] + nd->box[d] : poff[d] + pbox[d];
        if (lo[d] >= hi[d]) return 0;
        idx[d] = lo[d];
    }
    int64_t total = 0, rd = -1, rs = -1, rn = 0; // the run being grown
    int64_t len = D ? hi[D - 1] - lo[D - 1] : 1;
    for (;;) {
        int64_t fb = 0, fs = 0; // flat index of the row's first element in the need's and the piece's box
        for (int d = 0; d < D; d++) {
            fb = fb * nd->box[d] + (idx[d] - nd->off[d]);
            fs = fs * pbox[d] + (idx[d] - poff[d]);
        }
        int64_t j0 = 0, j1 = len;
        if (nd->rb - fb > j0) j0 = nd->rb - fb;
        if (nd->re - fb < j1) j1 = nd->re - fb;
        if (prb - fs > j0) j0 = prb - fs;
        if (pre - fs < j1) j1 = pre - fs;
        if (j0 < j1) {
            int64_t dst = fb + j0 - nd->rb, src = fs + j0 - prb;
            if (rn && dst == rd + rn && src == rs + rn) rn += j1 - j0;
            else {
                if (rn) fn(ctx, rd, rs, rn);
                rd = dst, rs = src, rn = j1 - j0;
            }
            total += j1 - j0;
        }
        int d = D - 2;
        for (; d >= 0; d--) {
            if (++idx[d] < hi[d]) break;
            idx[d] = lo[d];
        }
        if (d < 0) break;
    }
    if (rn) fn(ctx, rd, rs, rn);
    return total;
}

typedef struct _vs_ckpt_span { // the byte span of a piece the runs read
    int64_t lo, hi;
} _vs_ckpt_span;

static void _vs_ckpt_span_fn(void* ctx, int64_t dst, int64_t src, int64_t n)
{
    _vs_ckpt_span* s = (_vs_ckpt_span*)ctx;
    (void)dst;
    if (s->lo < 0 || src < s->lo) s->lo = src;
    if (src + n > s->hi) s->hi = src + n;
}

typedef struct _vs_ckpt_copy {
    char* dst;
    const char* src; // the piece's bytes from element `base`
    int64_t base;
    size_t es;
} _vs_ckpt_copy;

static void _vs_ckpt_copy_fn(void* ctx, int64_t dst, int64_t src, int64_t n)
{
    _vs_ckpt_copy* c = (_vs_ckpt_copy*)ctx;
    memcpy(c->dst + (size_t)dst * c->es, c->src + (size_t)(src - c->base) * c->es, (size_t)n * c->es);
}

typedef struct _vs_ckpt_files {
    const char* dir;
    const _vs_ckpt_index* ix;
    int* fd;
} _vs_ckpt_files;

_VS_CKPT_PRIVATE vs_result _vs_ckpt_fd(_vs_ckpt_files* f, int i, int* fd)
{
    if (f->fd[i] < 0) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", f->dir, f->ix->files[i]);
        f->fd[i] = open(p, O_RDONLY);
        if (f->fd[i] < 0) return vs_set_error(VS_ERR_IO, "cannot open %s: %s", p, strerror(errno));
        struct stat st;
        if (fstat(f->fd[i], &st) == 0 && (uint64_t)st.st_size != f->ix->file_bytes[i])
            return vs_set_error(VS_ERR_IO, "%s has %lld bytes, the index says %llu (truncated or replaced)", p,
                                (long long)st.st_size, (unsigned long long)f->ix->file_bytes[i]);
    }
    *fd = f->fd[i];
    return VS_OK;
}

/* Reads bytes [lo, hi) of a piece into buf (which gets the block-aligned span
   [*blo, ...) when checksums are on, so every block read is verified). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_read_piece(_vs_ckpt_files* f, const _vs_ckpt_ientry* e, const _vs_ckpt_piece* p,
                                               uint64_t lo, uint64_t hi, char* buf, uint64_t* blo)
{
    const uint64_t B = f->ix->block;
    if (B) {
        lo = lo / B * B;
        uint64_t len = p->data_end - p->data_begin;
        hi = (hi + B - 1) / B * B;
        if (hi > len) hi = len;
    }
    *blo = lo;
    int fd;
    _VS_TRY(_vs_ckpt_fd(f, p->file, &fd));
    vs_result r = _vs_ckpt_pread(fd, f->ix->files[p->file], buf, (size_t)(hi - lo), p->data_begin + lo);
    if (r) return vs_set_error(r, "%s (entry \"%s\", piece %s)", vs_last_error(), e->name, p->key);
    for (uint64_t b = lo; B && b < hi; b += B) {
        uint64_t n = hi - b < B ? hi - b : B;
        uint32_t c = _vs_crc32c(0, buf + (b - lo), (size_t)n);
        uint64_t k = b / B;
        if ((int)k >= p->ncrc || c != p->crc[k])
            return vs_set_error(VS_ERR_IO, "checksum mismatch in %s/%s, entry \"%s\", piece %s, block %llu (bytes %llu..%llu): the file is corrupt",
                                f->dir, f->ix->files[p->file], e->name, p->key, (unsigned long long)k,
                                (unsigned long long)(p->data_begin + b), (unsigned long long)(p->data_begin + b + n));
    }
    return VS_OK;
}

/* One entry: everything this rank needs, verified, into dst (host). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_load_entry(vs_ckpt* ck, _vs_ckpt_files* f, const _vs_ckpt_ientry* e,
                                               const _vs_ckpt_need* nd, char* dst, size_t es)
{
    int64_t need = nd->re - nd->rb, got = 0;
    for (int k = 0; k < e->npieces; k++) {
        const _vs_ckpt_piece* p = &e->pieces[k];
        int64_t prb = 0, pre = _vs_ckpt_numel(e->ndim, p->box);
        if (e->kind == VS_CKPT_RANGE) prb = p->range_begin, pre = p->range_end;
        _vs_ckpt_span sp = {-1, 0};
        if (!_vs_ckpt_runs(nd, p->off, p->box, prb, pre, _vs_ckpt_span_fn, &sp)) continue;
        uint64_t lo = (uint64_t)(sp.lo - prb) * es, hi = (uint64_t)(sp.hi - prb) * es, blo = 0;
        uint64_t B = f->ix->block, cap = hi - lo + 2 * B;
        char* buf = (char*)vs_alloc(ck->w, (size_t)cap);
        if (!buf) return vs_set_error(VS_ERR_NOMEM, "loading \"%s\": %llu bytes", e->name, (unsigned long long)cap);
        vs_result r = _vs_ckpt_read_piece(f, e, p, lo, hi, buf, &blo);
        if (!r) {
            _vs_ckpt_copy cp = {dst, buf, prb + (int64_t)(blo / es), es};
            got += _vs_ckpt_runs(nd, p->off, p->box, prb, pre, _vs_ckpt_copy_fn, &cp);
        }
        vs_free(ck->w, buf);
        _VS_TRY(r);
    }
    if (got != need)
        return vs_set_error(VS_ERR_INVALID, "entry \"%s\": the checkpoint holds %lld of the %lld elements this rank needs",
                            e->name, (long long)got, (long long)need);
    return VS_OK;
}

_VS_CKPT_PRIVATE const _vs_ckpt_ientry* _vs_ckpt_find(const _vs_ckpt_index* ix, const char* name)
{
    for (int i = 0; i < ix->ne; i++)
        if (!strcmp(ix->e[i].name, name)) return &ix->e[i];
    return NULL;
}

/* Rank 0 reads the index; every rank gets its text. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_read_index(vs_ckpt* ck, const char* path, _vs_ckpt_index* ix)
{
    char file[4096];
    snprintf(file, sizeof file, "%s/" _VS_CKPT_INDEX, path);
    int64_t len = -1;
    char* text = NULL;
    vs_result r0 = VS_OK;
    if (ck->rank == 0) {
        int fd = open(file, O_RDONLY);
        struct stat st;
        if (fd < 0) r0 = vs_set_error(VS_ERR_IO, "cannot open %s: %s (not a complete checkpoint?)", file, strerror(errno));
        else if (fstat(fd, &st) || st.st_size > ((int64_t)1 << 31))
            r0 = vs_set_error(VS_ERR_IO, "%s: cannot stat, or larger than 2 GiB", file);
        else if (!(text = (char*)vs_alloc(ck->w, (size_t)st.st_size + 1)))
            r0 = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", file);
        else if ((r0 = _vs_ckpt_pread(fd, file, text, (size_t)st.st_size, 0)) == VS_OK)
            len = st.st_size;
        if (fd >= 0) close(fd);
    }
    vs_result r = vs_broadcast(ck->comm, &len, &len, 1, VS_I64, 0, NULL);
    if (r) return r;
    if (len < 0) {
        vs_free(ck->w, text);
        return ck->rank == 0 ? r0 : vs_set_error(VS_ERR_IO, "cannot read %s (rank 0's error says why)", file);
    }
    if (ck->rank != 0 && !(text = (char*)vs_alloc(ck->w, (size_t)len + 1))) r = VS_ERR_NOMEM;
    // (a rank out of memory still takes part in the broadcast, into a scratch byte)
    char one;
    vs_result rb = vs_broadcast(ck->comm, text ? text : &one, text ? text : &one, text ? (size_t)len : 0, VS_U8, 0, NULL);
    if (r || rb) {
        vs_free(ck->w, text);
        return vs_set_error(r ? r : rb, "reading %s: %s", file, r ? "out of memory" : vs_last_error());
    }
    r = _vs_ckpt_index_parse(ck->w, file, text, (size_t)len, ix);
    vs_free(ck->w, text);
    return r;
}

VS_API vs_result vs_ckpt_load(vs_ckpt* ck, const char* path, vs_ckpt_entry* entries, int n, int* loaded)
{
    const char* fn = "vs_ckpt_load";
    if (!ck || !path) return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, ck ? "path" : "ck");
    if (n < 0 || (n && !entries)) return vs_set_error(VS_ERR_INVALID, "%s: %d entries at %p", fn, n, (void*)entries);
    for (int i = 0; loaded && i < n; i++) loaded[i] = 0;
    vs_result r = vs_ckpt_wait(ck);
    if (r) return vs_set_error(r, "%s: the async save before it failed: %s", fn, vs_last_error());
    _vs_ckpt_index ix;
    memset(&ix, 0, sizeof ix);
    _VS_TRY(_vs_ckpt_read_index(ck, path, &ix));
    _vs_ckpt_files f = {path, &ix, (int*)vs_alloc(ck->w, sizeof(int) * (size_t)(ix.nfiles ? ix.nfiles : 1))};
    if (!f.fd) r = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    for (int i = 0; f.fd && i < ix.nfiles; i++) f.fd[i] = -1;
    for (int i = 0; i < n && !r; i++) {
        vs_ckpt_entry* q = &entries[i];
        if (q->skip) continue;
        _vs_ckpt_rec rc; // (checks the request as save checks an entry)
        int is_blob = q->kind == VS_CKPT_BLOB;
        void* keep_blob = q->blob;
        if (is_blob) q->blob = NULL, r = VS_OK; // (the blob is a destination here: NULL-check below)
        r = is_blob ? (q->name && q->name[0] ? VS_OK : vs_set_error(VS_ERR_INVALID, "%s: entry %d has no name", fn, i))
                    : _vs_ckpt_entry_rec(fn, q, i, ck->rank, &rc);
        q->blob = keep_blob;
        if (r) break;
        const _vs_ckpt_ientry* e = _vs_ckpt_find(&ix, q->name);
        if (!e) {
            r = vs_set_error(VS_ERR_INVALID, "%s: %s has no entry \"%s\"", fn, path, q->name);
            break;
        }
        if (is_blob != (e->kind == VS_CKPT_BLOB)) {
            r = vs_set_error(VS_ERR_MISMATCH, "%s: entry \"%s\" is a %s in %s, asked for as a %s", fn, q->name,
                             e->kind == VS_CKPT_BLOB ? "blob" : "tensor", path, is_blob ? "blob" : "tensor");
            break;
        }
        if (is_blob) {
            if (e->blob_bytes > q->blob_bytes || (e->blob_bytes && !q->blob)) {
                r = vs_set_error(VS_ERR_INVALID, "%s: blob \"%s\" has %llu bytes, the buffer %zu", fn, q->name,
                                 (unsigned long long)e->blob_bytes, q->blob ? q->blob_bytes : (size_t)0);
                break;
            }
            _vs_ckpt_need nd;
            memset(&nd, 0, sizeof nd);
            nd.ndim = 1;
            nd.box[0] = (int64_t)e->blob_bytes;
            nd.re = (int64_t)e->blob_bytes;
            char* tmpb = (char*)vs_alloc(ck->w, e->blob_bytes ? e->blob_bytes : 1);
            if (!tmpb) r = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
            if (!r) r = _vs_ckpt_load_entry(ck, &f, e, &nd, tmpb, 1);
            if (!r) {
                if (e->blob_bytes) memcpy(q->blob, tmpb, e->blob_bytes);
                q->blob_bytes = e->blob_bytes;
            }
            vs_free(ck->w, tmpb);
        } else {
            int same = e->dtype == q->t.dtype && e->ndim == q->t.ndim;
            for (int d = 0; same && d < e->ndim; d++) same = e->shape[d] == q->t.shape[d];
            if (!same) {
                char a[160], b[160];
                size_t la = 0, lb = 0;
                a[0] = b[0] = 0;
                for (int d = 0; d < e->ndim; d++) la += (size_t)snprintf(a + la, la < sizeof a ? sizeof a - la : 0, "%s%lld", d ? "," : "", (long long)e->shape[d]);
                for (int d = 0; d < q->t.ndim; d++) lb += (size_t)snprintf(b + lb, lb < sizeof b ? sizeof b - lb : 0, "%s%lld", d ? "," : "", (long long)q->t.shape[d]);
                r = vs_set_error(VS_ERR_MISMATCH, "%s: entry \"%s\" is %s[%s] in %s, asked for as %s[%s]", fn, q->name,
                                 vs_dtype_name(e->dtype), a, path, vs_dtype_name(q->t.dtype), b);
                break;
            }
            _vs_ckpt_need nd;
            nd.ndim = rc.ndim;
            for (int d = 0; d < rc.ndim; d++) nd.off[d] = rc.off[d], nd.box[d] = rc.box[d];
            nd.rb = rc.rb;
            nd.re = rc.re;
            size_t es = vs_dtype_size(e->dtype), bytes = (size_t)(nd.re - nd.rb) * es;
            if (!q->device) r = _vs_ckpt_load_entry(ck, &f, e, &nd, (char*)q->t.data, es);
            else { // device buffers: through host memory
                char* h = (char*)vs_alloc(ck->w, bytes ? bytes : 1);
                r = h ? _vs_ckpt_load_entry(ck, &f, e, &nd, h, es) : vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
                if (!r) r = _vs_ckpt_copy_mem(q->t.data, h, bytes, 1, 0);
                vs_free(ck->w, h);
            }
        }
        if (!r && loaded) loaded[i] = 1;
    }
    for (int i = 0; f.fd && i < ix.nfiles; i++)
        if (f.fd[i] >= 0) close(f.fd[i]);
    vs_free(ck->w, f.fd);
    _vs_ckpt_index_free(ck->w, &ix);
    return r;
}

/* Bytes of this rank's data of entry e (what save writes from it). */
_VS_CKPT_PRIVATE size_t _vs_ckpt_local_bytes(const vs_ckpt_entry* e)
{
    if (e->kind == VS_CKPT_BLOB) return e->blob_bytes;
    if (e->kind == VS_CKPT_RANGE)
        return e->range_end > e->range_begin ? (size_t)(e->range_end - e->range_begin) * vs_dtype_size(e->t.dtype) : 0;
    int64_t n = 0;
    if (!e->t.layout.mesh || vs_dtensor_local_numel(&e->t, &n) || n < 0) return 0;
    return (size_t)n * vs_dtype_size(e->t.dtype);
}

/* Host copies of the entries (names too): what an async save writes, and what a
   save of device buffers writes from. One block from the world's hooks. */
typedef struct _vs_ckpt_job {
    vs_ckpt* ck;
    char path[4096];
    int overwrite, n;
    vs_ckpt_entry* e;
    void* block;
    size_t bytes;
} _vs_ckpt_job;

_VS_CKPT_PRIVATE void _vs_ckpt_job_free(vs_ckpt* ck, _vs_ckpt_job* j)
{
    if (!j) return;
    vs_free(ck->w, j->block);
    vs_free(ck->w, j);
}

_VS_CKPT_PRIVATE vs_result _vs_ckpt_job_make(vs_ckpt* ck, const char* path, const vs_ckpt_entry* entries, int n,
                                             int overwrite, size_t bound, _vs_ckpt_job** out)
{
    *out = NULL;
    size_t data = 0, names = 0;
    for (int i = 0; i < n; i++) {
        if (entries[i].skip) continue;
        data += (_vs_ckpt_local_bytes(&entries[i]) + 63) / 64 * 64;
        names += entries[i].name ? strlen(entries[i].name) + 1 : 0;
    }
    if (bound && data > bound) return VS_ERR_UNSUPPORTED; // (the caller saves synchronously)
    _vs_ckpt_job* j = (_vs_ckpt_job*)vs_alloc(ck->w, sizeof *j);
    size_t head = (sizeof(vs_ckpt_entry) * (size_t)(n ? n : 1) + names + 63) / 64 * 64;
    void* block = j ? vs_alloc(ck->w, head + data) : NULL;
    if (!j || !block) {
        vs_free(ck->w, j);
        return vs_set_error(VS_ERR_NOMEM, "vs_ckpt_save: %zu bytes for the copies", head + data);
    }
    memset(j, 0, sizeof *j);
    j->ck = ck;
    snprintf(j->path, sizeof j->path, "%s", path);
    j->overwrite = overwrite;
    j->n = n;
    j->block = block;
    j->bytes = data;
    j->e = (vs_ckpt_entry*)block;
    char* nm = (char*)block + sizeof(vs_ckpt_entry) * (size_t)(n ? n : 1);
    char* at = (char*)block + head;
    for (int i = 0; i < n; i++) {
        j->e[i] = entries[i];
        j->e[i].device = 0;
        if (entries[i].skip) continue;
        if (entries[i].name) {
            size_t l = strlen(entries[i].name) + 1;
            memcpy(nm, entries[i].name, l);
            j->e[i].name = nm;
            nm += l;
        }
        size_t b = _vs_ckpt_local_bytes(&entries[i]);
        const void* src = entries[i].kind == VS_CKPT_BLOB ? entries[i].blob : entries[i].t.data;
        if (b && src) {
            vs_result r = _vs_ckpt_copy_mem(at, src, b, 0, entries[i].device);
            if (r) {
                _vs_ckpt_job_free(ck, j);
                return vs_set_error(r, "vs_ckpt_save: entry \"%s\": %s", entries[i].name, vs_last_error());
            }
            if (entries[i].kind == VS_CKPT_BLOB) j->e[i].blob = at;
            else j->e[i].t.data = at;
        }
        at += (b + 63) / 64 * 64;
    }
    *out = j;
    return VS_OK;
}

static void* _vs_ckpt_async_main(void* arg)
{
    _vs_ckpt_job* j = (_vs_ckpt_job*)arg;
    vs_ckpt* ck = j->ck;
    ck->async_result = _vs_ckpt_save_now(ck, j->path, j->e, j->n, j->overwrite);
    if (ck->async_result) snprintf(ck->async_msg, sizeof ck->async_msg, "%s", vs_last_error());
    return NULL;
}

VS_API vs_result vs_ckpt_save(vs_ckpt* ck, const char* path, const vs_ckpt_entry* entries, int n,
                              const vs_ckpt_save_opts* opts)
{
    const char* fn = "vs_ckpt_save";
    if (!ck || !path) return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, ck ? "path" : "ck");
    if (n < 0 || (n && !entries)) return vs_set_error(VS_ERR_INVALID, "%s: %d entries at %p", fn, n, (void*)entries);
    vs_result r = vs_ckpt_wait(ck);
    if (r) return vs_set_error(r, "%s: the async save before it failed: %s", fn, vs_last_error());
    int overwrite = opts ? opts->overwrite : 0, dev = 0;
    for (int i = 0; i < n; i++) dev |= entries[i].device && !entries[i].skip;
    _vs_ckpt_job* j = NULL;
    if (opts && opts->async) {
        r = _vs_ckpt_job_make(ck, path, entries, n, overwrite, ck->desc.async_max_bytes, &j);
        if (r == VS_ERR_UNSUPPORTED) j = NULL, r = VS_OK; // over the bound: save now instead
        if (r) return r;
        if (j) {
            ck->async_used = j->bytes;
            ck->job = j;
            ck->async_result = VS_OK;
            if (pthread_create(&ck->thread, NULL, _vs_ckpt_async_main, j)) {
                ck->job = NULL;
                _vs_ckpt_job_free(ck, j);
                return vs_set_error(VS_ERR_BACKEND, "%s: cannot start the writer thread", fn);
            }
            ck->running = 1;
            return VS_OK;
        }
    }
    if (dev) { // device buffers: written from host copies
        _VS_TRY(_vs_ckpt_job_make(ck, path, entries, n, overwrite, 0, &j));
        r = _vs_ckpt_save_now(ck, path, j->e, n, overwrite);
        _vs_ckpt_job_free(ck, j);
        return r;
    }
    return _vs_ckpt_save_now(ck, path, entries, n, overwrite);
}

VS_API vs_result vs_ckpt_wait(vs_ckpt* ck)
{
    if (!ck) return vs_set_error(VS_ERR_NULL, "vs_ckpt_wait: ck is NULL");
    if (!ck->running) return VS_OK;
    pthread_join(ck->thread, NULL);
    ck->running = 0;
    _vs_ckpt_job_free(ck, ck->job);
    ck->job = NULL;
    if (ck->async_result) return vs_set_error(ck->async_result, "%s", ck->async_msg);
    return VS_OK;
}

VS_API vs_result vs_ckpt_async_memory(const vs_ckpt* ck, size_t* used, size_t* bound)
{
    if (!ck || !used || !bound) return vs_set_error(VS_ERR_NULL, "vs_ckpt_async_memory: an argument is NULL");
    *used = ck->async_used;
    *bound = ck->desc.async_max_bytes;
    return VS_OK;
}

VS_API vs_result vs_ckpt_free(vs_ckpt* ck)
{
    if (!ck) return VS_OK;
    vs_result r = vs_ckpt_wait(ck);
    vs_comm_free(ck->comm);
    vs_mesh_release(ck->mesh);
    vs_free(ck->w, ck);
    return r;
}

// >>ckpt-ddp -------------------------------------------------------------------

#ifdef __cplusplus
}
#endif
#endif // VESCALE_CKPT_IMPLEMENTATION

/* vescale_ckpt.h - MIT License

   Copyright (c) 2026 the vescale authors

   Permission is hereby granted, free of charge, to any person obtaining a copy
   of this software and associated documentation files (the "Software"), to deal
   in the Software without restriction, including without limitation the rights
   to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
   copies of the Software, and to permit persons to whom the Software is
   furnished to do so, subject to the following conditions:

   The above copyright notice and this permission notice shall be included in all
   copies or substantial portions of the Software.

   THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
   IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
   FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
   AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
   LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
   OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
   SOFTWARE.
*/
