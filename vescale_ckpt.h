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

// >>ckpt-api -------------------------------------------------------------------

VS_API int vs_ckpt_version(void) { return VESCALE_VERSION_NUMBER; }

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
