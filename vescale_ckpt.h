/* vescale_ckpt.h - v0.1.0 (2026-11-23) - distributed checkpoints of the whole training state: sharded safetensors files plus a JSON index with CRC32C, crash-safe commit, async save, and loads that reshard across DP, TP, PP and ZeRO.

   Do this in *one* C or C++ file:
       #define VESCALE_IMPLEMENTATION        (every part), or
       #define VESCALE_CKPT_IMPLEMENTATION   (this part only; the mesh
                                              implementation must then be
                                              enabled somewhere as well)
       #include "vescale_ckpt.h"
   (VESCALE_STATIC, see vescale_mesh.h, implies the implementation.) For
   vs_ckpt_save_ddp / vs_ckpt_load_ddp include vescale_ddp.h first (vescale.h
   does).

   Platforms and link lines: as vescale_mesh.h (POSIX.1-2008 + pthreads;
   -lpthread -lm; -lmpi with VESCALE_MPI; -lcudart -lnccl -lnvrtc with
   VESCALE_NCCL, where device entries are copied with the CUDA runtime); a file
   system shared by the ranks that save together (one node, or NFS/Lustre/GPFS
   for several). MIT license (end of file).

   Step by step:

       vs_ckpt* ck;
       vs_ckpt_init(&(vs_ckpt_desc){ .mesh = mesh, .keep_last = 3 }, &ck);   // collective
       int64_t data_pos = 1234;
       vs_ckpt_entry extra[] = {
           { .name = "data_pos", .kind = VS_CKPT_BLOB, .blob = &data_pos, .blob_bytes = 8 },
           { .name = "emb", .t = emb_dtensor },          // any vs_dtensor: layout, shape, local data
       };
       vs_ckpt_save_ddp(ck, "ckpt/step-000100", ddp, "model.", extra, 2,
                        &(vs_ckpt_save_opts){ .async = 1 });   // returns once copied
       ...                                                     // train on
       vs_ckpt_wait(ck);                                       // (every rank) commits: the result

       // later, on any mesh shape (DP, TP, PP sizes or ZeRO stage may differ):
       char path[512];
       vs_ckpt_latest("ckpt", path, sizeof path);
       vs_ckpt_load_ddp(ck, path, ddp, "model.", extra, 2);
       vs_ckpt_free(ck);

   Topics (grep the markers):
       // >>ckpt-api      entries, save, load, async save, vs_ckpt_query_desc
       // >>ckpt-format   the files: safetensors shards, index.json, CRC32C (written out there)
       // >>ckpt-commit   crash-safe commit, latest, retention
       // >>ckpt-ddp      a vs_ddp's whole state as entries

   What is saved. Every rank gives its entries: tensors (a vs_dtensor: global
   shape, dtype, layout, this rank's shard), flat ranges of a shard (ZeRO
   optimizer state), or byte blobs.
   - Entries may differ between ranks (each PP stage has its own parameters).
   - Ranks that hold the same piece (replicated dims) write it once, the writer
     chosen by a hash so the work spreads.
   - The pieces of an entry must cover it exactly (checked: a ZeRO range
     skipped on every rank, or two overlapping, is an error naming the entry).
   - Tensors are stored in their global, unflattened form: a checkpoint does
     not know the mesh it came from, so any mesh loads it.

   Files. index.json (plain JSON) says for every entry its global shape, dtype,
   layout at save time, and which file holds which box or range at which bytes,
   with a CRC32C per 1 MiB block. Each shard-<rank>.safetensors is a valid
   safetensors file (Python's safetensors and numpy open it); tools/vescale-ckpt
   lists, verifies, exports one consolidated safetensors file, and diffs.

   Load. Each rank intersects what it needs (its boxes and ranges on the
   loading mesh) with what the files hold and reads only those bytes (whole
   checksum blocks around them: mapped with the pages read in at once, or
   pread where mapping fails), verifying each block right before its bytes
   are copied out, so a buffer only ever receives verified bytes and the data
   crosses memory once.
   - Rank 0 alone reads and checks index.json. Each rank sends it what it asks
     for (names, and its boxes and ranges) and gets back the part of the index
     that meets it (those entries, the pieces it reads, their files): a rank's
     metadata is its own entries', rank 0's the whole index (linear in the
     world, never all to all). A bad index fails every rank with rank 0's
     message.
   - Every entry's dtype and global shape must match the checkpoint's.
   - `loaded` flags say exactly which entries arrived. After an error the
     entry that failed may be partly written in a host buffer (with verified
     values only; blobs and device buffers go through host memory and are
     untouched), and the entries after it are untouched.
   - With desc.untouched_on_error the failing entry is untouched too (each
     entry is verified whole before its copy: one more pass over its bytes).
   - Every rank returns the same result: when one rank's bytes fail, every
     rank's error names that rank, the file and the entry.

   Commit. A save writes into <path>.tmp-<nonce>, fsyncs every file and the
   directory, renames it to <path> and fsyncs the parent. An existing <path>
   (overwrite) is renamed to <path>.old-<nonce> first and deleted only after
   the new one is durable. A crash leaves earlier checkpoints intact and at most
   a .tmp-/.old- leftover, which vs_ckpt_latest never returns and
   vs_ckpt_retain deletes.

   The .tmp- of a killed save is debris: a save holds a
   lock on its .tmp- directory while it runs (Linux open file description
   locks, which the kernel drops when the process dies), so the next save
   into the folder and vs_ckpt_latest remove every .tmp- nobody holds (and any
   .del- left by a killed delete); saves of live jobs in the same folder are
   left alone.

   Trust.
   - Cleanup (vs_ckpt_retain, keep_last, overwrite, leftovers) trusts nothing
     in the folder: it works relative to the folder's descriptor, never follows
     a symbolic link, and deletes only regular files directly inside a
     directory it would have made (a checkpoint, or a .tmp-/.old-/.del-
     leftover).
   - A link in the folder, whatever its name, is never a checkpoint: lists and
     vs_ckpt_latest skip it, cleanup leaves it (and anything not a regular file
     inside a checkpoint, with the directory holding it) with a warning. The
     folder itself may be a link.
   - The loader reads what index.json names; it trusts the index's content no
     more than a hostile file's (every number is checked, a name with '/' or
     ".." is refused) and follows links to shards (a read cannot harm), but
     opens only regular files: a FIFO, device or directory in place of
     index.json or a shard is VS_ERR_IO at once, never a blocking open.

   Async. A save with opts.async:
   - copies every buffer into one block from the allocator hooks (page-locked
     with cudaHostRegister when device memory is copied into it, and kept for
     the next async save), at most desc.async_max_bytes (default 4 GiB,
     VS_CKPT_DEFAULT_ASYNC_MAX_BYTES; where one rank's copies would exceed it,
     every rank saves synchronously: device memory then goes through host
     memory one piece at a time, as in every sync save);
   - agrees with the other ranks on the entries and on who writes what,
     creates the temporary directory, and returns; a writer thread writes this
     rank's shard file. Rank 0 alone gathers every rank's records and plans;
     each rank gets back only its own part, and sends its offsets and CRCs to
     rank 0 alone: a rank's metadata is its own entries', rank 0's every
     rank's (linear in the world, never all to all);
   - checks this rank's entries first (nothing is copied from a bad one): a
     bad entry, or a path rank 0 cannot create, is the call's error on every
     rank, and nothing is left to wait for.

   The thread never communicates: NCCL forbids two host threads issuing
   operations on one GPU at once, so every collective of a save runs on the
   calling thread, in the call and in the vs_ckpt_wait that ends it.

   That wait is collective: every rank joins it (vs_ckpt_wait, or its next
   save, load or vs_ckpt_free, which wait first); there the ranks agree that
   every shard is written, rank 0 writes the index and commits, and the result
   (a write's error names the rank, the file and the entry) is every rank's.
   Until then the checkpoint is not in place: a crash before it leaves the
   earlier checkpoints and a .tmp- leftover.

   Lifetime. A checkpointer remembers being freed: a second vs_ckpt_free, or
   any call on a freed one, is VS_ERR_STATE ("already freed") while its memory
   is among its world's last 16 freed handles (vescale_mesh.h's
   vs_free_later); past that window it is freed memory (undefined).

   Errors name the file and the entry: a missing, truncated or corrupt file
   (checksum mismatch with the block and byte range), an index that does not
   parse or points past a file's end, an unknown name, a dtype or shape
   mismatch, a full disk (VS_ERR_IO from the write, with the file). A failed save
   removes its temporary directory.
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

// >>ckpt-commit ----------------------------------------------------------------

/* The newest complete checkpoint in `folder` (by name order of its
   subdirectories: name them so, e.g. "step-000100"), into out[cap]; partial
   ones (a temporary name, no complete index) are never returned.
   VS_ERR_INVALID naming the folder when there is none. Not collective. */
VS_API vs_result vs_ckpt_latest(const char* folder, char* out, size_t cap);
/* Deletes all but the newest `keep` complete checkpoints of `folder`, and
   leftovers of interrupted saves. Not collective: call it on one rank. */
VS_API vs_result vs_ckpt_retain(const char* folder, int keep);

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

/* One named thing to save or load.
   - name: unique in a checkpoint, 1 to 255 bytes (VS_CKPT_NAME_MAX with the
     NUL), any bytes but control characters (below 0x20), '#' (it joins a name
     and its piece in the files' keys), '"' and '\\'; a bad name is
     VS_ERR_INVALID naming it.
   - TENSOR/RANGE: t gives the global shape, dtype, layout (on any mesh or
     submesh of the saving job: a PP stage's parameters live on that stage's
     DP x TP submesh) and this rank's data. Partial placements are refused:
     reduce first. On save, several ranks may hold the same box (replicated
     dims) or the same range: it is written once, by one of them, chosen so
     the work spreads over the ranks.
   - skip = 1: this rank takes no part in the entry (e.g. a ZeRO range it does
     not own as primary); the other ranks still save it.
   - BLOB: blob/blob_bytes; on save every rank that lists it must give the
     same bytes (one writes them), at most 2^48; on load blob_bytes is the
     capacity, and the entry's stored size comes back in blob_bytes. */
typedef struct vs_ckpt_entry {
    const char* name;
    vs_ckpt_kind kind;
    vs_dtensor t;
    int64_t range_begin, range_end; // RANGE
    void* blob;                     // BLOB
    size_t blob_bytes;
    int device; // t.data is CUDA device memory (NCCL builds; copied through host memory: a piece at a time)
    int skip;
} vs_ckpt_entry;

typedef struct vs_ckpt vs_ckpt;

/* The default of vs_ckpt_desc (vs_ckpt_query_desc returns it resolved). */
#define VS_CKPT_DEFAULT_ASYNC_MAX_BYTES ((size_t)4 << 30) // 4 GiB

typedef struct vs_ckpt_desc {
    vs_mesh* mesh;            // required: every rank of it saves and loads together
    int no_checksum;          // 0: CRC32C of every 1 MiB block of every piece, verified on load
    size_t async_max_bytes;   // async saves copy at most this much host memory (0: VS_CKPT_DEFAULT_ASYNC_MAX_BYTES)
    int keep_last;            // vs_ckpt_save into a folder keeps the newest N (0: all)
    int no_readahead;         // 1: vs_ckpt_load starts no read-ahead thread (Linux; see >>ckpt-api)
    int untouched_on_error;   // 1: an entry that fails to load leaves its buffer untouched (all its
                              // blocks verified before any is copied: its bytes read twice); 0: a
                              // host tensor streams, and a failing one may hold verified values in part
} vs_ckpt_desc;

/* Collective over desc->mesh: makes the checkpointer (its own communicator, so
   its metadata exchanges never meet the trainer's collectives). */
VS_API vs_result vs_ckpt_init(const vs_ckpt_desc* desc, vs_ckpt** out);
/* The desc as the checkpointer uses it, every zero-is-default value resolved
   (as sokol's sg_query_desc): async_max_bytes (0: VS_CKPT_DEFAULT_ASYNC_MAX_BYTES);
   keep_last 0 stays (it means all) and the flags are 0 or 1 (vs_ckpt_init
   refuses others). Passing the result to vs_ckpt_init gives the same settings. */
VS_API vs_result vs_ckpt_query_desc(const vs_ckpt* ck, vs_ckpt_desc* out);
/* Ends an async save first, as vs_ckpt_wait (collective then; its result is
   the return value). NULL: VS_OK; a second free: VS_ERR_STATE (top comment,
   "Lifetime"). */
VS_API vs_result vs_ckpt_free(vs_ckpt* ck);

typedef struct vs_ckpt_save_opts {
    int async;     // 1: copy the buffers and return; a background thread writes, vs_ckpt_wait commits
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
/* Ends an async save: joins its writer thread, then (collective: every rank
   calls it, or its next save, load or free) commits the checkpoint; the
   result is every rank's (errors of the background writes surface here).
   VS_OK at once when no async save is in flight. */
VS_API vs_result vs_ckpt_wait(vs_ckpt* ck);

/* Loads the entries from `path` (collective): each rank gives what it needs
   (same names; any mesh, layouts and ranges) and reads only the bytes it needs,
   verifying checksums. loaded (may be NULL): n flags, 1 for each entry written
   into the caller's buffer. On an error the entry that failed may be partly
   written (a host tensor: verified values only), the ones after it are
   untouched.

   On Linux, where a rank reads 16 MiB or more, a read-ahead thread
   brings its next ranges into the page cache while it checksums and copies
   (joined before the call returns; desc.no_readahead turns it off). */
VS_API vs_result vs_ckpt_load(vs_ckpt* ck, const char* path, vs_ckpt_entry* entries, int n, int* loaded);

/* Host memory the last async save copied into, and its bound. */
VS_API vs_result vs_ckpt_async_memory(const vs_ckpt* ck, size_t* used, size_t* bound);

// >>ckpt-ddp -------------------------------------------------------------------

struct vs_ddp;
/* The whole state of a vs_ddp (parameters, fp32 masters, optimizer moments, the
   step count) as entries "<prefix><param>", "<prefix><param>.master",
   ".exp_avg", ".exp_avg_sq", ".momentum", "<prefix>__step", in global,
   unflattened form: any DP size, ZeRO stage, TP layout or PP split loads it.
   Under ZeRO-3 each rank saves and loads its parameters' owned ranges
   (vs_ddp_param_owned), as the optimizer state; a load between steps drops
   the gathers prefetched from the old shards (vs_ddp_owned_rewrite), one with
   a group still gathered is VS_ERR_STATE naming it.
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
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <pthread.h>
#include <time.h>
/* Device memory: copies through the CUDA runtime (NCCL builds; tests force it
   over a stand-in runtime with _VS_CKPT_FORCE_CUDA). */
#if defined(VESCALE_NCCL) || defined(_VS_CKPT_FORCE_CUDA)
#define _VS_CKPT_CUDA 1
#include <cuda_runtime.h>
#endif
/* Tests only: the metadata collectives staged through device memory as on NCCL,
   over the threads transport and the stand-in runtime (tests/test_ckpt_device.c). */
#ifndef _VS_CKPT_FORCE_STAGING
#define _VS_CKPT_FORCE_STAGING 0
#endif
#ifdef __cplusplus
extern "C" {
#endif

#define _VS_CKPT_PRIVATE static _VS_UNUSED

/* A checkpointer can tell it was freed (top comment, "Lifetime"): its magic,
   kept readable a while by vs_free_later. */
#define _VS_CKPT_LIVE 0x7673434bu /* "vsCK" */
#define _VS_CKPT_DEAD 0x76734444u /* "vsDD": freed */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_gone(const char* fn, const void* ck, uint32_t magic)
{
    if (magic == _VS_CKPT_DEAD) return vs_set_error(VS_ERR_STATE, "%s: this checkpointer was already freed", fn);
    return vs_set_error(VS_ERR_INVALID, "%s: %p is not a live checkpointer handle", fn, ck);
}
/* VS_OK for a live checkpointer or NULL (the function's own check names a NULL). */
#define _VS_CKPT_GONE(fn, ck) ((ck) && (ck)->magic != _VS_CKPT_LIVE ? _vs_ckpt_gone(fn, (ck), (ck)->magic) : VS_OK)

/* snprintf for paths and names: truncation is checked where it matters (path
   lengths are bounded on entry), and gcc's format-truncation analysis stays
   quiet about the rest. */
_VS_CKPT_PRIVATE _VS_PRINTF(3, 4) void _vs_ckpt_fmt(char* out, size_t cap, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, cap, fmt, ap);
    va_end(ap);
}

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
/* Whether entry e's pieces hold all of it (the parser saw them not overlap, so
   counting suffices): 1, or 0 with *have and *want (elements, or a blob's
   bytes; *want is -1 when the shape's element count overflows). */
_VS_CKPT_PRIVATE int _vs_ckpt_covered(const _vs_ckpt_ientry* e, int64_t* have, int64_t* want);

/* (the format's implementation) */

// CRC32C ----------------------------------------------------------------------

/* Slicing-by-8 tables of CRC32C (reflected 0x82F63B78): _vs_crc32c_tab[k][b] is the
   CRC register after byte b followed by k zero bytes. Written out: no mutable state. */
static const uint32_t _vs_crc32c_tab[8][256] = {
    {
        0x00000000, 0xf26b8303, 0xe13b70f7, 0x1350f3f4, 0xc79a971f, 0x35f1141c, 0x26a1e7e8, 0xd4ca64eb,
        0x8ad958cf, 0x78b2dbcc, 0x6be22838, 0x9989ab3b, 0x4d43cfd0, 0xbf284cd3, 0xac78bf27, 0x5e133c24,
        0x105ec76f, 0xe235446c, 0xf165b798, 0x030e349b, 0xd7c45070, 0x25afd373, 0x36ff2087, 0xc494a384,
        0x9a879fa0, 0x68ec1ca3, 0x7bbcef57, 0x89d76c54, 0x5d1d08bf, 0xaf768bbc, 0xbc267848, 0x4e4dfb4b,
        0x20bd8ede, 0xd2d60ddd, 0xc186fe29, 0x33ed7d2a, 0xe72719c1, 0x154c9ac2, 0x061c6936, 0xf477ea35,
        0xaa64d611, 0x580f5512, 0x4b5fa6e6, 0xb93425e5, 0x6dfe410e, 0x9f95c20d, 0x8cc531f9, 0x7eaeb2fa,
        0x30e349b1, 0xc288cab2, 0xd1d83946, 0x23b3ba45, 0xf779deae, 0x05125dad, 0x1642ae59, 0xe4292d5a,
        0xba3a117e, 0x4851927d, 0x5b016189, 0xa96ae28a, 0x7da08661, 0x8fcb0562, 0x9c9bf696, 0x6ef07595,
        0x417b1dbc, 0xb3109ebf, 0xa0406d4b, 0x522bee48, 0x86e18aa3, 0x748a09a0, 0x67dafa54, 0x95b17957,
        0xcba24573, 0x39c9c670, 0x2a993584, 0xd8f2b687, 0x0c38d26c, 0xfe53516f, 0xed03a29b, 0x1f682198,
        0x5125dad3, 0xa34e59d0, 0xb01eaa24, 0x42752927, 0x96bf4dcc, 0x64d4cecf, 0x77843d3b, 0x85efbe38,
        0xdbfc821c, 0x2997011f, 0x3ac7f2eb, 0xc8ac71e8, 0x1c661503, 0xee0d9600, 0xfd5d65f4, 0x0f36e6f7,
        0x61c69362, 0x93ad1061, 0x80fde395, 0x72966096, 0xa65c047d, 0x5437877e, 0x4767748a, 0xb50cf789,
        0xeb1fcbad, 0x197448ae, 0x0a24bb5a, 0xf84f3859, 0x2c855cb2, 0xdeeedfb1, 0xcdbe2c45, 0x3fd5af46,
        0x7198540d, 0x83f3d70e, 0x90a324fa, 0x62c8a7f9, 0xb602c312, 0x44694011, 0x5739b3e5, 0xa55230e6,
        0xfb410cc2, 0x092a8fc1, 0x1a7a7c35, 0xe811ff36, 0x3cdb9bdd, 0xceb018de, 0xdde0eb2a, 0x2f8b6829,
        0x82f63b78, 0x709db87b, 0x63cd4b8f, 0x91a6c88c, 0x456cac67, 0xb7072f64, 0xa457dc90, 0x563c5f93,
        0x082f63b7, 0xfa44e0b4, 0xe9141340, 0x1b7f9043, 0xcfb5f4a8, 0x3dde77ab, 0x2e8e845f, 0xdce5075c,
        0x92a8fc17, 0x60c37f14, 0x73938ce0, 0x81f80fe3, 0x55326b08, 0xa759e80b, 0xb4091bff, 0x466298fc,
        0x1871a4d8, 0xea1a27db, 0xf94ad42f, 0x0b21572c, 0xdfeb33c7, 0x2d80b0c4, 0x3ed04330, 0xccbbc033,
        0xa24bb5a6, 0x502036a5, 0x4370c551, 0xb11b4652, 0x65d122b9, 0x97baa1ba, 0x84ea524e, 0x7681d14d,
        0x2892ed69, 0xdaf96e6a, 0xc9a99d9e, 0x3bc21e9d, 0xef087a76, 0x1d63f975, 0x0e330a81, 0xfc588982,
        0xb21572c9, 0x407ef1ca, 0x532e023e, 0xa145813d, 0x758fe5d6, 0x87e466d5, 0x94b49521, 0x66df1622,
        0x38cc2a06, 0xcaa7a905, 0xd9f75af1, 0x2b9cd9f2, 0xff56bd19, 0x0d3d3e1a, 0x1e6dcdee, 0xec064eed,
        0xc38d26c4, 0x31e6a5c7, 0x22b65633, 0xd0ddd530, 0x0417b1db, 0xf67c32d8, 0xe52cc12c, 0x1747422f,
        0x49547e0b, 0xbb3ffd08, 0xa86f0efc, 0x5a048dff, 0x8ecee914, 0x7ca56a17, 0x6ff599e3, 0x9d9e1ae0,
        0xd3d3e1ab, 0x21b862a8, 0x32e8915c, 0xc083125f, 0x144976b4, 0xe622f5b7, 0xf5720643, 0x07198540,
        0x590ab964, 0xab613a67, 0xb831c993, 0x4a5a4a90, 0x9e902e7b, 0x6cfbad78, 0x7fab5e8c, 0x8dc0dd8f,
        0xe330a81a, 0x115b2b19, 0x020bd8ed, 0xf0605bee, 0x24aa3f05, 0xd6c1bc06, 0xc5914ff2, 0x37faccf1,
        0x69e9f0d5, 0x9b8273d6, 0x88d28022, 0x7ab90321, 0xae7367ca, 0x5c18e4c9, 0x4f48173d, 0xbd23943e,
        0xf36e6f75, 0x0105ec76, 0x12551f82, 0xe03e9c81, 0x34f4f86a, 0xc69f7b69, 0xd5cf889d, 0x27a40b9e,
        0x79b737ba, 0x8bdcb4b9, 0x988c474d, 0x6ae7c44e, 0xbe2da0a5, 0x4c4623a6, 0x5f16d052, 0xad7d5351,
    },
    {
        0x00000000, 0x13a29877, 0x274530ee, 0x34e7a899, 0x4e8a61dc, 0x5d28f9ab, 0x69cf5132, 0x7a6dc945,
        0x9d14c3b8, 0x8eb65bcf, 0xba51f356, 0xa9f36b21, 0xd39ea264, 0xc03c3a13, 0xf4db928a, 0xe7790afd,
        0x3fc5f181, 0x2c6769f6, 0x1880c16f, 0x0b225918, 0x714f905d, 0x62ed082a, 0x560aa0b3, 0x45a838c4,
        0xa2d13239, 0xb173aa4e, 0x859402d7, 0x96369aa0, 0xec5b53e5, 0xfff9cb92, 0xcb1e630b, 0xd8bcfb7c,
        0x7f8be302, 0x6c297b75, 0x58ced3ec, 0x4b6c4b9b, 0x310182de, 0x22a31aa9, 0x1644b230, 0x05e62a47,
        0xe29f20ba, 0xf13db8cd, 0xc5da1054, 0xd6788823, 0xac154166, 0xbfb7d911, 0x8b507188, 0x98f2e9ff,
        0x404e1283, 0x53ec8af4, 0x670b226d, 0x74a9ba1a, 0x0ec4735f, 0x1d66eb28, 0x298143b1, 0x3a23dbc6,
        0xdd5ad13b, 0xcef8494c, 0xfa1fe1d5, 0xe9bd79a2, 0x93d0b0e7, 0x80722890, 0xb4958009, 0xa737187e,
        0xff17c604, 0xecb55e73, 0xd852f6ea, 0xcbf06e9d, 0xb19da7d8, 0xa23f3faf, 0x96d89736, 0x857a0f41,
        0x620305bc, 0x71a19dcb, 0x45463552, 0x56e4ad25, 0x2c896460, 0x3f2bfc17, 0x0bcc548e, 0x186eccf9,
        0xc0d23785, 0xd370aff2, 0xe797076b, 0xf4359f1c, 0x8e585659, 0x9dface2e, 0xa91d66b7, 0xbabffec0,
        0x5dc6f43d, 0x4e646c4a, 0x7a83c4d3, 0x69215ca4, 0x134c95e1, 0x00ee0d96, 0x3409a50f, 0x27ab3d78,
        0x809c2506, 0x933ebd71, 0xa7d915e8, 0xb47b8d9f, 0xce1644da, 0xddb4dcad, 0xe9537434, 0xfaf1ec43,
        0x1d88e6be, 0x0e2a7ec9, 0x3acdd650, 0x296f4e27, 0x53028762, 0x40a01f15, 0x7447b78c, 0x67e52ffb,
        0xbf59d487, 0xacfb4cf0, 0x981ce469, 0x8bbe7c1e, 0xf1d3b55b, 0xe2712d2c, 0xd69685b5, 0xc5341dc2,
        0x224d173f, 0x31ef8f48, 0x050827d1, 0x16aabfa6, 0x6cc776e3, 0x7f65ee94, 0x4b82460d, 0x5820de7a,
        0xfbc3faf9, 0xe861628e, 0xdc86ca17, 0xcf245260, 0xb5499b25, 0xa6eb0352, 0x920cabcb, 0x81ae33bc,
        0x66d73941, 0x7575a136, 0x419209af, 0x523091d8, 0x285d589d, 0x3bffc0ea, 0x0f186873, 0x1cbaf004,
        0xc4060b78, 0xd7a4930f, 0xe3433b96, 0xf0e1a3e1, 0x8a8c6aa4, 0x992ef2d3, 0xadc95a4a, 0xbe6bc23d,
        0x5912c8c0, 0x4ab050b7, 0x7e57f82e, 0x6df56059, 0x1798a91c, 0x043a316b, 0x30dd99f2, 0x237f0185,
        0x844819fb, 0x97ea818c, 0xa30d2915, 0xb0afb162, 0xcac27827, 0xd960e050, 0xed8748c9, 0xfe25d0be,
        0x195cda43, 0x0afe4234, 0x3e19eaad, 0x2dbb72da, 0x57d6bb9f, 0x447423e8, 0x70938b71, 0x63311306,
        0xbb8de87a, 0xa82f700d, 0x9cc8d894, 0x8f6a40e3, 0xf50789a6, 0xe6a511d1, 0xd242b948, 0xc1e0213f,
        0x26992bc2, 0x353bb3b5, 0x01dc1b2c, 0x127e835b, 0x68134a1e, 0x7bb1d269, 0x4f567af0, 0x5cf4e287,
        0x04d43cfd, 0x1776a48a, 0x23910c13, 0x30339464, 0x4a5e5d21, 0x59fcc556, 0x6d1b6dcf, 0x7eb9f5b8,
        0x99c0ff45, 0x8a626732, 0xbe85cfab, 0xad2757dc, 0xd74a9e99, 0xc4e806ee, 0xf00fae77, 0xe3ad3600,
        0x3b11cd7c, 0x28b3550b, 0x1c54fd92, 0x0ff665e5, 0x759baca0, 0x663934d7, 0x52de9c4e, 0x417c0439,
        0xa6050ec4, 0xb5a796b3, 0x81403e2a, 0x92e2a65d, 0xe88f6f18, 0xfb2df76f, 0xcfca5ff6, 0xdc68c781,
        0x7b5fdfff, 0x68fd4788, 0x5c1aef11, 0x4fb87766, 0x35d5be23, 0x26772654, 0x12908ecd, 0x013216ba,
        0xe64b1c47, 0xf5e98430, 0xc10e2ca9, 0xd2acb4de, 0xa8c17d9b, 0xbb63e5ec, 0x8f844d75, 0x9c26d502,
        0x449a2e7e, 0x5738b609, 0x63df1e90, 0x707d86e7, 0x0a104fa2, 0x19b2d7d5, 0x2d557f4c, 0x3ef7e73b,
        0xd98eedc6, 0xca2c75b1, 0xfecbdd28, 0xed69455f, 0x97048c1a, 0x84a6146d, 0xb041bcf4, 0xa3e32483,
    },
    {
        0x00000000, 0xa541927e, 0x4f6f520d, 0xea2ec073, 0x9edea41a, 0x3b9f3664, 0xd1b1f617, 0x74f06469,
        0x38513ec5, 0x9d10acbb, 0x773e6cc8, 0xd27ffeb6, 0xa68f9adf, 0x03ce08a1, 0xe9e0c8d2, 0x4ca15aac,
        0x70a27d8a, 0xd5e3eff4, 0x3fcd2f87, 0x9a8cbdf9, 0xee7cd990, 0x4b3d4bee, 0xa1138b9d, 0x045219e3,
        0x48f3434f, 0xedb2d131, 0x079c1142, 0xa2dd833c, 0xd62de755, 0x736c752b, 0x9942b558, 0x3c032726,
        0xe144fb14, 0x4405696a, 0xae2ba919, 0x0b6a3b67, 0x7f9a5f0e, 0xdadbcd70, 0x30f50d03, 0x95b49f7d,
        0xd915c5d1, 0x7c5457af, 0x967a97dc, 0x333b05a2, 0x47cb61cb, 0xe28af3b5, 0x08a433c6, 0xade5a1b8,
        0x91e6869e, 0x34a714e0, 0xde89d493, 0x7bc846ed, 0x0f382284, 0xaa79b0fa, 0x40577089, 0xe516e2f7,
        0xa9b7b85b, 0x0cf62a25, 0xe6d8ea56, 0x43997828, 0x37691c41, 0x92288e3f, 0x78064e4c, 0xdd47dc32,
        0xc76580d9, 0x622412a7, 0x880ad2d4, 0x2d4b40aa, 0x59bb24c3, 0xfcfab6bd, 0x16d476ce, 0xb395e4b0,
        0xff34be1c, 0x5a752c62, 0xb05bec11, 0x151a7e6f, 0x61ea1a06, 0xc4ab8878, 0x2e85480b, 0x8bc4da75,
        0xb7c7fd53, 0x12866f2d, 0xf8a8af5e, 0x5de93d20, 0x29195949, 0x8c58cb37, 0x66760b44, 0xc337993a,
        0x8f96c396, 0x2ad751e8, 0xc0f9919b, 0x65b803e5, 0x1148678c, 0xb409f5f2, 0x5e273581, 0xfb66a7ff,
        0x26217bcd, 0x8360e9b3, 0x694e29c0, 0xcc0fbbbe, 0xb8ffdfd7, 0x1dbe4da9, 0xf7908dda, 0x52d11fa4,
        0x1e704508, 0xbb31d776, 0x511f1705, 0xf45e857b, 0x80aee112, 0x25ef736c, 0xcfc1b31f, 0x6a802161,
        0x56830647, 0xf3c29439, 0x19ec544a, 0xbcadc634, 0xc85da25d, 0x6d1c3023, 0x8732f050, 0x2273622e,
        0x6ed23882, 0xcb93aafc, 0x21bd6a8f, 0x84fcf8f1, 0xf00c9c98, 0x554d0ee6, 0xbf63ce95, 0x1a225ceb,
        0x8b277743, 0x2e66e53d, 0xc448254e, 0x6109b730, 0x15f9d359, 0xb0b84127, 0x5a968154, 0xffd7132a,
        0xb3764986, 0x1637dbf8, 0xfc191b8b, 0x595889f5, 0x2da8ed9c, 0x88e97fe2, 0x62c7bf91, 0xc7862def,
        0xfb850ac9, 0x5ec498b7, 0xb4ea58c4, 0x11abcaba, 0x655baed3, 0xc01a3cad, 0x2a34fcde, 0x8f756ea0,
        0xc3d4340c, 0x6695a672, 0x8cbb6601, 0x29faf47f, 0x5d0a9016, 0xf84b0268, 0x1265c21b, 0xb7245065,
        0x6a638c57, 0xcf221e29, 0x250cde5a, 0x804d4c24, 0xf4bd284d, 0x51fcba33, 0xbbd27a40, 0x1e93e83e,
        0x5232b292, 0xf77320ec, 0x1d5de09f, 0xb81c72e1, 0xccec1688, 0x69ad84f6, 0x83834485, 0x26c2d6fb,
        0x1ac1f1dd, 0xbf8063a3, 0x55aea3d0, 0xf0ef31ae, 0x841f55c7, 0x215ec7b9, 0xcb7007ca, 0x6e3195b4,
        0x2290cf18, 0x87d15d66, 0x6dff9d15, 0xc8be0f6b, 0xbc4e6b02, 0x190ff97c, 0xf321390f, 0x5660ab71,
        0x4c42f79a, 0xe90365e4, 0x032da597, 0xa66c37e9, 0xd29c5380, 0x77ddc1fe, 0x9df3018d, 0x38b293f3,
        0x7413c95f, 0xd1525b21, 0x3b7c9b52, 0x9e3d092c, 0xeacd6d45, 0x4f8cff3b, 0xa5a23f48, 0x00e3ad36,
        0x3ce08a10, 0x99a1186e, 0x738fd81d, 0xd6ce4a63, 0xa23e2e0a, 0x077fbc74, 0xed517c07, 0x4810ee79,
        0x04b1b4d5, 0xa1f026ab, 0x4bdee6d8, 0xee9f74a6, 0x9a6f10cf, 0x3f2e82b1, 0xd50042c2, 0x7041d0bc,
        0xad060c8e, 0x08479ef0, 0xe2695e83, 0x4728ccfd, 0x33d8a894, 0x96993aea, 0x7cb7fa99, 0xd9f668e7,
        0x9557324b, 0x3016a035, 0xda386046, 0x7f79f238, 0x0b899651, 0xaec8042f, 0x44e6c45c, 0xe1a75622,
        0xdda47104, 0x78e5e37a, 0x92cb2309, 0x378ab177, 0x437ad51e, 0xe63b4760, 0x0c158713, 0xa954156d,
        0xe5f54fc1, 0x40b4ddbf, 0xaa9a1dcc, 0x0fdb8fb2, 0x7b2bebdb, 0xde6a79a5, 0x3444b9d6, 0x91052ba8,
    },
    {
        0x00000000, 0xdd45aab8, 0xbf672381, 0x62228939, 0x7b2231f3, 0xa6679b4b, 0xc4451272, 0x1900b8ca,
        0xf64463e6, 0x2b01c95e, 0x49234067, 0x9466eadf, 0x8d665215, 0x5023f8ad, 0x32017194, 0xef44db2c,
        0xe964b13d, 0x34211b85, 0x560392bc, 0x8b463804, 0x924680ce, 0x4f032a76, 0x2d21a34f, 0xf06409f7,
        0x1f20d2db, 0xc2657863, 0xa047f15a, 0x7d025be2, 0x6402e328, 0xb9474990, 0xdb65c0a9, 0x06206a11,
        0xd725148b, 0x0a60be33, 0x6842370a, 0xb5079db2, 0xac072578, 0x71428fc0, 0x136006f9, 0xce25ac41,
        0x2161776d, 0xfc24ddd5, 0x9e0654ec, 0x4343fe54, 0x5a43469e, 0x8706ec26, 0xe524651f, 0x3861cfa7,
        0x3e41a5b6, 0xe3040f0e, 0x81268637, 0x5c632c8f, 0x45639445, 0x98263efd, 0xfa04b7c4, 0x27411d7c,
        0xc805c650, 0x15406ce8, 0x7762e5d1, 0xaa274f69, 0xb327f7a3, 0x6e625d1b, 0x0c40d422, 0xd1057e9a,
        0xaba65fe7, 0x76e3f55f, 0x14c17c66, 0xc984d6de, 0xd0846e14, 0x0dc1c4ac, 0x6fe34d95, 0xb2a6e72d,
        0x5de23c01, 0x80a796b9, 0xe2851f80, 0x3fc0b538, 0x26c00df2, 0xfb85a74a, 0x99a72e73, 0x44e284cb,
        0x42c2eeda, 0x9f874462, 0xfda5cd5b, 0x20e067e3, 0x39e0df29, 0xe4a57591, 0x8687fca8, 0x5bc25610,
        0xb4868d3c, 0x69c32784, 0x0be1aebd, 0xd6a40405, 0xcfa4bccf, 0x12e11677, 0x70c39f4e, 0xad8635f6,
        0x7c834b6c, 0xa1c6e1d4, 0xc3e468ed, 0x1ea1c255, 0x07a17a9f, 0xdae4d027, 0xb8c6591e, 0x6583f3a6,
        0x8ac7288a, 0x57828232, 0x35a00b0b, 0xe8e5a1b3, 0xf1e51979, 0x2ca0b3c1, 0x4e823af8, 0x93c79040,
        0x95e7fa51, 0x48a250e9, 0x2a80d9d0, 0xf7c57368, 0xeec5cba2, 0x3380611a, 0x51a2e823, 0x8ce7429b,
        0x63a399b7, 0xbee6330f, 0xdcc4ba36, 0x0181108e, 0x1881a844, 0xc5c402fc, 0xa7e68bc5, 0x7aa3217d,
        0x52a0c93f, 0x8fe56387, 0xedc7eabe, 0x30824006, 0x2982f8cc, 0xf4c75274, 0x96e5db4d, 0x4ba071f5,
        0xa4e4aad9, 0x79a10061, 0x1b838958, 0xc6c623e0, 0xdfc69b2a, 0x02833192, 0x60a1b8ab, 0xbde41213,
        0xbbc47802, 0x6681d2ba, 0x04a35b83, 0xd9e6f13b, 0xc0e649f1, 0x1da3e349, 0x7f816a70, 0xa2c4c0c8,
        0x4d801be4, 0x90c5b15c, 0xf2e73865, 0x2fa292dd, 0x36a22a17, 0xebe780af, 0x89c50996, 0x5480a32e,
        0x8585ddb4, 0x58c0770c, 0x3ae2fe35, 0xe7a7548d, 0xfea7ec47, 0x23e246ff, 0x41c0cfc6, 0x9c85657e,
        0x73c1be52, 0xae8414ea, 0xcca69dd3, 0x11e3376b, 0x08e38fa1, 0xd5a62519, 0xb784ac20, 0x6ac10698,
        0x6ce16c89, 0xb1a4c631, 0xd3864f08, 0x0ec3e5b0, 0x17c35d7a, 0xca86f7c2, 0xa8a47efb, 0x75e1d443,
        0x9aa50f6f, 0x47e0a5d7, 0x25c22cee, 0xf8878656, 0xe1873e9c, 0x3cc29424, 0x5ee01d1d, 0x83a5b7a5,
        0xf90696d8, 0x24433c60, 0x4661b559, 0x9b241fe1, 0x8224a72b, 0x5f610d93, 0x3d4384aa, 0xe0062e12,
        0x0f42f53e, 0xd2075f86, 0xb025d6bf, 0x6d607c07, 0x7460c4cd, 0xa9256e75, 0xcb07e74c, 0x16424df4,
        0x106227e5, 0xcd278d5d, 0xaf050464, 0x7240aedc, 0x6b401616, 0xb605bcae, 0xd4273597, 0x09629f2f,
        0xe6264403, 0x3b63eebb, 0x59416782, 0x8404cd3a, 0x9d0475f0, 0x4041df48, 0x22635671, 0xff26fcc9,
        0x2e238253, 0xf36628eb, 0x9144a1d2, 0x4c010b6a, 0x5501b3a0, 0x88441918, 0xea669021, 0x37233a99,
        0xd867e1b5, 0x05224b0d, 0x6700c234, 0xba45688c, 0xa345d046, 0x7e007afe, 0x1c22f3c7, 0xc167597f,
        0xc747336e, 0x1a0299d6, 0x782010ef, 0xa565ba57, 0xbc65029d, 0x6120a825, 0x0302211c, 0xde478ba4,
        0x31035088, 0xec46fa30, 0x8e647309, 0x5321d9b1, 0x4a21617b, 0x9764cbc3, 0xf54642fa, 0x2803e842,
    },
    {
        0x00000000, 0x38116fac, 0x7022df58, 0x4833b0f4, 0xe045beb0, 0xd854d11c, 0x906761e8, 0xa8760e44,
        0xc5670b91, 0xfd76643d, 0xb545d4c9, 0x8d54bb65, 0x2522b521, 0x1d33da8d, 0x55006a79, 0x6d1105d5,
        0x8f2261d3, 0xb7330e7f, 0xff00be8b, 0xc711d127, 0x6f67df63, 0x5776b0cf, 0x1f45003b, 0x27546f97,
        0x4a456a42, 0x725405ee, 0x3a67b51a, 0x0276dab6, 0xaa00d4f2, 0x9211bb5e, 0xda220baa, 0xe2336406,
        0x1ba8b557, 0x23b9dafb, 0x6b8a6a0f, 0x539b05a3, 0xfbed0be7, 0xc3fc644b, 0x8bcfd4bf, 0xb3debb13,
        0xdecfbec6, 0xe6ded16a, 0xaeed619e, 0x96fc0e32, 0x3e8a0076, 0x069b6fda, 0x4ea8df2e, 0x76b9b082,
        0x948ad484, 0xac9bbb28, 0xe4a80bdc, 0xdcb96470, 0x74cf6a34, 0x4cde0598, 0x04edb56c, 0x3cfcdac0,
        0x51eddf15, 0x69fcb0b9, 0x21cf004d, 0x19de6fe1, 0xb1a861a5, 0x89b90e09, 0xc18abefd, 0xf99bd151,
        0x37516aae, 0x0f400502, 0x4773b5f6, 0x7f62da5a, 0xd714d41e, 0xef05bbb2, 0xa7360b46, 0x9f2764ea,
        0xf236613f, 0xca270e93, 0x8214be67, 0xba05d1cb, 0x1273df8f, 0x2a62b023, 0x625100d7, 0x5a406f7b,
        0xb8730b7d, 0x806264d1, 0xc851d425, 0xf040bb89, 0x5836b5cd, 0x6027da61, 0x28146a95, 0x10050539,
        0x7d1400ec, 0x45056f40, 0x0d36dfb4, 0x3527b018, 0x9d51be5c, 0xa540d1f0, 0xed736104, 0xd5620ea8,
        0x2cf9dff9, 0x14e8b055, 0x5cdb00a1, 0x64ca6f0d, 0xccbc6149, 0xf4ad0ee5, 0xbc9ebe11, 0x848fd1bd,
        0xe99ed468, 0xd18fbbc4, 0x99bc0b30, 0xa1ad649c, 0x09db6ad8, 0x31ca0574, 0x79f9b580, 0x41e8da2c,
        0xa3dbbe2a, 0x9bcad186, 0xd3f96172, 0xebe80ede, 0x439e009a, 0x7b8f6f36, 0x33bcdfc2, 0x0badb06e,
        0x66bcb5bb, 0x5eadda17, 0x169e6ae3, 0x2e8f054f, 0x86f90b0b, 0xbee864a7, 0xf6dbd453, 0xcecabbff,
        0x6ea2d55c, 0x56b3baf0, 0x1e800a04, 0x269165a8, 0x8ee76bec, 0xb6f60440, 0xfec5b4b4, 0xc6d4db18,
        0xabc5decd, 0x93d4b161, 0xdbe70195, 0xe3f66e39, 0x4b80607d, 0x73910fd1, 0x3ba2bf25, 0x03b3d089,
        0xe180b48f, 0xd991db23, 0x91a26bd7, 0xa9b3047b, 0x01c50a3f, 0x39d46593, 0x71e7d567, 0x49f6bacb,
        0x24e7bf1e, 0x1cf6d0b2, 0x54c56046, 0x6cd40fea, 0xc4a201ae, 0xfcb36e02, 0xb480def6, 0x8c91b15a,
        0x750a600b, 0x4d1b0fa7, 0x0528bf53, 0x3d39d0ff, 0x954fdebb, 0xad5eb117, 0xe56d01e3, 0xdd7c6e4f,
        0xb06d6b9a, 0x887c0436, 0xc04fb4c2, 0xf85edb6e, 0x5028d52a, 0x6839ba86, 0x200a0a72, 0x181b65de,
        0xfa2801d8, 0xc2396e74, 0x8a0ade80, 0xb21bb12c, 0x1a6dbf68, 0x227cd0c4, 0x6a4f6030, 0x525e0f9c,
        0x3f4f0a49, 0x075e65e5, 0x4f6dd511, 0x777cbabd, 0xdf0ab4f9, 0xe71bdb55, 0xaf286ba1, 0x9739040d,
        0x59f3bff2, 0x61e2d05e, 0x29d160aa, 0x11c00f06, 0xb9b60142, 0x81a76eee, 0xc994de1a, 0xf185b1b6,
        0x9c94b463, 0xa485dbcf, 0xecb66b3b, 0xd4a70497, 0x7cd10ad3, 0x44c0657f, 0x0cf3d58b, 0x34e2ba27,
        0xd6d1de21, 0xeec0b18d, 0xa6f30179, 0x9ee26ed5, 0x36946091, 0x0e850f3d, 0x46b6bfc9, 0x7ea7d065,
        0x13b6d5b0, 0x2ba7ba1c, 0x63940ae8, 0x5b856544, 0xf3f36b00, 0xcbe204ac, 0x83d1b458, 0xbbc0dbf4,
        0x425b0aa5, 0x7a4a6509, 0x3279d5fd, 0x0a68ba51, 0xa21eb415, 0x9a0fdbb9, 0xd23c6b4d, 0xea2d04e1,
        0x873c0134, 0xbf2d6e98, 0xf71ede6c, 0xcf0fb1c0, 0x6779bf84, 0x5f68d028, 0x175b60dc, 0x2f4a0f70,
        0xcd796b76, 0xf56804da, 0xbd5bb42e, 0x854adb82, 0x2d3cd5c6, 0x152dba6a, 0x5d1e0a9e, 0x650f6532,
        0x081e60e7, 0x300f0f4b, 0x783cbfbf, 0x402dd013, 0xe85bde57, 0xd04ab1fb, 0x9879010f, 0xa0686ea3,
    },
    {
        0x00000000, 0xef306b19, 0xdb8ca0c3, 0x34bccbda, 0xb2f53777, 0x5dc55c6e, 0x697997b4, 0x8649fcad,
        0x6006181f, 0x8f367306, 0xbb8ab8dc, 0x54bad3c5, 0xd2f32f68, 0x3dc34471, 0x097f8fab, 0xe64fe4b2,
        0xc00c303e, 0x2f3c5b27, 0x1b8090fd, 0xf4b0fbe4, 0x72f90749, 0x9dc96c50, 0xa975a78a, 0x4645cc93,
        0xa00a2821, 0x4f3a4338, 0x7b8688e2, 0x94b6e3fb, 0x12ff1f56, 0xfdcf744f, 0xc973bf95, 0x2643d48c,
        0x85f4168d, 0x6ac47d94, 0x5e78b64e, 0xb148dd57, 0x370121fa, 0xd8314ae3, 0xec8d8139, 0x03bdea20,
        0xe5f20e92, 0x0ac2658b, 0x3e7eae51, 0xd14ec548, 0x570739e5, 0xb83752fc, 0x8c8b9926, 0x63bbf23f,
        0x45f826b3, 0xaac84daa, 0x9e748670, 0x7144ed69, 0xf70d11c4, 0x183d7add, 0x2c81b107, 0xc3b1da1e,
        0x25fe3eac, 0xcace55b5, 0xfe729e6f, 0x1142f576, 0x970b09db, 0x783b62c2, 0x4c87a918, 0xa3b7c201,
        0x0e045beb, 0xe13430f2, 0xd588fb28, 0x3ab89031, 0xbcf16c9c, 0x53c10785, 0x677dcc5f, 0x884da746,
        0x6e0243f4, 0x813228ed, 0xb58ee337, 0x5abe882e, 0xdcf77483, 0x33c71f9a, 0x077bd440, 0xe84bbf59,
        0xce086bd5, 0x213800cc, 0x1584cb16, 0xfab4a00f, 0x7cfd5ca2, 0x93cd37bb, 0xa771fc61, 0x48419778,
        0xae0e73ca, 0x413e18d3, 0x7582d309, 0x9ab2b810, 0x1cfb44bd, 0xf3cb2fa4, 0xc777e47e, 0x28478f67,
        0x8bf04d66, 0x64c0267f, 0x507ceda5, 0xbf4c86bc, 0x39057a11, 0xd6351108, 0xe289dad2, 0x0db9b1cb,
        0xebf65579, 0x04c63e60, 0x307af5ba, 0xdf4a9ea3, 0x5903620e, 0xb6330917, 0x828fc2cd, 0x6dbfa9d4,
        0x4bfc7d58, 0xa4cc1641, 0x9070dd9b, 0x7f40b682, 0xf9094a2f, 0x16392136, 0x2285eaec, 0xcdb581f5,
        0x2bfa6547, 0xc4ca0e5e, 0xf076c584, 0x1f46ae9d, 0x990f5230, 0x763f3929, 0x4283f2f3, 0xadb399ea,
        0x1c08b7d6, 0xf338dccf, 0xc7841715, 0x28b47c0c, 0xaefd80a1, 0x41cdebb8, 0x75712062, 0x9a414b7b,
        0x7c0eafc9, 0x933ec4d0, 0xa7820f0a, 0x48b26413, 0xcefb98be, 0x21cbf3a7, 0x1577387d, 0xfa475364,
        0xdc0487e8, 0x3334ecf1, 0x0788272b, 0xe8b84c32, 0x6ef1b09f, 0x81c1db86, 0xb57d105c, 0x5a4d7b45,
        0xbc029ff7, 0x5332f4ee, 0x678e3f34, 0x88be542d, 0x0ef7a880, 0xe1c7c399, 0xd57b0843, 0x3a4b635a,
        0x99fca15b, 0x76ccca42, 0x42700198, 0xad406a81, 0x2b09962c, 0xc439fd35, 0xf08536ef, 0x1fb55df6,
        0xf9fab944, 0x16cad25d, 0x22761987, 0xcd46729e, 0x4b0f8e33, 0xa43fe52a, 0x90832ef0, 0x7fb345e9,
        0x59f09165, 0xb6c0fa7c, 0x827c31a6, 0x6d4c5abf, 0xeb05a612, 0x0435cd0b, 0x308906d1, 0xdfb96dc8,
        0x39f6897a, 0xd6c6e263, 0xe27a29b9, 0x0d4a42a0, 0x8b03be0d, 0x6433d514, 0x508f1ece, 0xbfbf75d7,
        0x120cec3d, 0xfd3c8724, 0xc9804cfe, 0x26b027e7, 0xa0f9db4a, 0x4fc9b053, 0x7b757b89, 0x94451090,
        0x720af422, 0x9d3a9f3b, 0xa98654e1, 0x46b63ff8, 0xc0ffc355, 0x2fcfa84c, 0x1b736396, 0xf443088f,
        0xd200dc03, 0x3d30b71a, 0x098c7cc0, 0xe6bc17d9, 0x60f5eb74, 0x8fc5806d, 0xbb794bb7, 0x544920ae,
        0xb206c41c, 0x5d36af05, 0x698a64df, 0x86ba0fc6, 0x00f3f36b, 0xefc39872, 0xdb7f53a8, 0x344f38b1,
        0x97f8fab0, 0x78c891a9, 0x4c745a73, 0xa344316a, 0x250dcdc7, 0xca3da6de, 0xfe816d04, 0x11b1061d,
        0xf7fee2af, 0x18ce89b6, 0x2c72426c, 0xc3422975, 0x450bd5d8, 0xaa3bbec1, 0x9e87751b, 0x71b71e02,
        0x57f4ca8e, 0xb8c4a197, 0x8c786a4d, 0x63480154, 0xe501fdf9, 0x0a3196e0, 0x3e8d5d3a, 0xd1bd3623,
        0x37f2d291, 0xd8c2b988, 0xec7e7252, 0x034e194b, 0x8507e5e6, 0x6a378eff, 0x5e8b4525, 0xb1bb2e3c,
    },
    {
        0x00000000, 0x68032cc8, 0xd0065990, 0xb8057558, 0xa5e0c5d1, 0xcde3e919, 0x75e69c41, 0x1de5b089,
        0x4e2dfd53, 0x262ed19b, 0x9e2ba4c3, 0xf628880b, 0xebcd3882, 0x83ce144a, 0x3bcb6112, 0x53c84dda,
        0x9c5bfaa6, 0xf458d66e, 0x4c5da336, 0x245e8ffe, 0x39bb3f77, 0x51b813bf, 0xe9bd66e7, 0x81be4a2f,
        0xd27607f5, 0xba752b3d, 0x02705e65, 0x6a7372ad, 0x7796c224, 0x1f95eeec, 0xa7909bb4, 0xcf93b77c,
        0x3d5b83bd, 0x5558af75, 0xed5dda2d, 0x855ef6e5, 0x98bb466c, 0xf0b86aa4, 0x48bd1ffc, 0x20be3334,
        0x73767eee, 0x1b755226, 0xa370277e, 0xcb730bb6, 0xd696bb3f, 0xbe9597f7, 0x0690e2af, 0x6e93ce67,
        0xa100791b, 0xc90355d3, 0x7106208b, 0x19050c43, 0x04e0bcca, 0x6ce39002, 0xd4e6e55a, 0xbce5c992,
        0xef2d8448, 0x872ea880, 0x3f2bddd8, 0x5728f110, 0x4acd4199, 0x22ce6d51, 0x9acb1809, 0xf2c834c1,
        0x7ab7077a, 0x12b42bb2, 0xaab15eea, 0xc2b27222, 0xdf57c2ab, 0xb754ee63, 0x0f519b3b, 0x6752b7f3,
        0x349afa29, 0x5c99d6e1, 0xe49ca3b9, 0x8c9f8f71, 0x917a3ff8, 0xf9791330, 0x417c6668, 0x297f4aa0,
        0xe6ecfddc, 0x8eefd114, 0x36eaa44c, 0x5ee98884, 0x430c380d, 0x2b0f14c5, 0x930a619d, 0xfb094d55,
        0xa8c1008f, 0xc0c22c47, 0x78c7591f, 0x10c475d7, 0x0d21c55e, 0x6522e996, 0xdd279cce, 0xb524b006,
        0x47ec84c7, 0x2fefa80f, 0x97eadd57, 0xffe9f19f, 0xe20c4116, 0x8a0f6dde, 0x320a1886, 0x5a09344e,
        0x09c17994, 0x61c2555c, 0xd9c72004, 0xb1c40ccc, 0xac21bc45, 0xc422908d, 0x7c27e5d5, 0x1424c91d,
        0xdbb77e61, 0xb3b452a9, 0x0bb127f1, 0x63b20b39, 0x7e57bbb0, 0x16549778, 0xae51e220, 0xc652cee8,
        0x959a8332, 0xfd99affa, 0x459cdaa2, 0x2d9ff66a, 0x307a46e3, 0x58796a2b, 0xe07c1f73, 0x887f33bb,
        0xf56e0ef4, 0x9d6d223c, 0x25685764, 0x4d6b7bac, 0x508ecb25, 0x388de7ed, 0x808892b5, 0xe88bbe7d,
        0xbb43f3a7, 0xd340df6f, 0x6b45aa37, 0x034686ff, 0x1ea33676, 0x76a01abe, 0xcea56fe6, 0xa6a6432e,
        0x6935f452, 0x0136d89a, 0xb933adc2, 0xd130810a, 0xccd53183, 0xa4d61d4b, 0x1cd36813, 0x74d044db,
        0x27180901, 0x4f1b25c9, 0xf71e5091, 0x9f1d7c59, 0x82f8ccd0, 0xeafbe018, 0x52fe9540, 0x3afdb988,
        0xc8358d49, 0xa036a181, 0x1833d4d9, 0x7030f811, 0x6dd54898, 0x05d66450, 0xbdd31108, 0xd5d03dc0,
        0x8618701a, 0xee1b5cd2, 0x561e298a, 0x3e1d0542, 0x23f8b5cb, 0x4bfb9903, 0xf3feec5b, 0x9bfdc093,
        0x546e77ef, 0x3c6d5b27, 0x84682e7f, 0xec6b02b7, 0xf18eb23e, 0x998d9ef6, 0x2188ebae, 0x498bc766,
        0x1a438abc, 0x7240a674, 0xca45d32c, 0xa246ffe4, 0xbfa34f6d, 0xd7a063a5, 0x6fa516fd, 0x07a63a35,
        0x8fd9098e, 0xe7da2546, 0x5fdf501e, 0x37dc7cd6, 0x2a39cc5f, 0x423ae097, 0xfa3f95cf, 0x923cb907,
        0xc1f4f4dd, 0xa9f7d815, 0x11f2ad4d, 0x79f18185, 0x6414310c, 0x0c171dc4, 0xb412689c, 0xdc114454,
        0x1382f328, 0x7b81dfe0, 0xc384aab8, 0xab878670, 0xb66236f9, 0xde611a31, 0x66646f69, 0x0e6743a1,
        0x5daf0e7b, 0x35ac22b3, 0x8da957eb, 0xe5aa7b23, 0xf84fcbaa, 0x904ce762, 0x2849923a, 0x404abef2,
        0xb2828a33, 0xda81a6fb, 0x6284d3a3, 0x0a87ff6b, 0x17624fe2, 0x7f61632a, 0xc7641672, 0xaf673aba,
        0xfcaf7760, 0x94ac5ba8, 0x2ca92ef0, 0x44aa0238, 0x594fb2b1, 0x314c9e79, 0x8949eb21, 0xe14ac7e9,
        0x2ed97095, 0x46da5c5d, 0xfedf2905, 0x96dc05cd, 0x8b39b544, 0xe33a998c, 0x5b3fecd4, 0x333cc01c,
        0x60f48dc6, 0x08f7a10e, 0xb0f2d456, 0xd8f1f89e, 0xc5144817, 0xad1764df, 0x15121187, 0x7d113d4f,
    },
    {
        0x00000000, 0x493c7d27, 0x9278fa4e, 0xdb448769, 0x211d826d, 0x6821ff4a, 0xb3657823, 0xfa590504,
        0x423b04da, 0x0b0779fd, 0xd043fe94, 0x997f83b3, 0x632686b7, 0x2a1afb90, 0xf15e7cf9, 0xb86201de,
        0x847609b4, 0xcd4a7493, 0x160ef3fa, 0x5f328edd, 0xa56b8bd9, 0xec57f6fe, 0x37137197, 0x7e2f0cb0,
        0xc64d0d6e, 0x8f717049, 0x5435f720, 0x1d098a07, 0xe7508f03, 0xae6cf224, 0x7528754d, 0x3c14086a,
        0x0d006599, 0x443c18be, 0x9f789fd7, 0xd644e2f0, 0x2c1de7f4, 0x65219ad3, 0xbe651dba, 0xf759609d,
        0x4f3b6143, 0x06071c64, 0xdd439b0d, 0x947fe62a, 0x6e26e32e, 0x271a9e09, 0xfc5e1960, 0xb5626447,
        0x89766c2d, 0xc04a110a, 0x1b0e9663, 0x5232eb44, 0xa86bee40, 0xe1579367, 0x3a13140e, 0x732f6929,
        0xcb4d68f7, 0x827115d0, 0x593592b9, 0x1009ef9e, 0xea50ea9a, 0xa36c97bd, 0x782810d4, 0x31146df3,
        0x1a00cb32, 0x533cb615, 0x8878317c, 0xc1444c5b, 0x3b1d495f, 0x72213478, 0xa965b311, 0xe059ce36,
        0x583bcfe8, 0x1107b2cf, 0xca4335a6, 0x837f4881, 0x79264d85, 0x301a30a2, 0xeb5eb7cb, 0xa262caec,
        0x9e76c286, 0xd74abfa1, 0x0c0e38c8, 0x453245ef, 0xbf6b40eb, 0xf6573dcc, 0x2d13baa5, 0x642fc782,
        0xdc4dc65c, 0x9571bb7b, 0x4e353c12, 0x07094135, 0xfd504431, 0xb46c3916, 0x6f28be7f, 0x2614c358,
        0x1700aeab, 0x5e3cd38c, 0x857854e5, 0xcc4429c2, 0x361d2cc6, 0x7f2151e1, 0xa465d688, 0xed59abaf,
        0x553baa71, 0x1c07d756, 0xc743503f, 0x8e7f2d18, 0x7426281c, 0x3d1a553b, 0xe65ed252, 0xaf62af75,
        0x9376a71f, 0xda4ada38, 0x010e5d51, 0x48322076, 0xb26b2572, 0xfb575855, 0x2013df3c, 0x692fa21b,
        0xd14da3c5, 0x9871dee2, 0x4335598b, 0x0a0924ac, 0xf05021a8, 0xb96c5c8f, 0x6228dbe6, 0x2b14a6c1,
        0x34019664, 0x7d3deb43, 0xa6796c2a, 0xef45110d, 0x151c1409, 0x5c20692e, 0x8764ee47, 0xce589360,
        0x763a92be, 0x3f06ef99, 0xe44268f0, 0xad7e15d7, 0x572710d3, 0x1e1b6df4, 0xc55fea9d, 0x8c6397ba,
        0xb0779fd0, 0xf94be2f7, 0x220f659e, 0x6b3318b9, 0x916a1dbd, 0xd856609a, 0x0312e7f3, 0x4a2e9ad4,
        0xf24c9b0a, 0xbb70e62d, 0x60346144, 0x29081c63, 0xd3511967, 0x9a6d6440, 0x4129e329, 0x08159e0e,
        0x3901f3fd, 0x703d8eda, 0xab7909b3, 0xe2457494, 0x181c7190, 0x51200cb7, 0x8a648bde, 0xc358f6f9,
        0x7b3af727, 0x32068a00, 0xe9420d69, 0xa07e704e, 0x5a27754a, 0x131b086d, 0xc85f8f04, 0x8163f223,
        0xbd77fa49, 0xf44b876e, 0x2f0f0007, 0x66337d20, 0x9c6a7824, 0xd5560503, 0x0e12826a, 0x472eff4d,
        0xff4cfe93, 0xb67083b4, 0x6d3404dd, 0x240879fa, 0xde517cfe, 0x976d01d9, 0x4c2986b0, 0x0515fb97,
        0x2e015d56, 0x673d2071, 0xbc79a718, 0xf545da3f, 0x0f1cdf3b, 0x4620a21c, 0x9d642575, 0xd4585852,
        0x6c3a598c, 0x250624ab, 0xfe42a3c2, 0xb77edee5, 0x4d27dbe1, 0x041ba6c6, 0xdf5f21af, 0x96635c88,
        0xaa7754e2, 0xe34b29c5, 0x380faeac, 0x7133d38b, 0x8b6ad68f, 0xc256aba8, 0x19122cc1, 0x502e51e6,
        0xe84c5038, 0xa1702d1f, 0x7a34aa76, 0x3308d751, 0xc951d255, 0x806daf72, 0x5b29281b, 0x1215553c,
        0x230138cf, 0x6a3d45e8, 0xb179c281, 0xf845bfa6, 0x021cbaa2, 0x4b20c785, 0x906440ec, 0xd9583dcb,
        0x613a3c15, 0x28064132, 0xf342c65b, 0xba7ebb7c, 0x4027be78, 0x091bc35f, 0xd25f4436, 0x9b633911,
        0xa777317b, 0xee4b4c5c, 0x350fcb35, 0x7c33b612, 0x866ab316, 0xcf56ce31, 0x14124958, 0x5d2e347f,
        0xe54c35a1, 0xac704886, 0x7734cfef, 0x3e08b2c8, 0xc451b7cc, 0x8d6dcaeb, 0x56294d82, 0x1f1530a5,
    },
};
_VS_CKPT_PRIVATE uint32_t _vs_crc32c_sw(uint32_t c, const unsigned char* p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ _vs_crc32c_tab[0][(c ^ *p++) & 0xff];
        n--;
    }
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        c = _vs_crc32c_tab[7][lo & 0xff] ^ _vs_crc32c_tab[6][(lo >> 8) & 0xff] ^
            _vs_crc32c_tab[5][(lo >> 16) & 0xff] ^ _vs_crc32c_tab[4][lo >> 24] ^ _vs_crc32c_tab[3][p[4]] ^
            _vs_crc32c_tab[2][p[5]] ^ _vs_crc32c_tab[1][p[6]] ^ _vs_crc32c_tab[0][p[7]];
    }
    while (n--) c = (c >> 8) ^ _vs_crc32c_tab[0][(c ^ *p++) & 0xff];
    return c;
}

/* x86-64: the SSE4.2 crc32 instruction (about 8 bytes a cycle), chosen at run time
   so the default build (no -msse4.2) gets it too; the tables elsewhere. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && \
    !defined(VESCALE_NO_SSE42)
#define _VS_CRC32C_HW 1
__attribute__((target("sse4.2"))) static _VS_UNUSED uint32_t _vs_crc32c_hw(uint32_t c, const unsigned char* p,
                                                                           size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi(c, *p++);
        n--;
    }
    unsigned long long c64 = c;
    for (; n >= 32; p += 32, n -= 32) {
        unsigned long long a[4];
        memcpy(a, p, sizeof a);
        c64 = __builtin_ia32_crc32di(c64, a[0]);
        c64 = __builtin_ia32_crc32di(c64, a[1]);
        c64 = __builtin_ia32_crc32di(c64, a[2]);
        c64 = __builtin_ia32_crc32di(c64, a[3]);
    }
    for (; n >= 8; p += 8, n -= 8) {
        unsigned long long a;
        memcpy(&a, p, sizeof a);
        c64 = __builtin_ia32_crc32di(c64, a);
    }
    c = (uint32_t)c64;
    while (n--) c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

/* The CRC register after `len` more zero bytes: multiplication by x^(8 len)
   modulo the polynomial, as a 32x32 matrix over GF(2) squared up (zlib's
   crc32_combine method). Lets independent streams be joined. */
_VS_CKPT_PRIVATE uint32_t _vs_crc32c_gf2_times(const uint32_t* mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (int i = 0; vec; i++, vec >>= 1)
        if (vec & 1) sum ^= mat[i];
    return sum;
}

/* The operator (a 32x32 matrix over GF(2), op[i] = the image of bit i) that
   moves a CRC register past `len` zero bytes. (What the three-stream path's
   constant operators were computed with; test_ckpt_format checks them with it.) */
_VS_CKPT_PRIVATE void _vs_crc32c_shift_op(uint64_t len, uint32_t* op)
{
    uint32_t odd[32], even[32];
    odd[0] = 0x82F63B78u; // one zero bit
    for (int i = 1; i < 32; i++) odd[i] = 1u << (i - 1);
    for (int i = 0; i < 32; i++) even[i] = _vs_crc32c_gf2_times(odd, odd[i]); // two
    for (int i = 0; i < 32; i++) odd[i] = _vs_crc32c_gf2_times(even, even[i]); // four
    for (int i = 0; i < 32; i++) op[i] = 1u << i; // the identity, then times each power of two in len
    while (len) { // odd: 4 zero bits; each round doubles (one zero byte first)
        for (int i = 0; i < 32; i++) even[i] = _vs_crc32c_gf2_times(odd, odd[i]);
        if (len & 1)
            for (int i = 0; i < 32; i++) op[i] = _vs_crc32c_gf2_times(even, op[i]);
        len >>= 1;
        if (!len) break;
        for (int i = 0; i < 32; i++) odd[i] = _vs_crc32c_gf2_times(even, even[i]);
        if (len & 1)
            for (int i = 0; i < 32; i++) op[i] = _vs_crc32c_gf2_times(odd, op[i]);
        len >>= 1;
    }
}

#ifdef _VS_CRC32C_HW
/* Three streams at once: the crc32 instruction's latency is 3 cycles and its
   throughput 1, so one stream leaves two thirds of it idle. The buffer goes in
   chunks of three equal runs (64 KiB each, then 4 KiB each); the three
   registers are joined by the operator that moves a register past one run.
   The runs have fixed lengths so the operators are constants:
   _vs_crc32c_shift_op(65536) and (4096), which test_ckpt_format checks. (Built
   per call, the operator for n/3 bytes cost 45 us of matrix squaring: a 1 MiB
   block went at 14 GB/s instead of 20+, and 64 KiB blocks at 3.) */
static const uint32_t _vs_crc32c_op64k[32] = {
    0x6bafcc21, 0xd75f9842, 0xab534675, 0x534afa1b, 0xa695f436, 0x48c79e9d, 0x918f3d3a, 0x26f20c85,
    0x4de4190a, 0x9bc83214, 0x327c12d9, 0x64f825b2, 0xc9f04b64, 0x960ce039, 0x29f5b683, 0x53eb6d06,
    0xa7d6da0c, 0x4a41c2e9, 0x948385d2, 0x2ceb7d55, 0x59d6faaa, 0xb3adf554, 0x62b79c59, 0xc56f38b2,
    0x8f320795, 0x1b8879db, 0x3710f3b6, 0x6e21e76c, 0xdc43ced8, 0xbd6beb41, 0x7f3ba073, 0xfe7740e6,
};
static const uint32_t _vs_crc32c_op4k[32] = {
    0xc2a5b65e, 0x80a71a4d, 0x04a2426b, 0x094484d6, 0x128909ac, 0x25121358, 0x4a2426b0, 0x94484d60,
    0x2d7cec31, 0x5af9d862, 0xb5f3b0c4, 0x6e0b1779, 0xdc162ef2, 0xbdc02b15, 0x7e6c20db, 0xfcd841b6,
    0xfc5cf59d, 0xfd559dcb, 0xff474d67, 0xfb62ec3f, 0xf329ae8f, 0xe3bf2bef, 0xc292212f, 0x80c834af,
    0x047c1faf, 0x08f83f5e, 0x11f07ebc, 0x23e0fd78, 0x47c1faf0, 0x8f83f5e0, 0x1aeb9d31, 0x35d73a62,
};

/* One chunk of three runs of L bytes (a multiple of 8) from register c, joined by op. */
__attribute__((target("sse4.2"))) static _VS_UNUSED uint32_t _vs_crc32c_hw3_chunk(uint32_t c, const unsigned char* p,
                                                                                  size_t L, const uint32_t* op)
{
    unsigned long long ca = c, cb = 0, cc = 0;
    const unsigned char* q = p + L;
    const unsigned char* r = p + 2 * L;
    for (size_t i = 0; i < L; i += 8) {
        unsigned long long a, b, d;
        memcpy(&a, p + i, 8);
        memcpy(&b, q + i, 8);
        memcpy(&d, r + i, 8);
        ca = __builtin_ia32_crc32di(ca, a);
        cb = __builtin_ia32_crc32di(cb, b);
        cc = __builtin_ia32_crc32di(cc, d);
    }
    uint32_t reg = _vs_crc32c_gf2_times(op, (uint32_t)ca) ^ (uint32_t)cb;
    return _vs_crc32c_gf2_times(op, reg) ^ (uint32_t)cc;
}

__attribute__((target("sse4.2"))) static _VS_UNUSED uint32_t _vs_crc32c_hw3(uint32_t c, const unsigned char* p,
                                                                            size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi(c, *p++);
        n--;
    }
    for (; n >= 3 * 65536; p += 3 * 65536, n -= 3 * 65536) c = _vs_crc32c_hw3_chunk(c, p, 65536, _vs_crc32c_op64k);
    for (; n >= 3 * 4096; p += 3 * 4096, n -= 3 * 4096) c = _vs_crc32c_hw3_chunk(c, p, 4096, _vs_crc32c_op4k);
    return _vs_crc32c_hw(c, p, n);
}
#endif

_VS_CKPT_PRIVATE uint32_t _vs_crc32c(uint32_t crc, const void* p, size_t n)
{
    const unsigned char* b = (const unsigned char*)p;
    if (!b || !n) return crc;
#ifdef _VS_CRC32C_HW
    if (__builtin_cpu_supports("sse4.2")) return ~_vs_crc32c_hw3(~crc, b, n); // (under 12 KiB: one stream)
#endif
    return ~_vs_crc32c_sw(~crc, b, n);
}

// text buffer -----------------------------------------------------------------

_VS_CKPT_PRIVATE int _vs_sb_reserve(_vs_sbuf* b, size_t more)
{
    if (b->oom) return 0;
    if (b->len + more + 1 <= b->cap && b->p) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1) {
        if (cap > ((size_t)-1) / 2) {
            b->oom = 1;
            return 0;
        }
        cap *= 2;
    }
    char* q = (char*)vs_alloc(b->w, cap);
    if (!q) {
        b->oom = 1;
        return 0;
    }
    if (b->p) memcpy(q, b->p, b->len);
    q[b->len] = 0;
    vs_free(b->w, b->p);
    b->p = q;
    b->cap = cap;
    return 1;
}

_VS_CKPT_PRIVATE void _vs_sb_put(_vs_sbuf* b, const char* s, size_t n)
{
    if (!_vs_sb_reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

_VS_CKPT_PRIVATE void _vs_sb_printf(_vs_sbuf* b, const char* fmt, ...)
{
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        _vs_sb_put(b, small, (size_t)n);
        return;
    }
    if (!_vs_sb_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 when invalid (overlong
   forms, surrogates and code points past U+10FFFF are invalid). */
_VS_CKPT_PRIVATE size_t _vs_utf8_len(const unsigned char* s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t k;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) k = 2;
    else if (c == 0xe0) k = 3, lo = 0xa0;
    else if (c == 0xed) k = 3, hi = 0x9f;
    else if (c >= 0xe1 && c <= 0xef) k = 3;
    else if (c == 0xf0) k = 4, lo = 0x90;
    else if (c == 0xf4) k = 4, hi = 0x8f;
    else if (c >= 0xf1 && c <= 0xf3) k = 4;
    else return 0;
    if (n < k || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < k; i++)
        if (s[i] < 0x80 || s[i] > 0xbf) return 0;
    return k;
}

/* Bytes that are not valid UTF-8 (which JSON cannot carry) come out as \u00XX, the
   byte read as Latin-1: the text stays valid JSON. The index writer refuses such
   names before they get here. */
_VS_CKPT_PRIVATE void _vs_sb_json_str(_vs_sbuf* b, const char* s)
{
    const unsigned char* p = (const unsigned char*)(s ? s : "");
    _vs_sb_put(b, "\"", 1);
    while (*p) {
        size_t run = 0;
        while (p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\') run++;
        if (run) {
            _vs_sb_put(b, (const char*)p, run);
            p += run;
            continue;
        }
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            _vs_sb_put(b, e, 2);
            p++;
        } else if (c == '\n') {
            _vs_sb_put(b, "\\n", 2), p++;
        } else if (c == '\t') {
            _vs_sb_put(b, "\\t", 2), p++;
        } else if (c < 0x20) {
            _vs_sb_printf(b, "\\u%04x", c), p++;
        } else {
            size_t k = _vs_utf8_len(p, strlen((const char*)p));
            if (k) {
                _vs_sb_put(b, (const char*)p, k);
                p += k;
            } else {
                _vs_sb_printf(b, "\\u%04x", c), p++;
            }
        }
    }
    _vs_sb_put(b, "\"", 1);
}

_VS_CKPT_PRIVATE void _vs_sb_free(_vs_sbuf* b)
{
    vs_free(b->w, b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

// JSON ------------------------------------------------------------------------
/* A small DOM parser for untrusted text: strict RFC 8259 syntax, valid UTF-8,
   no NUL in strings (names are C strings), no duplicate keys, nesting at most
   _VS_JSON_MAX_DEPTH. Numbers are kept as int64 when they are integers in range;
   anything else (fractions, exponents, huge values) is a number that no field
   of these formats accepts. */
#define _VS_JSON_MAX_DEPTH 64

enum { _VS_J_NULL, _VS_J_BOOL, _VS_J_NUM, _VS_J_STR, _VS_J_ARR, _VS_J_OBJ };

typedef struct _vs_jnode {
    int type;
    int isint;       // NUM: an integer that fits int64 (i)
    int n;           // ARR, OBJ: number of children
    int first, next; // first child, next sibling (-1: none)
    const char* key; // member of an object: its key
    const char* s;   // STR: the decoded text, NUL-terminated
    int64_t i;       // NUM (isint), BOOL
    size_t at;       // byte offset in the text
} _vs_jnode;

typedef struct _vs_json {
    const vs_world* w;
    const char* label;
    const unsigned char* t;
    size_t len, pos;
    _vs_jnode* nd;
    int nn, cap;
    char* arena; // decoded strings: never longer than their quoted source, so len + 1 bytes
    size_t alen;
    int failed;
} _vs_json;

_VS_CKPT_PRIVATE void* _vs_ckpt_zalloc(const vs_world* w, size_t n, size_t size)
{
    if (size && n > ((size_t)-1) / size) {
        vs_set_error(VS_ERR_NOMEM, "vescale_ckpt: %zu x %zu bytes overflow", n, size);
        return NULL;
    }
    size_t bytes = n * size;
    if (!bytes) bytes = 1;
    void* p = vs_alloc(w, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

_VS_CKPT_PRIVATE char* _vs_ckpt_strdup(const vs_world* w, const char* s)
{
    size_t n = strlen(s) + 1;
    char* p = (char*)vs_alloc(w, n);
    if (p) memcpy(p, s, n);
    return p;
}

_VS_CKPT_PRIVATE int _vs_json_fail(_vs_json* J, const char* what)
{
    if (!J->failed)
        vs_set_error(VS_ERR_INVALID, "%s: JSON syntax error at byte %zu: %s", J->label, J->pos, what);
    J->failed = 1;
    return -1;
}

_VS_CKPT_PRIVATE int _vs_json_node(_vs_json* J, int type)
{
    if (J->nn == J->cap) {
        if (J->cap > (1 << 29)) {
            if (!J->failed) vs_set_error(VS_ERR_INVALID, "%s: JSON has too many values", J->label);
            J->failed = 1;
            return -1;
        }
        int cap = J->cap ? J->cap * 2 : 64;
        _vs_jnode* q = (_vs_jnode*)vs_alloc(J->w, (size_t)cap * sizeof *q);
        if (!q) {
            if (!J->failed)
                vs_set_error(VS_ERR_NOMEM, "%s: out of memory parsing JSON (%d values)", J->label, J->nn);
            J->failed = 2;
            return -1;
        }
        if (J->nd) memcpy(q, J->nd, (size_t)J->nn * sizeof *q);
        vs_free(J->w, J->nd);
        J->nd = q;
        J->cap = cap;
    }
    _vs_jnode* x = &J->nd[J->nn];
    memset(x, 0, sizeof *x);
    x->type = type;
    x->first = x->next = -1;
    x->at = J->pos;
    return J->nn++;
}

_VS_CKPT_PRIVATE void _vs_json_ws(_vs_json* J)
{
    while (J->pos < J->len) {
        unsigned char c = J->t[J->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        J->pos++;
    }
}

_VS_CKPT_PRIVATE int _vs_json_hex4(_vs_json* J, unsigned* out)
{
    if (J->len - J->pos < 4) return 0;
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char c = J->t[J->pos + (size_t)k];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    J->pos += 4;
    *out = v;
    return 1;
}

/* At the opening quote: decodes into the arena; the text or NULL. */
_VS_CKPT_PRIVATE const char* _vs_json_string(_vs_json* J)
{
    J->pos++; // "
    char* out = J->arena + J->alen;
    size_t o = 0;
    for (;;) {
        if (J->pos >= J->len) return _vs_json_fail(J, "unterminated string"), (const char*)NULL;
        unsigned char c = J->t[J->pos];
        if (c == '"') {
            J->pos++;
            break;
        }
        if (c < 0x20) return _vs_json_fail(J, "control character in a string"), (const char*)NULL;
        if (c == '\\') {
            if (J->pos + 1 >= J->len) return _vs_json_fail(J, "unterminated escape"), (const char*)NULL;
            unsigned char e = J->t[J->pos + 1];
            J->pos += 2;
            const char* simple = strchr("\"\\/bfnrt", e);
            if (e && simple) {
                static const char repl[] = "\"\\/\b\f\n\r\t";
                out[o++] = repl[simple - "\"\\/bfnrt"];
                continue;
            }
            if (e != 'u') {
                J->pos -= 2;
                return _vs_json_fail(J, "bad escape in a string"), (const char*)NULL;
            }
            unsigned cp;
            if (!_vs_json_hex4(J, &cp)) return _vs_json_fail(J, "bad \\u escape"), (const char*)NULL;
            if (cp >= 0xdc00 && cp <= 0xdfff)
                return _vs_json_fail(J, "lone low surrogate in \\u escape"), (const char*)NULL;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                unsigned lo;
                if (J->len - J->pos < 2 || J->t[J->pos] != '\\' || J->t[J->pos + 1] != 'u')
                    return _vs_json_fail(J, "unpaired high surrogate in \\u escape"), (const char*)NULL;
                J->pos += 2;
                if (!_vs_json_hex4(J, &lo) || lo < 0xdc00 || lo > 0xdfff)
                    return _vs_json_fail(J, "unpaired high surrogate in \\u escape"), (const char*)NULL;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            if (cp == 0) return _vs_json_fail(J, "\\u0000 in a string"), (const char*)NULL;
            if (cp < 0x80) {
                out[o++] = (char)cp;
            } else if (cp < 0x800) {
                out[o++] = (char)(0xc0 | (cp >> 6));
                out[o++] = (char)(0x80 | (cp & 0x3f));
            } else if (cp < 0x10000) {
                out[o++] = (char)(0xe0 | (cp >> 12));
                out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[o++] = (char)(0x80 | (cp & 0x3f));
            } else {
                out[o++] = (char)(0xf0 | (cp >> 18));
                out[o++] = (char)(0x80 | ((cp >> 12) & 0x3f));
                out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[o++] = (char)(0x80 | (cp & 0x3f));
            }
            continue;
        }
        size_t k = _vs_utf8_len(J->t + J->pos, J->len - J->pos);
        if (!k) return _vs_json_fail(J, "invalid UTF-8 in a string"), (const char*)NULL;
        memcpy(out + o, J->t + J->pos, k);
        o += k;
        J->pos += k;
    }
    out[o] = 0;
    J->alen += o + 1;
    return out;
}

_VS_CKPT_PRIVATE int _vs_json_number(_vs_json* J, int x)
{
    size_t p = J->pos;
    int neg = 0, isint = 1, ovf = 0;
    uint64_t v = 0;
    if (J->t[p] == '-') neg = 1, p++;
    if (p >= J->len || J->t[p] < '0' || J->t[p] > '9') return _vs_json_fail(J, "bad number");
    if (J->t[p] == '0') {
        p++;
        if (p < J->len && J->t[p] >= '0' && J->t[p] <= '9') return _vs_json_fail(J, "number with a leading zero");
    } else {
        while (p < J->len && J->t[p] >= '0' && J->t[p] <= '9') {
            unsigned d = (unsigned)(J->t[p] - '0');
            if (v > (UINT64_MAX - d) / 10) ovf = 1;
            else v = v * 10 + d;
            p++;
        }
    }
    if (p < J->len && J->t[p] == '.') {
        isint = 0, p++;
        if (p >= J->len || J->t[p] < '0' || J->t[p] > '9') return J->pos = p, _vs_json_fail(J, "bad fraction");
        while (p < J->len && J->t[p] >= '0' && J->t[p] <= '9') p++;
    }
    if (p < J->len && (J->t[p] == 'e' || J->t[p] == 'E')) {
        isint = 0, p++;
        if (p < J->len && (J->t[p] == '+' || J->t[p] == '-')) p++;
        if (p >= J->len || J->t[p] < '0' || J->t[p] > '9') return J->pos = p, _vs_json_fail(J, "bad exponent");
        while (p < J->len && J->t[p] >= '0' && J->t[p] <= '9') p++;
    }
    J->pos = p;
    _vs_jnode* n = &J->nd[x];
    if (isint && !ovf && (neg ? v <= (uint64_t)INT64_MAX + 1 : v <= (uint64_t)INT64_MAX)) {
        n->isint = 1;
        n->i = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    }
    return x;
}

_VS_CKPT_PRIVATE int _vs_json_cmpkey(const void* a, const void* b)
{
    return strcmp(*(const char* const*)a, *(const char* const*)b);
}

/* Duplicate keys of object x: -1 (error set) when there is one. */
_VS_CKPT_PRIVATE int _vs_json_dupkeys(_vs_json* J, int x)
{
    int n = J->nd[x].n;
    if (n < 2) return x;
    if (n <= 8) {
        for (int a = J->nd[x].first; a >= 0; a = J->nd[a].next)
            for (int b = J->nd[a].next; b >= 0; b = J->nd[b].next)
                if (!strcmp(J->nd[a].key, J->nd[b].key)) {
                    J->pos = J->nd[b].at;
                    vs_set_error(VS_ERR_INVALID, "%s: JSON object at byte %zu has the key \"%.200s\" twice",
                                 J->label, J->nd[x].at, J->nd[a].key);
                    J->failed = 1;
                    return -1;
                }
        return x;
    }
    const char** k = (const char**)vs_alloc(J->w, (size_t)n * sizeof *k);
    if (!k) {
        J->failed = 2;
        return -1;
    }
    int m = 0;
    for (int a = J->nd[x].first; a >= 0; a = J->nd[a].next) k[m++] = J->nd[a].key;
    qsort(k, (size_t)m, sizeof *k, _vs_json_cmpkey);
    for (int i = 1; i < m; i++)
        if (!strcmp(k[i - 1], k[i])) {
            vs_set_error(VS_ERR_INVALID, "%s: JSON object at byte %zu has the key \"%.200s\" twice", J->label,
                         J->nd[x].at, k[i]);
            J->failed = 1;
            vs_free(J->w, k);
            return -1;
        }
    vs_free(J->w, k);
    return x;
}

_VS_CKPT_PRIVATE int _vs_json_value(_vs_json* J, int depth)
{
    _vs_json_ws(J);
    if (J->pos >= J->len) return _vs_json_fail(J, "unexpected end of text");
    unsigned char c = J->t[J->pos];
    if (c == '{' || c == '[') {
        if (depth >= _VS_JSON_MAX_DEPTH) return _vs_json_fail(J, "nesting deeper than 64 levels");
        int obj = c == '{';
        int x = _vs_json_node(J, obj ? _VS_J_OBJ : _VS_J_ARR);
        if (x < 0) return -1;
        J->pos++;
        _vs_json_ws(J);
        if (J->pos < J->len && J->t[J->pos] == (obj ? '}' : ']')) {
            J->pos++;
            return x;
        }
        int last = -1;
        for (;;) {
            const char* key = NULL;
            if (obj) {
                _vs_json_ws(J);
                if (J->pos >= J->len || J->t[J->pos] != '"') return _vs_json_fail(J, "expected a key string");
                key = _vs_json_string(J);
                if (!key) return -1;
                _vs_json_ws(J);
                if (J->pos >= J->len || J->t[J->pos] != ':') return _vs_json_fail(J, "expected ':'");
                J->pos++;
            }
            int v = _vs_json_value(J, depth + 1);
            if (v < 0) return -1;
            J->nd[v].key = key;
            if (last < 0) J->nd[x].first = v;
            else J->nd[last].next = v;
            last = v;
            if (J->nd[x].n == INT32_MAX) return _vs_json_fail(J, "too many members");
            J->nd[x].n++;
            _vs_json_ws(J);
            if (J->pos >= J->len) return _vs_json_fail(J, obj ? "unterminated object" : "unterminated array");
            if (J->t[J->pos] == ',') {
                J->pos++;
                continue;
            }
            if (J->t[J->pos] == (obj ? '}' : ']')) {
                J->pos++;
                break;
            }
            return _vs_json_fail(J, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
        return obj ? _vs_json_dupkeys(J, x) : x;
    }
    if (c == '"') {
        int x = _vs_json_node(J, _VS_J_STR);
        if (x < 0) return -1;
        const char* s = _vs_json_string(J);
        if (!s) return -1;
        J->nd[x].s = s;
        return x;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        int x = _vs_json_node(J, _VS_J_NUM);
        return x < 0 ? -1 : _vs_json_number(J, x);
    }
    static const char* const words[3] = {"null", "false", "true"};
    for (int k = 0; k < 3; k++) {
        size_t wl = strlen(words[k]);
        if (J->len - J->pos >= wl && !memcmp(J->t + J->pos, words[k], wl)) {
            int x = _vs_json_node(J, k == 0 ? _VS_J_NULL : _VS_J_BOOL);
            if (x < 0) return -1;
            J->nd[x].i = k == 2;
            J->pos += wl;
            return x;
        }
    }
    return _vs_json_fail(J, "unexpected character (not a JSON value)");
}

_VS_CKPT_PRIVATE void _vs_json_free(_vs_json* J)
{
    vs_free(J->w, J->nd);
    vs_free(J->w, J->arena);
    J->nd = NULL;
    J->arena = NULL;
}

/* Parses text[0..len) whole; the root is node 0. VS_ERR_INVALID/NOMEM naming label. */
_VS_CKPT_PRIVATE vs_result _vs_json_parse(_vs_json* J, const vs_world* w, const char* label, const char* text,
                                          size_t len)
{
    memset(J, 0, sizeof *J);
    J->w = w;
    J->label = label ? label : "(json)";
    J->t = (const unsigned char*)text;
    J->len = text ? len : 0;
    if (len >= ((size_t)-1) / 2) return vs_set_error(VS_ERR_INVALID, "%s: JSON of %zu bytes", J->label, len);
    J->arena = (char*)vs_alloc(w, len + 1);
    if (!J->arena) return vs_set_error(VS_ERR_NOMEM, "%s: out of memory for %zu bytes of JSON", J->label, len);
    int root = _vs_json_value(J, 0);
    if (root >= 0) {
        _vs_json_ws(J);
        if (J->pos < J->len) root = _vs_json_fail(J, "text after the JSON value");
    }
    if (root < 0) {
        vs_result r = J->failed == 2 ? VS_ERR_NOMEM : VS_ERR_INVALID;
        _vs_json_free(J);
        return r;
    }
    return VS_OK;
}

/* Member `key` of object x, or -1. */
_VS_CKPT_PRIVATE int _vs_json_get(const _vs_json* J, int x, const char* key)
{
    if (x < 0 || J->nd[x].type != _VS_J_OBJ) return -1;
    for (int c = J->nd[x].first; c >= 0; c = J->nd[c].next)
        if (!strcmp(J->nd[c].key, key)) return c;
    return -1;
}

_VS_CKPT_PRIVATE const char* _vs_json_what(const _vs_json* J, int x)
{
    if (x < 0) return "missing";
    switch (J->nd[x].type) {
    case _VS_J_NULL: return "null";
    case _VS_J_BOOL: return "a boolean";
    case _VS_J_NUM: return J->nd[x].isint ? "an integer" : "a number out of the integer range";
    case _VS_J_STR: return "a string";
    case _VS_J_ARR: return "an array";
    default: return "an object";
    }
}

// safetensors -----------------------------------------------------------------

#define _VS_ST_MAX_HEADER 100000000u // the format's bound on the JSON header

_VS_CKPT_PRIVATE const char* _vs_st_dtype_name(vs_dtype dt)
{
    switch (dt) {
    case VS_F32: return "F32";
    case VS_F16: return "F16";
    case VS_BF16: return "BF16";
    case VS_F64: return "F64";
    case VS_I32: return "I32";
    case VS_I64: return "I64";
    case VS_U8: return "U8";
    default: return NULL;
    }
}

_VS_CKPT_PRIVATE vs_dtype _vs_st_dtype_parse(const char* s)
{
    for (int d = 1; d < (int)VS_DTYPE_COUNT; d++)
        if (!strcmp(s, _vs_st_dtype_name((vs_dtype)d))) return (vs_dtype)d;
    return VS_DTYPE_INVALID;
}

/* numel(shape[0..ndim)) x size into *bytes; 0 on overflow (past 2^62) or a negative dim. */
_VS_CKPT_PRIVATE int _vs_ckpt_nbytes(int ndim, const int64_t* shape, size_t size, uint64_t* bytes)
{
    uint64_t v = size;
    const uint64_t lim = (uint64_t)1 << 62;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return 0;
        uint64_t s = (uint64_t)shape[d];
        if (s && v > lim / s) return 0;
        v *= s;
    }
    *bytes = v;
    return 1;
}

_VS_CKPT_PRIVATE int _vs_utf8_valid(const char* s)
{
    const unsigned char* p = (const unsigned char*)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = _vs_utf8_len(p + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

/* A string -> string JSON object (the __metadata__ rule); node x of J. */
_VS_CKPT_PRIVATE vs_result _vs_st_check_meta(const _vs_json* J, int x, const char* label)
{
    if (J->nd[x].type != _VS_J_OBJ)
        return vs_set_error(VS_ERR_INVALID, "%s: __metadata__ is %s, not an object of strings", label,
                            _vs_json_what(J, x));
    for (int c = J->nd[x].first; c >= 0; c = J->nd[c].next)
        if (J->nd[c].type != _VS_J_STR)
            return vs_set_error(VS_ERR_INVALID, "%s: __metadata__ \"%.200s\" is %s, not a string", label,
                                J->nd[c].key, _vs_json_what(J, c));
    return VS_OK;
}

_VS_CKPT_PRIVATE int _vs_st_cmpkey(const void* a, const void* b)
{
    return strcmp(((const _vs_st_tensor*)a)->key, ((const _vs_st_tensor*)b)->key);
}

_VS_CKPT_PRIVATE vs_result _vs_st_header(const vs_world* w, const _vs_st_tensor* t, int n, const char* metadata,
                                         char** out, size_t* len)
{
    if (!out || !len || (n > 0 && !t)) return vs_set_error(VS_ERR_NULL, "_vs_st_header: NULL argument");
    *out = NULL;
    *len = 0;
    if (n < 0) return vs_set_error(VS_ERR_INVALID, "safetensors header: %d tensors", n);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        const char* k = t[i].key;
        const char* dn = _vs_st_dtype_name(t[i].dtype);
        uint64_t bytes = 0;
        if (!k || !k[0] || !strcmp(k, "__metadata__") || !_vs_utf8_valid(k))
            return vs_set_error(VS_ERR_INVALID, "safetensors header: tensor %d has the key \"%.200s\"", i,
                                k ? k : "(null)");
        if (!dn) return vs_set_error(VS_ERR_INVALID, "safetensors header: \"%.200s\": dtype %d", k, (int)t[i].dtype);
        if (t[i].ndim < 0 || t[i].ndim > _VS_CKPT_MAXD)
            return vs_set_error(VS_ERR_INVALID, "safetensors header: \"%.200s\": %d dims", k, t[i].ndim);
        if (!_vs_ckpt_nbytes(t[i].ndim, t[i].shape, vs_dtype_size(t[i].dtype), &bytes))
            return vs_set_error(VS_ERR_INVALID, "safetensors header: \"%.200s\": bad shape", k);
        if (t[i].begin != at || t[i].end < t[i].begin || t[i].end - t[i].begin != bytes)
            return vs_set_error(VS_ERR_INVALID,
                                "safetensors header: \"%.200s\": data_offsets [%llu, %llu], expected [%llu, %llu]"
                                " (contiguous from 0, %llu bytes)",
                                k, (unsigned long long)t[i].begin, (unsigned long long)t[i].end,
                                (unsigned long long)at, (unsigned long long)(at + bytes), (unsigned long long)bytes);
        at = t[i].end;
    }
    if (n > 1) {
        _vs_st_tensor* s = (_vs_st_tensor*)vs_alloc(w, (size_t)n * sizeof *s);
        if (!s) return VS_ERR_NOMEM;
        memcpy(s, t, (size_t)n * sizeof *s);
        qsort(s, (size_t)n, sizeof *s, _vs_st_cmpkey);
        for (int i = 1; i < n; i++)
            if (!strcmp(s[i - 1].key, s[i].key)) {
                vs_result r = vs_set_error(VS_ERR_INVALID, "safetensors header: the key \"%.200s\" twice", s[i].key);
                vs_free(w, s);
                return r;
            }
        vs_free(w, s);
    }
    if (metadata) {
        _vs_json J;
        vs_result r = _vs_json_parse(&J, w, "safetensors header metadata", metadata, strlen(metadata));
        if (r != VS_OK) return r;
        r = _vs_st_check_meta(&J, 0, "safetensors header");
        _vs_json_free(&J);
        if (r != VS_OK) return r;
    }
    _vs_sbuf b;
    memset(&b, 0, sizeof b);
    b.w = w;
    _vs_sb_put(&b, "\0\0\0\0\0\0\0\0{", 9);
    const char* sep = "";
    if (metadata) {
        _vs_sb_printf(&b, "\"__metadata__\":%s", metadata);
        sep = ",";
    }
    for (int i = 0; i < n; i++) {
        _vs_sb_printf(&b, "%s\n", sep);
        _vs_sb_json_str(&b, t[i].key);
        _vs_sb_printf(&b, ":{\"dtype\":\"%s\",\"shape\":[", _vs_st_dtype_name(t[i].dtype));
        for (int d = 0; d < t[i].ndim; d++) _vs_sb_printf(&b, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        _vs_sb_printf(&b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)t[i].begin,
                      (unsigned long long)t[i].end);
        sep = ",";
    }
    _vs_sb_put(&b, "}", 1);
    while (!b.oom && (b.len - 8) % 8) _vs_sb_put(&b, " ", 1);
    if (b.oom) {
        _vs_sb_free(&b);
        return vs_set_error(VS_ERR_NOMEM, "safetensors header: out of memory (%d tensors)", n);
    }
    uint64_t hl = b.len - 8;
    if (hl > _VS_ST_MAX_HEADER) {
        _vs_sb_free(&b);
        return vs_set_error(VS_ERR_INVALID, "safetensors header: %llu bytes, over the format's 100 MB",
                            (unsigned long long)hl);
    }
    for (int k = 0; k < 8; k++) b.p[k] = (char)((hl >> (8 * k)) & 0xff);
    *out = b.p;
    *len = b.len;
    return VS_OK;
}

_VS_CKPT_PRIVATE int _vs_st_cmpoff(const void* a, const void* b)
{
    const _vs_st_tensor* x = (const _vs_st_tensor*)a;
    const _vs_st_tensor* y = (const _vs_st_tensor*)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->key, y->key);
}

/* Array node x of n non-negative integers into v (at most cap); -1 when not. */
_VS_CKPT_PRIVATE int _vs_json_ints(const _vs_json* J, int x, int64_t* v, int cap)
{
    if (x < 0 || J->nd[x].type != _VS_J_ARR || J->nd[x].n > cap) return -1;
    int k = 0;
    for (int c = J->nd[x].first; c >= 0; c = J->nd[c].next) {
        if (J->nd[c].type != _VS_J_NUM || !J->nd[c].isint || J->nd[c].i < 0) return -1;
        v[k++] = J->nd[c].i;
    }
    return k;
}

_VS_CKPT_PRIVATE vs_result _vs_st_tensor_parse(const _vs_json* J, int x, const char* label, _vs_st_tensor* t)
{
    const char* k = J->nd[x].key;
    if (J->nd[x].type != _VS_J_OBJ)
        return vs_set_error(VS_ERR_INVALID, "%s: tensor \"%.200s\" is %s, not an object", label, k,
                            _vs_json_what(J, x));
    for (int c = J->nd[x].first; c >= 0; c = J->nd[c].next)
        if (strcmp(J->nd[c].key, "dtype") && strcmp(J->nd[c].key, "shape") && strcmp(J->nd[c].key, "data_offsets"))
            return vs_set_error(VS_ERR_INVALID, "%s: tensor \"%.200s\": unknown field \"%.100s\"", label, k,
                                J->nd[c].key);
    int dt = _vs_json_get(J, x, "dtype"), sh = _vs_json_get(J, x, "shape"), of = _vs_json_get(J, x, "data_offsets");
    if (dt < 0 || J->nd[dt].type != _VS_J_STR)
        return vs_set_error(VS_ERR_INVALID, "%s: tensor \"%.200s\": dtype is %s, not a string", label, k,
                            _vs_json_what(J, dt));
    t->key = k;
    t->dtype = _vs_st_dtype_parse(J->nd[dt].s);
    if (!t->dtype)
        return vs_set_error(VS_ERR_INVALID, "%s: tensor \"%.200s\": unknown dtype \"%.40s\" (F32 F16 BF16 F64 I32 I64 U8)",
                            label, k, J->nd[dt].s);
    if (sh >= 0 && J->nd[sh].type == _VS_J_ARR && J->nd[sh].n > _VS_CKPT_MAXD)
        return vs_set_error(VS_ERR_INVALID, "%s: tensor \"%.200s\": shape has %d dims, more than %d", label, k,
                            J->nd[sh].n, _VS_CKPT_MAXD);
    t->ndim = _vs_json_ints(J, sh, t->shape, _VS_CKPT_MAXD);
    if (t->ndim < 0)
        return vs_set_error(VS_ERR_INVALID, "%s: tensor \"%.200s\": shape is not an array of non-negative integers",
                            label, k);
    int64_t o[2];
    if (_vs_json_ints(J, of, o, 2) != 2 || o[1] < o[0])
        return vs_set_error(VS_ERR_INVALID, "%s: tensor \"%.200s\": data_offsets is not [begin, end] with 0 <= begin <= end",
                            label, k);
    t->begin = (uint64_t)o[0];
    t->end = (uint64_t)o[1];
    uint64_t bytes;
    if (!_vs_ckpt_nbytes(t->ndim, t->shape, vs_dtype_size(t->dtype), &bytes))
        return vs_set_error(VS_ERR_INVALID, "%s: tensor \"%.200s\": shape too large", label, k);
    if (t->end - t->begin != bytes)
        return vs_set_error(VS_ERR_INVALID, "%s: tensor \"%.200s\": data_offsets [%llu, %llu] hold %llu bytes, but %s x shape is %llu",
                            label, k, (unsigned long long)t->begin, (unsigned long long)t->end,
                            (unsigned long long)(t->end - t->begin), J->nd[dt].s, (unsigned long long)bytes);
    return VS_OK;
}

_VS_CKPT_PRIVATE vs_result _vs_st_parse(const vs_world* w, const char* label, const char* json, size_t json_len,
                                        uint64_t file_size, _vs_st_tensor** out, int* n, char** arena)
{
    if (!out || !n || !arena || (!json && json_len)) return vs_set_error(VS_ERR_NULL, "_vs_st_parse: NULL argument");
    *out = NULL;
    *n = 0;
    *arena = NULL;
    if (!label) label = "(safetensors)";
    if (json_len > _VS_ST_MAX_HEADER)
        return vs_set_error(VS_ERR_INVALID, "%s: safetensors header of %zu bytes, over the format's 100 MB", label,
                            json_len);
    if (file_size < 8 || file_size - 8 < json_len)
        return vs_set_error(VS_ERR_INVALID, "%s: file of %llu bytes is shorter than its header (8 + %zu bytes)", label,
                            (unsigned long long)file_size, json_len);
    uint64_t data_size = file_size - 8 - json_len;
    _vs_json J;
    vs_result r = _vs_json_parse(&J, w, label, json, json_len);
    if (r != VS_OK) return r;
    _vs_st_tensor* t = NULL;
    int nt = 0;
    uint64_t at = 0;
    if (J.nd[0].type != _VS_J_OBJ) {
        r = vs_set_error(VS_ERR_INVALID, "%s: safetensors header is %s, not an object", label, _vs_json_what(&J, 0));
        goto fail;
    }
    t = (_vs_st_tensor*)_vs_ckpt_zalloc(w, (size_t)J.nd[0].n, sizeof *t);
    if (!t) {
        r = VS_ERR_NOMEM;
        goto fail;
    }
    for (int c = J.nd[0].first; c >= 0; c = J.nd[c].next) {
        if (!strcmp(J.nd[c].key, "__metadata__")) {
            r = _vs_st_check_meta(&J, c, label);
        } else {
            r = _vs_st_tensor_parse(&J, c, label, &t[nt]);
            nt++;
        }
        if (r != VS_OK) goto fail;
    }
    qsort(t, (size_t)nt, sizeof *t, _vs_st_cmpoff);
    for (int i = 0; i < nt; i++) {
        if (t[i].begin != at) {
            if (t[i].begin < at)
                r = vs_set_error(VS_ERR_INVALID, "%s: tensor \"%.200s\" (bytes %llu..%llu) overlaps \"%.200s\"", label,
                                 t[i].key, (unsigned long long)t[i].begin, (unsigned long long)t[i].end, t[i - 1].key);
            else
                r = vs_set_error(VS_ERR_INVALID, "%s: hole of %llu bytes before tensor \"%.200s\" (data_offsets start at %llu)",
                                 label, (unsigned long long)(t[i].begin - at), t[i].key,
                                 (unsigned long long)t[i].begin);
            goto fail;
        }
        at = t[i].end;
    }
    if (at != data_size) {
        if (at > data_size)
            r = vs_set_error(VS_ERR_INVALID, "%s: tensor \"%.200s\" ends at data byte %llu, past the end of the file (%llu data bytes)",
                             label, t[nt - 1].key, (unsigned long long)at, (unsigned long long)data_size);
        else
            r = vs_set_error(VS_ERR_INVALID, "%s: %llu bytes after the last tensor (the data section has %llu bytes, the tensors %llu)",
                             label, (unsigned long long)(data_size - at), (unsigned long long)data_size,
                             (unsigned long long)at);
        goto fail;
    }
    vs_free(w, J.nd);
    *out = t;
    *n = nt;
    *arena = J.arena;
    return VS_OK;
fail:
    vs_free(w, t);
    _vs_json_free(&J);
    return r;
}

// index -----------------------------------------------------------------------
/* Every pointer in a _vs_ckpt_index is its own vs_alloc block (or NULL), so one
   built by hand is freed by _vs_ckpt_index_free as well. */

_VS_CKPT_PRIVATE _VS_PRINTF(5, 6) vs_result _vs_ckpt_ibad(const char* label, const char* entry, int ei, int piece,
                                                          const char* fmt, ...)
{
    char what[320], where[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    where[0] = 0;
    if (entry) {
        if (piece >= 0) _vs_fmt(where, sizeof where, ": entry \"%.160s\": piece %d", entry, piece);
        else _vs_fmt(where, sizeof where, ": entry \"%.160s\"", entry);
    } else if (ei >= 0) {
        _vs_fmt(where, sizeof where, ": entry %d", ei);
    }
    return vs_set_error(VS_ERR_INVALID, "%s%s: %s", label, where, what);
}

_VS_CKPT_PRIVATE const char* _vs_ckpt_kind_name(vs_ckpt_kind k)
{
    return k == VS_CKPT_TENSOR ? "tensor" : k == VS_CKPT_RANGE ? "range" : k == VS_CKPT_BLOB ? "blob" : NULL;
}

_VS_CKPT_PRIVATE vs_dtype _vs_ckpt_dtype_parse(const char* s)
{
    for (int d = 1; d < (int)VS_DTYPE_COUNT; d++)
        if (!strcmp(s, vs_dtype_name((vs_dtype)d))) return (vs_dtype)d;
    return VS_DTYPE_INVALID;
}

/* A file name the loader may open inside the checkpoint directory. */
_VS_CKPT_PRIVATE int _vs_ckpt_safe_file(const char* s)
{
    size_t n = strlen(s);
    if (!n || n > 255 || !strcmp(s, ".") || !strcmp(s, "..")) return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '/' || s[i] == '\\' || (unsigned char)s[i] < 0x20) return 0;
    return 1;
}

/* Integer member `key` of object x in [lo, hi] into *v; 0 when not. */
_VS_CKPT_PRIVATE int _vs_json_int_in(const _vs_json* J, int x, const char* key, int64_t lo, int64_t hi, int64_t* v)
{
    int c = _vs_json_get(J, x, key);
    if (c < 0 || J->nd[c].type != _VS_J_NUM || !J->nd[c].isint || J->nd[c].i < lo || J->nd[c].i > hi) return 0;
    *v = J->nd[c].i;
    return 1;
}

_VS_CKPT_PRIVATE const char* _vs_json_str_of(const _vs_json* J, int x, const char* key)
{
    int c = _vs_json_get(J, x, key);
    return c >= 0 && J->nd[c].type == _VS_J_STR ? J->nd[c].s : NULL;
}

_VS_CKPT_PRIVATE int _vs_ckpt_hex8(const char* s, uint32_t* v)
{
    uint32_t x = 0;
    for (int k = 0; k < 8; k++) {
        char c = s[k];
        if (c >= '0' && c <= '9') x = x << 4 | (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') x = x << 4 | (uint32_t)(c - 'a' + 10);
        else return 0;
    }
    if (s[8]) return 0;
    *v = x;
    return 1;
}

#define _VS_CKPT_BIG ((int64_t)1 << 62) // bound on every count, size and offset

typedef struct _vs_ckpt_pctx {
    const _vs_json* J;
    const vs_world* w;
    const char* label;
    const _vs_ckpt_index* ix;
    _vs_ckpt_ientry* e;
} _vs_ckpt_pctx;

_VS_CKPT_PRIVATE vs_result _vs_ckpt_piece_parse(const _vs_ckpt_pctx* P, int x, int k, _vs_ckpt_piece* p)
{
    const _vs_json* J = P->J;
    const _vs_ckpt_ientry* e = P->e;
    const char* L = P->label;
    if (J->nd[x].type != _VS_J_OBJ) return _vs_ckpt_ibad(L, e->name, -1, k, "piece is %s, not an object", _vs_json_what(J, x));
    int64_t f;
    if (!_vs_json_int_in(J, x, "file", 0, P->ix->nfiles - 1, &f))
        return _vs_ckpt_ibad(L, e->name, -1, k, "\"file\" is not a file number in [0, %d)", P->ix->nfiles);
    p->file = (int)f;
    const char* key = _vs_json_str_of(J, x, "key");
    if (!key || !key[0]) return _vs_ckpt_ibad(L, e->name, -1, k, "\"key\" is not a non-empty string");
    if (!(p->key = _vs_ckpt_strdup(P->w, key))) return VS_ERR_NOMEM;
    int64_t d[2];
    if (_vs_json_ints(J, _vs_json_get(J, x, "data"), d, 2) != 2 || d[0] > d[1] || d[1] > _VS_CKPT_BIG)
        return _vs_ckpt_ibad(L, e->name, -1, k, "\"data\" is not [begin, end] with 0 <= begin <= end");
    p->data_begin = (uint64_t)d[0];
    p->data_end = (uint64_t)d[1];
    if (p->data_end > P->ix->file_bytes[p->file])
        return _vs_ckpt_ibad(L, e->name, -1, k, "data [%lld, %lld) is past the end of %.100s (%llu bytes)",
                             (long long)d[0], (long long)d[1], P->ix->files[p->file],
                             (unsigned long long)P->ix->file_bytes[p->file]);
    uint64_t count;
    if (e->kind == VS_CKPT_BLOB) {
        count = e->blob_bytes;
    } else {
        int no = _vs_json_ints(J, _vs_json_get(J, x, "offset"), p->off, _VS_CKPT_MAXD);
        int nb = _vs_json_ints(J, _vs_json_get(J, x, "box"), p->box, _VS_CKPT_MAXD);
        if (no != e->ndim || nb != e->ndim)
            return _vs_ckpt_ibad(L, e->name, -1, k, "\"offset\" and \"box\" are not %d non-negative integers each", e->ndim);
        for (int i = 0; i < e->ndim; i++)
            if (p->box[i] > e->shape[i] || p->off[i] > e->shape[i] - p->box[i])
                return _vs_ckpt_ibad(L, e->name, -1, k, "box [%lld, %lld) of dim %d is outside the shape (%lld)",
                                     (long long)p->off[i], (long long)p->off[i] + (long long)p->box[i], i,
                                     (long long)e->shape[i]);
        uint64_t numel;
        if (!_vs_ckpt_nbytes(e->ndim, p->box, 1, &numel)) return _vs_ckpt_ibad(L, e->name, -1, k, "box too large");
        int rx = _vs_json_get(J, x, "range");
        if (e->kind == VS_CKPT_RANGE) {
            int64_t r[2];
            if (_vs_json_ints(J, rx, r, 2) != 2 || r[0] > r[1] || (uint64_t)r[1] > numel)
                return _vs_ckpt_ibad(L, e->name, -1, k, "\"range\" is not [begin, end] with 0 <= begin <= end <= %llu (the box's elements)",
                                     (unsigned long long)numel);
            p->range_begin = r[0];
            p->range_end = r[1];
            count = (uint64_t)(r[1] - r[0]);
        } else {
            if (rx >= 0) return _vs_ckpt_ibad(L, e->name, -1, k, "a tensor piece has a \"range\"");
            count = numel;
        }
        count *= vs_dtype_size(e->dtype); // both below 2^62 / 8
    }
    if (p->data_end - p->data_begin != count)
        return _vs_ckpt_ibad(L, e->name, -1, k, "data [%llu, %llu) holds %llu bytes, but the piece has %llu",
                             (unsigned long long)p->data_begin, (unsigned long long)p->data_end,
                             (unsigned long long)(p->data_end - p->data_begin), (unsigned long long)count);
    int cx = _vs_json_get(J, x, "crc32c");
    uint64_t block = P->ix->block;
    if (!block) {
        if (cx >= 0 && J->nd[cx].type != _VS_J_NULL)
            return _vs_ckpt_ibad(L, e->name, -1, k, "\"crc32c\" given in a checkpoint without checksums");
        return VS_OK;
    }
    uint64_t want = count / block + (count % block != 0);
    if (cx < 0 || J->nd[cx].type != _VS_J_ARR)
        return _vs_ckpt_ibad(L, e->name, -1, k, "\"crc32c\" is %s, not an array", _vs_json_what(J, cx));
    if ((uint64_t)J->nd[cx].n != want)
        return _vs_ckpt_ibad(L, e->name, -1, k, "\"crc32c\" has %d CRCs, but %llu bytes in blocks of %llu need %llu",
                             J->nd[cx].n, (unsigned long long)count, (unsigned long long)block, (unsigned long long)want);
    p->crc = (uint32_t*)_vs_ckpt_zalloc(P->w, want, sizeof *p->crc);
    if (!p->crc) return VS_ERR_NOMEM;
    p->ncrc = (int)want;
    int i = 0;
    for (int c = J->nd[cx].first; c >= 0; c = J->nd[c].next, i++)
        if (J->nd[c].type != _VS_J_STR || !_vs_ckpt_hex8(J->nd[c].s, &p->crc[i]))
            return _vs_ckpt_ibad(L, e->name, -1, k, "\"crc32c\"[%d] is not 8 lower-case hex digits", i);
    return VS_OK;
}

/* Two pieces of one tensor/range entry overlap: boxes meet with elements in
   common; a range entry's pieces of the very same box overlap when their ranges do. */
_VS_CKPT_PRIVATE int _vs_ckpt_pieces_meet(const _vs_ckpt_ientry* e, const _vs_ckpt_piece* a, const _vs_ckpt_piece* b)
{
    int same = 1;
    for (int d = 0; d < e->ndim; d++) {
        if (!a->box[d] || !b->box[d]) return 0;
        if (a->off[d] >= b->off[d] + b->box[d] || b->off[d] >= a->off[d] + a->box[d]) return 0;
        if (a->off[d] != b->off[d] || a->box[d] != b->box[d]) same = 0;
    }
    if (e->kind == VS_CKPT_RANGE) {
        if (a->range_begin == a->range_end || b->range_begin == b->range_end) return 0;
        if (same) return a->range_begin < b->range_end && b->range_begin < a->range_end;
    }
    return 1;
}

typedef struct _vs_ckpt_sortp {
    int64_t lo, hi; // along the sweep dim
    int i;
} _vs_ckpt_sortp;

_VS_CKPT_PRIVATE int _vs_ckpt_cmp_sortp(const void* a, const void* b)
{
    const _vs_ckpt_sortp* x = (const _vs_ckpt_sortp*)a;
    const _vs_ckpt_sortp* y = (const _vs_ckpt_sortp*)b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

_VS_CKPT_PRIVATE int _vs_ckpt_cmp_i64(const void* a, const void* b)
{
    int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
    return x < y ? -1 : x > y;
}

/* No two pieces of entry e overlap: a sweep along the dim with the most distinct
   offsets (the one the pieces are cut along), comparing only pieces whose extents
   along it meet. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_no_overlap(const vs_world* w, const char* label, const _vs_ckpt_ientry* e)
{
    int n = e->npieces;
    if (n < 2 || e->kind == VS_CKPT_BLOB) return VS_OK;
    _vs_ckpt_sortp* s = (_vs_ckpt_sortp*)vs_alloc(w, (size_t)n * sizeof *s);
    int64_t* v = (int64_t*)vs_alloc(w, (size_t)n * sizeof *v);
    vs_result r = VS_OK;
    int best = 0, bestn = 0;
    if (!s || !v) {
        r = VS_ERR_NOMEM;
        goto done;
    }
    for (int d = 0; d < e->ndim; d++) {
        for (int i = 0; i < n; i++) v[i] = e->pieces[i].off[d];
        qsort(v, (size_t)n, sizeof *v, _vs_ckpt_cmp_i64);
        int distinct = 1;
        for (int i = 1; i < n; i++) distinct += v[i] != v[i - 1];
        if (distinct > bestn) bestn = distinct, best = d;
    }
    for (int i = 0; i < n; i++) {
        s[i].i = i;
        s[i].lo = e->ndim ? e->pieces[i].off[best] : 0;
        s[i].hi = e->ndim ? s[i].lo + e->pieces[i].box[best] : 1;
    }
    qsort(s, (size_t)n, sizeof *s, _vs_ckpt_cmp_sortp);
    for (int a = 0; a < n && r == VS_OK; a++)
        for (int b = a + 1; b < n && s[b].lo < s[a].hi; b++) {
            const _vs_ckpt_piece* pa = &e->pieces[s[a].i];
            const _vs_ckpt_piece* pb = &e->pieces[s[b].i];
            if (_vs_ckpt_pieces_meet(e, pa, pb)) {
                int i = s[a].i < s[b].i ? s[a].i : s[b].i, j = s[a].i < s[b].i ? s[b].i : s[a].i;
                r = _vs_ckpt_ibad(label, e->name, -1, j, "overlaps piece %d%s", i,
                                  e->kind == VS_CKPT_RANGE ? " (boxes, or ranges of one box)" : "");
                break;
            }
        }
done:
    vs_free(w, s);
    vs_free(w, v);
    return r;
}

typedef struct _vs_ckpt_span {
    uint64_t b, e;
    int file, entry, piece;
} _vs_ckpt_span;

_VS_CKPT_PRIVATE int _vs_ckpt_cmp_span(const void* a, const void* b)
{
    const _vs_ckpt_span* x = (const _vs_ckpt_span*)a;
    const _vs_ckpt_span* y = (const _vs_ckpt_span*)b;
    if (x->file != y->file) return x->file < y->file ? -1 : 1;
    if (x->b != y->b) return x->b < y->b ? -1 : 1;
    if (x->e != y->e) return x->e < y->e ? -1 : 1;
    return 0;
}

/* No two pieces share bytes of a file. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_no_shared_bytes(const vs_world* w, const char* label, const _vs_ckpt_index* ix)
{
    size_t n = 0;
    for (int i = 0; i < ix->ne; i++) n += (size_t)ix->e[i].npieces;
    if (n < 2) return VS_OK;
    _vs_ckpt_span* s = (_vs_ckpt_span*)vs_alloc(w, n * sizeof *s);
    if (!s) return VS_ERR_NOMEM;
    size_t m = 0;
    for (int i = 0; i < ix->ne; i++)
        for (int k = 0; k < ix->e[i].npieces; k++) {
            const _vs_ckpt_piece* p = &ix->e[i].pieces[k];
            if (p->data_begin == p->data_end) continue;
            s[m].b = p->data_begin, s[m].e = p->data_end, s[m].file = p->file, s[m].entry = i, s[m].piece = k;
            m++;
        }
    qsort(s, m, sizeof *s, _vs_ckpt_cmp_span);
    vs_result r = VS_OK;
    for (size_t j = 1; j < m; j++)
        if (s[j].file == s[j - 1].file && s[j].b < s[j - 1].e) {
            r = _vs_ckpt_ibad(label, ix->e[s[j].entry].name, -1, s[j].piece,
                              "data [%llu, %llu) of %.100s overlaps entry \"%.100s\" piece %d",
                              (unsigned long long)s[j].b, (unsigned long long)s[j].e, ix->files[s[j].file],
                              ix->e[s[j - 1].entry].name, s[j - 1].piece);
            break;
        }
    vs_free(w, s);
    return r;
}

_VS_CKPT_PRIVATE int _vs_ckpt_cmp_name(const void* a, const void* b)
{
    return strcmp(**(char* const* const*)a, **(char* const* const*)b);
}

/* Names unique among n records, each `stride` bytes apart starting with a char*. */
_VS_CKPT_PRIVATE const char* _vs_ckpt_dup_name(const vs_world* w, const void* base, int n, size_t stride, int* nomem)
{
    *nomem = 0;
    if (n < 2) return NULL;
    char* const** v = (char* const**)vs_alloc(w, (size_t)n * sizeof *v);
    if (!v) {
        *nomem = 1;
        return NULL;
    }
    for (int i = 0; i < n; i++) v[i] = (char* const*)((const char*)base + (size_t)i * stride);
    qsort(v, (size_t)n, sizeof *v, _vs_ckpt_cmp_name);
    const char* dup = NULL;
    for (int i = 1; i < n && !dup; i++)
        if (!strcmp(*v[i - 1], *v[i])) dup = *v[i];
    vs_free(w, v);
    return dup;
}

_VS_CKPT_PRIVATE vs_result _vs_ckpt_entry_parse(const _vs_ckpt_pctx* P0, int x, int i, _vs_ckpt_ientry* e)
{
    const _vs_json* J = P0->J;
    const char* L = P0->label;
    if (J->nd[x].type != _VS_J_OBJ) return _vs_ckpt_ibad(L, NULL, i, -1, "is %s, not an object", _vs_json_what(J, x));
    const char* name = _vs_json_str_of(J, x, "name");
    if (!name || !name[0] || strlen(name) >= VS_CKPT_NAME_MAX)
        return _vs_ckpt_ibad(L, NULL, i, -1, "\"name\" is not a string of 1 to %d bytes", VS_CKPT_NAME_MAX - 1);
    if (!(e->name = _vs_ckpt_strdup(P0->w, name))) return VS_ERR_NOMEM;
    const char* kind = _vs_json_str_of(J, x, "kind");
    if (!kind) return _vs_ckpt_ibad(L, name, i, -1, "\"kind\" is not a string");
    if (!strcmp(kind, "tensor")) e->kind = VS_CKPT_TENSOR;
    else if (!strcmp(kind, "range")) e->kind = VS_CKPT_RANGE;
    else if (!strcmp(kind, "blob")) e->kind = VS_CKPT_BLOB;
    else return _vs_ckpt_ibad(L, name, i, -1, "unknown kind \"%.40s\" (tensor, range, blob)", kind);
    if (e->kind == VS_CKPT_BLOB) {
        int64_t bytes;
        if (!_vs_json_int_in(J, x, "bytes", 0, _VS_CKPT_BIG, &bytes))
            return _vs_ckpt_ibad(L, name, i, -1, "\"bytes\" is not a non-negative integer below 2^62");
        e->blob_bytes = (uint64_t)bytes;
        e->dtype = VS_U8;
        e->ndim = 1;
        e->shape[0] = bytes;
    } else {
        const char* dt = _vs_json_str_of(J, x, "dtype");
        if (!dt) return _vs_ckpt_ibad(L, name, i, -1, "\"dtype\" is not a string");
        if (!(e->dtype = _vs_ckpt_dtype_parse(dt)))
            return _vs_ckpt_ibad(L, name, i, -1, "unknown dtype \"%.40s\" (f32 f16 bf16 f64 i32 i64 u8)", dt);
        int sx = _vs_json_get(J, x, "shape");
        if (sx >= 0 && J->nd[sx].type == _VS_J_ARR && J->nd[sx].n > _VS_CKPT_MAXD)
            return _vs_ckpt_ibad(L, name, i, -1, "shape has %d dims, more than %d", J->nd[sx].n, _VS_CKPT_MAXD);
        e->ndim = _vs_json_ints(J, sx, e->shape, _VS_CKPT_MAXD);
        uint64_t bytes;
        if (e->ndim < 0) return _vs_ckpt_ibad(L, name, i, -1, "\"shape\" is not an array of non-negative integers");
        if (!_vs_ckpt_nbytes(e->ndim, e->shape, vs_dtype_size(e->dtype), &bytes))
            return _vs_ckpt_ibad(L, name, i, -1, "shape too large (2^62 bytes or more)");
        int lx = _vs_json_get(J, x, "layout");
        if (lx >= 0 && J->nd[lx].type != _VS_J_NULL) {
            if (J->nd[lx].type != _VS_J_STR) return _vs_ckpt_ibad(L, name, i, -1, "\"layout\" is not a string");
            if (!(e->layout = _vs_ckpt_strdup(P0->w, J->nd[lx].s))) return VS_ERR_NOMEM;
        }
    }
    int px = _vs_json_get(J, x, "pieces");
    if (px < 0 || J->nd[px].type != _VS_J_ARR)
        return _vs_ckpt_ibad(L, name, i, -1, "\"pieces\" is %s, not an array", _vs_json_what(J, px));
    if (e->kind == VS_CKPT_BLOB && J->nd[px].n < 1) return _vs_ckpt_ibad(L, name, i, -1, "a blob without pieces");
    e->pieces = (_vs_ckpt_piece*)_vs_ckpt_zalloc(P0->w, (size_t)J->nd[px].n, sizeof *e->pieces);
    if (!e->pieces) return VS_ERR_NOMEM;
    e->npieces = J->nd[px].n;
    _vs_ckpt_pctx P = *P0;
    P.e = e;
    int k = 0;
    for (int c = J->nd[px].first; c >= 0; c = J->nd[c].next, k++) {
        vs_result r = _vs_ckpt_piece_parse(&P, c, k, &e->pieces[k]);
        if (r != VS_OK) return r;
    }
    return _vs_ckpt_no_overlap(P0->w, L, e);
}

_VS_CKPT_PRIVATE int _vs_ckpt_covered(const _vs_ckpt_ientry* e, int64_t* have, int64_t* want)
{
    int64_t h = 0, t = 1;
    if (e->kind == VS_CKPT_BLOB) {
        t = (int64_t)e->blob_bytes;
        for (int k = 0; k < e->npieces; k++) h += (int64_t)(e->pieces[k].data_end - e->pieces[k].data_begin);
    } else {
        for (int d = 0; d < e->ndim && t >= 0; d++)
            t = e->shape[d] && t > INT64_MAX / e->shape[d] ? -1 : t * e->shape[d];
        for (int k = 0; k < e->npieces; k++) {
            const _vs_ckpt_piece* p = &e->pieces[k];
            int64_t c = 1;
            if (e->kind == VS_CKPT_RANGE) c = p->range_end - p->range_begin;
            else
                for (int d = 0; d < e->ndim; d++) c *= p->box[d]; // (inside the shape: checked when parsed)
            h += c;
        }
    }
    *have = h, *want = t;
    return h == t;
}

_VS_CKPT_PRIVATE void _vs_ckpt_index_free(const vs_world* w, _vs_ckpt_index* ix)
{
    if (!ix) return;
    for (int f = 0; ix->files && f < ix->nfiles; f++) vs_free(w, ix->files[f]);
    vs_free(w, ix->files);
    vs_free(w, ix->file_bytes);
    for (int i = 0; ix->e && i < ix->ne; i++) {
        _vs_ckpt_ientry* e = &ix->e[i];
        for (int k = 0; e->pieces && k < e->npieces; k++) {
            vs_free(w, e->pieces[k].key);
            vs_free(w, e->pieces[k].crc);
        }
        vs_free(w, e->pieces);
        vs_free(w, e->name);
        vs_free(w, e->layout);
    }
    vs_free(w, ix->e);
    memset(ix, 0, sizeof *ix);
}

_VS_CKPT_PRIVATE vs_result _vs_ckpt_index_body(const vs_world* w, const char* L, const _vs_json* J,
                                               _vs_ckpt_index* ix)
{
    if (J->nd[0].type != _VS_J_OBJ)
        return vs_set_error(VS_ERR_INVALID, "%s: the index is %s, not an object", L, _vs_json_what(J, 0));
    const char* fmt = _vs_json_str_of(J, 0, "format");
    if (!fmt || strcmp(fmt, "vescale-ckpt"))
        return vs_set_error(VS_ERR_INVALID, "%s: \"format\" is not \"vescale-ckpt\"", L);
    int64_t ver;
    if (!_vs_json_int_in(J, 0, "version", 1, 1, &ver))
        return vs_set_error(VS_ERR_INVALID, "%s: \"version\" is not 1 (this reader knows version 1)", L);
    // mesh
    int mx = _vs_json_get(J, 0, "mesh");
    if (mx < 0 || J->nd[mx].type != _VS_J_OBJ)
        return vs_set_error(VS_ERR_INVALID, "%s: \"mesh\" is %s, not an object", L, _vs_json_what(J, mx));
    int64_t ms[VS_MESH_MAX_DIMS];
    int sx = _vs_json_get(J, mx, "shape"), dx = _vs_json_get(J, mx, "dims");
    ix->mesh_ndims = _vs_json_ints(J, sx, ms, VS_MESH_MAX_DIMS);
    if (ix->mesh_ndims < 1)
        return vs_set_error(VS_ERR_INVALID, "%s: mesh \"shape\" is not 1 to %d positive integers", L, VS_MESH_MAX_DIMS);
    if (dx < 0 || J->nd[dx].type != _VS_J_ARR || J->nd[dx].n != ix->mesh_ndims)
        return vs_set_error(VS_ERR_INVALID, "%s: mesh \"dims\" is not an array of %d names", L, ix->mesh_ndims);
    int d = 0;
    for (int c = J->nd[dx].first; c >= 0; c = J->nd[c].next, d++) {
        if (ms[d] < 1 || ms[d] > (1 << 24))
            return vs_set_error(VS_ERR_INVALID, "%s: mesh shape[%d] = %lld", L, d, (long long)ms[d]);
        ix->mesh_shape[d] = (int)ms[d];
        if (J->nd[c].type != _VS_J_STR || !J->nd[c].s[0] || strlen(J->nd[c].s) >= VS_MESH_NAME_MAX)
            return vs_set_error(VS_ERR_INVALID, "%s: mesh dims[%d] is not a name of 1 to %d bytes", L, d,
                                VS_MESH_NAME_MAX - 1);
        memcpy(ix->mesh_dims[d], J->nd[c].s, strlen(J->nd[c].s) + 1);
    }
    // checksum
    int cx = _vs_json_get(J, 0, "checksum");
    if (cx < 0) return vs_set_error(VS_ERR_INVALID, "%s: no \"checksum\" (an object, or null)", L);
    if (J->nd[cx].type != _VS_J_NULL) {
        const char* kind = _vs_json_str_of(J, cx, "kind");
        int64_t block;
        if (J->nd[cx].type != _VS_J_OBJ || !kind || strcmp(kind, "crc32c"))
            return vs_set_error(VS_ERR_INVALID, "%s: \"checksum\" is not null or {\"kind\": \"crc32c\", ...}", L);
        if (!_vs_json_int_in(J, cx, "block", 1, (int64_t)1 << 40, &block))
            return vs_set_error(VS_ERR_INVALID, "%s: checksum \"block\" is not an integer in [1, 2^40]", L);
        ix->block = (uint64_t)block;
    }
    // files
    int fx = _vs_json_get(J, 0, "files");
    if (fx < 0 || J->nd[fx].type != _VS_J_ARR)
        return vs_set_error(VS_ERR_INVALID, "%s: \"files\" is %s, not an array", L, _vs_json_what(J, fx));
    int nf = J->nd[fx].n;
    ix->files = (char**)_vs_ckpt_zalloc(w, (size_t)nf, sizeof *ix->files);
    ix->file_bytes = (uint64_t*)_vs_ckpt_zalloc(w, (size_t)nf, sizeof *ix->file_bytes);
    if (!ix->files || !ix->file_bytes) return VS_ERR_NOMEM;
    ix->nfiles = nf;
    int f = 0;
    for (int c = J->nd[fx].first; c >= 0; c = J->nd[c].next, f++) {
        const char* name = _vs_json_str_of(J, c, "name");
        int64_t bytes;
        if (J->nd[c].type != _VS_J_OBJ || !name || !_vs_ckpt_safe_file(name))
            return vs_set_error(VS_ERR_INVALID, "%s: files[%d]: \"name\" is not a plain file name", L, f);
        if (!_vs_json_int_in(J, c, "bytes", 0, _VS_CKPT_BIG, &bytes))
            return vs_set_error(VS_ERR_INVALID, "%s: files[%d] (%.100s): \"bytes\" is not a non-negative integer", L,
                                f, name);
        if (!(ix->files[f] = _vs_ckpt_strdup(w, name))) return VS_ERR_NOMEM;
        ix->file_bytes[f] = (uint64_t)bytes;
    }
    int nomem;
    const char* dup = _vs_ckpt_dup_name(w, ix->files, nf, sizeof *ix->files, &nomem);
    if (nomem) return VS_ERR_NOMEM;
    if (dup) return vs_set_error(VS_ERR_INVALID, "%s: the file \"%.100s\" is listed twice", L, dup);
    // entries
    int ex = _vs_json_get(J, 0, "entries");
    if (ex < 0 || J->nd[ex].type != _VS_J_ARR)
        return vs_set_error(VS_ERR_INVALID, "%s: \"entries\" is %s, not an array", L, _vs_json_what(J, ex));
    ix->e = (_vs_ckpt_ientry*)_vs_ckpt_zalloc(w, (size_t)J->nd[ex].n, sizeof *ix->e);
    if (!ix->e) return VS_ERR_NOMEM;
    ix->ne = J->nd[ex].n;
    _vs_ckpt_pctx P = {J, w, L, ix, NULL};
    int i = 0;
    for (int c = J->nd[ex].first; c >= 0; c = J->nd[c].next, i++) {
        vs_result r = _vs_ckpt_entry_parse(&P, c, i, &ix->e[i]);
        if (r != VS_OK) return r;
    }
    dup = _vs_ckpt_dup_name(w, ix->e, ix->ne, sizeof *ix->e, &nomem);
    if (nomem) return VS_ERR_NOMEM;
    if (dup) return _vs_ckpt_ibad(L, dup, -1, -1, "two entries have this name");
    return _vs_ckpt_no_shared_bytes(w, L, ix);
}

_VS_CKPT_PRIVATE vs_result _vs_ckpt_index_parse(const vs_world* w, const char* label, const char* text, size_t len,
                                                _vs_ckpt_index* out)
{
    if (!out || (!text && len)) return vs_set_error(VS_ERR_NULL, "_vs_ckpt_index_parse: NULL argument");
    memset(out, 0, sizeof *out);
    if (!label) label = "index.json";
    _vs_json J;
    vs_result r = _vs_json_parse(&J, w, label, text, len);
    if (r != VS_OK) return r;
    r = _vs_ckpt_index_body(w, label, &J, out);
    _vs_json_free(&J);
    if (r == VS_ERR_NOMEM) vs_set_error(VS_ERR_NOMEM, "%s: out of memory reading the index", label);
    if (r != VS_OK) _vs_ckpt_index_free(w, out);
    return r;
}

_VS_CKPT_PRIVATE vs_result _vs_ckpt_index_write(const _vs_ckpt_index* ix, _vs_sbuf* b)
{
    if (!ix || !b) return vs_set_error(VS_ERR_NULL, "_vs_ckpt_index_write: NULL argument");
    for (int i = 0; i < ix->ne; i++) {
        const _vs_ckpt_ientry* e = &ix->e[i];
        if (!e->name || !_vs_utf8_valid(e->name) || !_vs_ckpt_kind_name(e->kind))
            return vs_set_error(VS_ERR_INVALID, "index: entry %d (\"%.160s\"): a name that is not UTF-8, or a bad kind", i,
                                e->name ? e->name : "(null)");
    }
    _vs_sb_printf(b, "{\"format\": \"vescale-ckpt\", \"version\": 1,\n \"mesh\": {\"shape\": [");
    for (int d = 0; d < ix->mesh_ndims; d++) _vs_sb_printf(b, "%s%d", d ? ", " : "", ix->mesh_shape[d]);
    _vs_sb_printf(b, "], \"dims\": [");
    for (int d = 0; d < ix->mesh_ndims; d++) {
        _vs_sb_printf(b, "%s", d ? ", " : "");
        _vs_sb_json_str(b, ix->mesh_dims[d]);
    }
    _vs_sb_printf(b, "]},\n");
    if (ix->block) _vs_sb_printf(b, " \"checksum\": {\"kind\": \"crc32c\", \"block\": %llu},\n", (unsigned long long)ix->block);
    else _vs_sb_printf(b, " \"checksum\": null,\n");
    _vs_sb_printf(b, " \"files\": [");
    for (int f = 0; f < ix->nfiles; f++) {
        _vs_sb_printf(b, "%s\n  {\"name\": ", f ? "," : "");
        _vs_sb_json_str(b, ix->files[f]);
        _vs_sb_printf(b, ", \"bytes\": %llu}", (unsigned long long)ix->file_bytes[f]);
    }
    _vs_sb_printf(b, "],\n \"entries\": [");
    for (int i = 0; i < ix->ne; i++) {
        const _vs_ckpt_ientry* e = &ix->e[i];
        _vs_sb_printf(b, "%s\n  {\"name\": ", i ? "," : "");
        _vs_sb_json_str(b, e->name);
        _vs_sb_printf(b, ", \"kind\": \"%s\"", _vs_ckpt_kind_name(e->kind));
        if (e->kind == VS_CKPT_BLOB) {
            _vs_sb_printf(b, ", \"bytes\": %llu", (unsigned long long)e->blob_bytes);
        } else {
            _vs_sb_printf(b, ", \"dtype\": \"%s\", \"shape\": [", vs_dtype_name(e->dtype));
            for (int d = 0; d < e->ndim; d++) _vs_sb_printf(b, "%s%lld", d ? ", " : "", (long long)e->shape[d]);
            _vs_sb_printf(b, "], \"layout\": ");
            if (e->layout) _vs_sb_json_str(b, e->layout);
            else _vs_sb_printf(b, "null");
        }
        _vs_sb_printf(b, ",\n   \"pieces\": [");
        for (int k = 0; k < e->npieces; k++) {
            const _vs_ckpt_piece* p = &e->pieces[k];
            _vs_sb_printf(b, "%s\n    {\"file\": %d, \"key\": ", k ? "," : "", p->file);
            _vs_sb_json_str(b, p->key);
            if (e->kind != VS_CKPT_BLOB) {
                _vs_sb_printf(b, ", \"offset\": [");
                for (int d = 0; d < e->ndim; d++) _vs_sb_printf(b, "%s%lld", d ? ", " : "", (long long)p->off[d]);
                _vs_sb_printf(b, "], \"box\": [");
                for (int d = 0; d < e->ndim; d++) _vs_sb_printf(b, "%s%lld", d ? ", " : "", (long long)p->box[d]);
                _vs_sb_printf(b, "]");
            }
            if (e->kind == VS_CKPT_RANGE)
                _vs_sb_printf(b, ", \"range\": [%lld, %lld]", (long long)p->range_begin, (long long)p->range_end);
            _vs_sb_printf(b, ", \"data\": [%llu, %llu]", (unsigned long long)p->data_begin,
                          (unsigned long long)p->data_end);
            if (ix->block) {
                _vs_sb_printf(b, ",\n     \"crc32c\": [");
                for (int c = 0; c < p->ncrc && p->crc; c++)
                    _vs_sb_printf(b, "%s\"%08x\"", c ? (c % 8 ? ", " : ",\n      ") : "", (unsigned)p->crc[c]);
                _vs_sb_printf(b, "]");
            }
            _vs_sb_printf(b, "}");
        }
        _vs_sb_printf(b, "]}");
    }
    _vs_sb_printf(b, "]}\n");
    if (b->oom) return vs_set_error(VS_ERR_NOMEM, "index: out of memory writing %d entries", ix->ne);
    return VS_OK;
}

// >>ckpt-commit ----------------------------------------------------------------

#define _VS_CKPT_INDEX "index.json"
#define _VS_CKPT_TMP ".tmp-"  // an unfinished save: <path>.tmp-<nonce>
#define _VS_CKPT_OLD ".old-"  // a replaced checkpoint, until the new one is durable
#define _VS_CKPT_DEL ".del-"  // a checkpoint being deleted: renamed first, so no reader sees half of one

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
    if (!s) _vs_ckpt_fmt(out, cap, ".");
    else if (s == path) _vs_ckpt_fmt(out, cap, "/");
    else _vs_ckpt_fmt(out, cap, "%.*s", (int)(s - path), path);
}

/* Cleanup (vs_ckpt_retain, keep_last, overwrite, the leftovers of failed and
   killed saves) trusts nothing it finds in the folder: it opens the folder once
   and works relative to that descriptor, never follows a symbolic link
   (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW), deletes only directories under names it
   gives (checkpoints, .tmp-/.old-/.del- leftovers) and in them only regular
   files. Anything else (a link, a FIFO, a subdirectory) is left alone with a
   warning, and so is the directory that holds it. */

/* A warning through w's logger, or (no world: vs_ckpt_retain, vs_ckpt_latest)
   to stderr unless VESCALE_LOG is off or error (the default level is warn). */
_VS_CKPT_PRIVATE void _vs_ckpt_warn(const vs_world* w, const char* fmt, ...)
{
    char m[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    if (w) {
        vs_log(w, VS_LOG_WARN, "%s", m);
        return;
    }
    const char* e = getenv("VESCALE_LOG"); // (warn by default: quiet only at off or error)
    if (!e || !*e || !(!strcmp(e, "off") || !strcmp(e, "error") || !strcmp(e, "1") || !strcmp(e, "2")))
        fprintf(stderr, "vescale warn: %s\n", m);
}

/* The directory `name` of the folder open as root, never through a link: -1
   with errno ELOOP or ENOTDIR for a link or a file. */
_VS_CKPT_PRIVATE int _vs_ckpt_subdir(int root, const char* name)
{
    return openat(root, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Deletes the regular files of folder/name (the folder open as root), then the
   directory itself; a link in name's place, or anything but a regular file in
   it, is left alone with a warning. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_rmdir_at(const vs_world* w, int root, const char* folder, const char* name)
{
    int fd = _vs_ckpt_subdir(root, name);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT) return VS_OK;
        if (e == ELOOP || e == ENOTDIR) {
            _vs_ckpt_warn(w, "%s/%s is a symbolic link or a file, not a directory the library made: left alone",
                          folder, name);
            return VS_OK;
        }
        return vs_set_error(VS_ERR_IO, "cannot open %s/%s: %s", folder, name, strerror(e));
    }
    DIR* d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return vs_set_error(VS_ERR_IO, "cannot read %s/%s: %s", folder, name, strerror(e));
    }
    vs_result r = VS_OK;
    int kept = 0;
    struct dirent* de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        struct stat st;
        if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW)) continue; // (gone meanwhile)
        if (!S_ISREG(st.st_mode)) {
            _vs_ckpt_warn(w, "%s/%s/%s is not a regular file (the library writes only those): left alone, with %s/%s",
                          folder, name, de->d_name, folder, name);
            kept++;
            continue;
        }
        if (unlinkat(fd, de->d_name, 0) && errno != ENOENT && !r)
            r = vs_set_error(VS_ERR_IO, "cannot remove %s/%s/%s: %s", folder, name, de->d_name, strerror(errno));
    }
    closedir(d);
    if (r || kept) return r;
    if (unlinkat(root, name, AT_REMOVEDIR) && errno != ENOENT)
        return vs_set_error(VS_ERR_IO, "cannot remove %s/%s: %s", folder, name, strerror(errno));
    return VS_OK;
}

/* Deletes the checkpoint folder/name so that a crash midway never leaves a
   complete-looking half of it (an index without its shards): it is renamed to
   "<name>.del-" first, the rename made durable, then its files deleted. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_remove_at(const vs_world* w, int root, const char* folder, const char* name)
{
    if (strstr(name, _VS_CKPT_DEL)) return _vs_ckpt_rmdir_at(w, root, folder, name);
    struct stat st;
    if (fstatat(root, name, &st, AT_SYMLINK_NOFOLLOW))
        return errno == ENOENT ? VS_OK : vs_set_error(VS_ERR_IO, "cannot stat %s/%s: %s", folder, name, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        _vs_ckpt_warn(w, "%s/%s is a symbolic link or a file, not a checkpoint the library made: left alone", folder,
                      name);
        return VS_OK;
    }
    char del[1100];
    _vs_ckpt_fmt(del, sizeof del, "%s" _VS_CKPT_DEL, name);
    _VS_TRY(_vs_ckpt_rmdir_at(w, root, folder, del)); // (left by a crash in an earlier delete)
    if (renameat(root, name, root, del))
        return vs_set_error(VS_ERR_IO, "rename %s/%s -> %s: %s", folder, name, del, strerror(errno));
    if (fsync(root)) return vs_set_error(VS_ERR_IO, "fsync %s: %s", folder, strerror(errno));
    return _vs_ckpt_rmdir_at(w, root, folder, del);
}

/* The same on a path: the directory that holds it is opened once (remove = 0:
   delete as a leftover, 1: as a checkpoint). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_path_op(const vs_world* w, const char* path, int remove)
{
    char parent[4096];
    const char* s = strrchr(path, '/');
    const char* name = s ? s + 1 : path;
    _vs_ckpt_parent(path, parent, sizeof parent);
    int root = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return errno == ENOENT ? VS_OK
                               : vs_set_error(VS_ERR_IO, "cannot open the folder %s: %s", parent, strerror(errno));
    vs_result r = remove ? _vs_ckpt_remove_at(w, root, parent, name) : _vs_ckpt_rmdir_at(w, root, parent, name);
    close(root);
    return r;
}

_VS_CKPT_PRIVATE int _vs_ckpt_leftover_name(const char* name)
{
    return strstr(name, _VS_CKPT_TMP) || strstr(name, _VS_CKPT_OLD) || strstr(name, _VS_CKPT_DEL);
}

/* folder/name is a directory (not a link) holding a non-empty regular index.json. */
_VS_CKPT_PRIVATE int _vs_ckpt_has_index(int root, const char* name)
{
    int fd = _vs_ckpt_subdir(root, name);
    if (fd < 0) return 0;
    struct stat st;
    int ok = fstatat(fd, _VS_CKPT_INDEX, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
    close(fd);
    return ok;
}

_VS_CKPT_PRIVATE int _vs_ckpt_complete(int root, const char* name)
{
    if (name[0] == '.' || _vs_ckpt_leftover_name(name)) return 0;
    return _vs_ckpt_has_index(root, name);
}

/* "X.old-N" with an index while X is not complete: a crash came between the two
   renames of an overwrite (X -> X.old-N, X.tmp-N -> X), so this is still X's
   durable state. Lists and latest count it as X; retain renames it back to X.
   base (cap bytes) gets X. */
_VS_CKPT_PRIVATE int _vs_ckpt_orphan(int root, const char* name, char* base, size_t cap)
{
    const char* o = strstr(name, _VS_CKPT_OLD);
    if (!o || o == name || name[0] == '.' || strstr(name, _VS_CKPT_TMP) || strstr(name, _VS_CKPT_DEL)) return 0;
    _vs_ckpt_fmt(base, cap, "%.*s", (int)(o - name), name);
    return _vs_ckpt_has_index(root, name) && !_vs_ckpt_complete(root, base);
}

static int _vs_ckpt_strcmp_desc(const void* a, const void* b)
{
    return strcmp(*(const char* const*)b, *(const char* const*)a);
}

/* The complete checkpoints of the folder open as root (orphans of an
   interrupted overwrite among them), newest (greatest name) first; leftovers =
   1: the leftovers of interrupted saves and deletes instead; 2: the orphans
   alone. A symbolic link is never a checkpoint (cleanup would follow it out of
   the folder). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_list(int root, const char* folder, char*** names, int* n, int leftovers)
{
    *names = NULL;
    *n = 0;
    int fd = openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); // (its own offset for readdir)
    DIR* d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        int e = errno;
        if (fd >= 0) close(fd);
        return vs_set_error(VS_ERR_IO, "cannot read the folder %s: %s", folder, strerror(e));
    }
    int cap = 0;
    struct dirent* de;
    char base[1024];
    vs_result r = VS_OK;
    while ((de = readdir(d)) != NULL && !r) {
        int orphan = _vs_ckpt_orphan(root, de->d_name, base, sizeof base);
        int take = leftovers == 1 ? _vs_ckpt_leftover_name(de->d_name) && !orphan
                 : leftovers == 2 ? orphan
                                  : orphan || _vs_ckpt_complete(root, de->d_name);
        if (!take) continue;
        if (*n == cap) { // (no world here: the hooks' defaults, as before a world exists)
            cap = cap ? 2 * cap : 16;
            char** nn = (char**)vs_alloc(NULL, sizeof(char*) * (size_t)cap);
            if (!nn) r = vs_set_error(VS_ERR_NOMEM, "out of memory listing %s", folder);
            else {
                if (*n) memcpy(nn, *names, sizeof(char*) * (size_t)*n);
                vs_free(NULL, *names);
                *names = nn;
            }
        }
        if (!r && !((*names)[*n] = _vs_ckpt_strdup(NULL, de->d_name)))
            r = vs_set_error(VS_ERR_NOMEM, "out of memory listing %s", folder);
        if (!r) (*n)++;
    }
    closedir(d);
    if (*n) qsort(*names, (size_t)*n, sizeof(char*), _vs_ckpt_strcmp_desc);
    return r;
}

_VS_CKPT_PRIVATE void _vs_ckpt_list_free(char** names, int n)
{
    for (int i = 0; i < n; i++) vs_free(NULL, names[i]);
    vs_free(NULL, names);
}

/* A save in progress holds a read lock on its .tmp- directory, an open file
   description lock (Linux: per descriptor, so a save of this process counts
   too, and the kernel drops it when the process dies). A .tmp- leftover that
   nobody holds is the debris of a killed save: stale. .del- leftovers are
   always stale (a delete can be finished by anyone). Without OFD locks no
   .tmp- is judged stale; vs_ckpt_retain still removes every leftover. */
#if defined(__linux__)
#ifndef F_OFD_GETLK
#define F_OFD_GETLK 36 // (the kernel's values; glibc names them only under _GNU_SOURCE)
#define F_OFD_SETLK 37
#endif
#define _VS_CKPT_OFD 1
#endif

/* Takes the save's lock on its temporary directory: the descriptor, or -1. */
_VS_CKPT_PRIVATE int _vs_ckpt_hold(const char* tmp)
{
#ifdef _VS_CKPT_OFD
    int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_RDLCK;
    fl.l_whence = SEEK_SET;
    if (fd >= 0 && fcntl(fd, F_OFD_SETLK, &fl)) close(fd), fd = -1;
    return fd;
#else
    (void)tmp;
    return -1;
#endif
}

_VS_CKPT_PRIVATE int _vs_ckpt_stale(int root, const char* name)
{
    if (strstr(name, _VS_CKPT_DEL)) return 1;
    if (!strstr(name, _VS_CKPT_TMP)) return 0;
#ifdef _VS_CKPT_OFD
    int fd = _vs_ckpt_subdir(root, name);
    if (fd < 0) return 0; // (a link is not the library's: left, as by retain)
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    int r = fcntl(fd, F_OFD_GETLK, &fl);
    close(fd);
    return r == 0 && fl.l_type == F_UNLCK;
#else
    return 0;
#endif
}

/* Removes the stale leftovers of the folder open as root (at the start of a
   save and in vs_ckpt_latest). Best effort: a failure only warns. */
_VS_CKPT_PRIVATE void _vs_ckpt_sweep(const vs_world* w, int root, const char* folder)
{
    char** names;
    int n;
    if (_vs_ckpt_list(root, folder, &names, &n, 1)) return;
    for (int i = 0; i < n; i++)
        if (_vs_ckpt_stale(root, names[i]) && _vs_ckpt_rmdir_at(w, root, folder, names[i]))
            _vs_ckpt_warn(w, "removing the leftover %s/%s: %s", folder, names[i], vs_last_error());
    _vs_ckpt_list_free(names, n);
}

_VS_CKPT_PRIVATE int _vs_ckpt_open_folder(const char* folder, const char* fn)
{
    int root = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) vs_set_error(VS_ERR_IO, "%s: cannot open the folder %s: %s", fn, folder, strerror(errno));
    return root;
}

VS_API vs_result vs_ckpt_latest(const char* folder, char* out, size_t cap)
{
    if (!folder || !out) return vs_set_error(VS_ERR_NULL, "vs_ckpt_latest: %s is NULL", folder ? "out" : "folder");
    int root = _vs_ckpt_open_folder(folder, "vs_ckpt_latest");
    if (root < 0) return VS_ERR_IO;
    char** names;
    int n;
    _vs_ckpt_sweep(NULL, root, folder); // (the debris of killed saves)
    vs_result r = _vs_ckpt_list(root, folder, &names, &n, 0);
    close(root);
    if (!r && !n) r = vs_set_error(VS_ERR_INVALID, "vs_ckpt_latest: no complete checkpoint in %s", folder);
    if (!r && (size_t)snprintf(out, cap, "%s/%s", folder, names[0]) >= cap)
        r = vs_set_error(VS_ERR_INVALID, "vs_ckpt_latest: %zu bytes are too few for %s/%s", cap, folder, names[0]);
    _vs_ckpt_list_free(names, n);
    return r;
}

_VS_CKPT_PRIVATE vs_result _vs_ckpt_retain_at(const vs_world* w, int root, const char* folder, int keep)
{
    char** names;
    int n;
    char base[1024];
    _VS_TRY(_vs_ckpt_list(root, folder, &names, &n, 2));
    vs_result r = VS_OK;
    for (int i = 0; i < n && !r; i++) { // orphans of an interrupted overwrite get their name back
        if (!_vs_ckpt_orphan(root, names[i], base, sizeof base)) continue;
        if (renameat(root, names[i], root, base))
            r = vs_set_error(VS_ERR_IO, "vs_ckpt_retain: rename %s/%s -> %s: %s", folder, names[i], base,
                             strerror(errno));
    }
    _vs_ckpt_list_free(names, n);
    if (!r && n && fsync(root)) r = vs_set_error(VS_ERR_IO, "fsync %s: %s", folder, strerror(errno));
    // leftovers of interrupted saves and deletes first: a replaced checkpoint whose
    // delete a crash stopped must be gone before its successor can be deleted,
    // or it would look like an orphan of that name
    if (r || (r = _vs_ckpt_list(root, folder, &names, &n, 1)) != VS_OK) return r;
    for (int i = 0; i < n && !r; i++)
        r = strstr(names[i], _VS_CKPT_OLD) ? _vs_ckpt_remove_at(w, root, folder, names[i])
                                           : _vs_ckpt_rmdir_at(w, root, folder, names[i]);
    _vs_ckpt_list_free(names, n);
    if (r || (r = _vs_ckpt_list(root, folder, &names, &n, 0)) != VS_OK) return r;
    for (int i = keep; i < n && !r; i++) r = _vs_ckpt_remove_at(w, root, folder, names[i]);
    _vs_ckpt_list_free(names, n);
    if (!r && fsync(root)) r = vs_set_error(VS_ERR_IO, "fsync %s: %s", folder, strerror(errno));
    return r;
}

_VS_CKPT_PRIVATE vs_result _vs_ckpt_retain_w(const vs_world* w, const char* folder, int keep)
{
    int root = _vs_ckpt_open_folder(folder, "vs_ckpt_retain");
    if (root < 0) return VS_ERR_IO;
    vs_result r = _vs_ckpt_retain_at(w, root, folder, keep);
    close(root);
    return r;
}

VS_API vs_result vs_ckpt_retain(const char* folder, int keep)
{
    if (!folder) return vs_set_error(VS_ERR_NULL, "vs_ckpt_retain: folder is NULL");
    if (keep < 1) return vs_set_error(VS_ERR_INVALID, "vs_ckpt_retain: keep = %d (at least 1)", keep);
    return _vs_ckpt_retain_w(NULL, folder, keep);
}

/* An existing path (a link counts) without overwrite is VS_ERR_STATE: checked at
   the call (async), before anything is written (rank 0), and at the commit. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_taken(const char* path, int overwrite)
{
    struct stat st;
    if (!overwrite && lstat(path, &st) == 0)
        return vs_set_error(VS_ERR_STATE, "vs_ckpt_save: %s exists (pass overwrite to replace it)", path);
    return VS_OK;
}

/* Puts the finished temporary directory in place (rank 0): everything in it is
   durable already; an old checkpoint at path is renamed away, not deleted,
   until the new one's rename is durable (a crash between the two renames
   leaves it as an orphan that lists, latest and retain treat as path). A link
   at path counts as existing; overwrite renames the link away, never follows it. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_commit(const vs_world* w, const char* tmp, const char* path, const char* nonce,
                                           int overwrite)
{
    char parent[4096], old[4096];
    _vs_ckpt_parent(path, parent, sizeof parent);
    _VS_TRY(_vs_ckpt_fsync_path(tmp, 1));
    _VS_TRY(_vs_ckpt_taken(path, overwrite));
    struct stat st;
    int exists = lstat(path, &st) == 0;
    if (exists) {
        _vs_ckpt_fmt(old, sizeof old, "%s" _VS_CKPT_OLD "%s", path, nonce);
        if (rename(path, old)) return vs_set_error(VS_ERR_IO, "rename %s -> %s: %s", path, old, strerror(errno));
    }
    if (rename(tmp, path)) {
        vs_result r = vs_set_error(VS_ERR_IO, "rename %s -> %s: %s", tmp, path, strerror(errno));
        if (exists) rename(old, path);
        return r;
    }
    _VS_TRY(_vs_ckpt_fsync_path(parent, 1));
    if (exists) _vs_ckpt_path_op(w, old, 1);
    return VS_OK;
}

// >>ckpt-api -------------------------------------------------------------------

VS_API int vs_ckpt_version(void) { return VESCALE_VERSION_NUMBER; }

struct vs_ckpt {
    uint32_t magic; // _VS_CKPT_LIVE
    vs_mesh* mesh;
    vs_world* w;
    vs_comm* comm; // a duplicate of the mesh's, used only by the thread that calls the checkpointer
    int rank, size;
    vs_ckpt_desc desc;
    // the async save in flight: its shard written by `thread`, committed by vs_ckpt_wait
    pthread_t thread;
    int running, threaded;
    struct _vs_ckpt_saving* save;
    struct _vs_ckpt_job* job;
    size_t async_used;
    void* spare; // the last async save's copy block, reused by the next (no fresh pages to fault in)
    size_t spare_bytes;
    int spare_pinned; // page-locked for the device's copies (cudaHostRegister)
    /* NCCL takes only device memory: the metadata collectives (host buffers)
       go through this device buffer, grown as needed and freed with the
       checkpointer (never a cudaFree beside collectives waiting on peers). */
    int staged, cuda_dev;
    void* dstage;
    size_t dstage_bytes;
};

/* Every zero-is-default value of a desc, resolved in this one place (sokol's
   _sg_desc_defaults): vs_ckpt_init keeps the result, vs_ckpt_query_desc returns
   it. It checks nothing (vs_ckpt_init checks first). */
_VS_CKPT_PRIVATE void _vs_ckpt_desc_defaults(vs_ckpt_desc* d)
{
    if (!d->async_max_bytes) d->async_max_bytes = VS_CKPT_DEFAULT_ASYNC_MAX_BYTES;
}

VS_API vs_result vs_ckpt_init(const vs_ckpt_desc* desc, vs_ckpt** out)
{
    if (!out) return vs_set_error(VS_ERR_NULL, "vs_ckpt_init: out is NULL");
    *out = NULL;
    if (!desc || !desc->mesh) return vs_set_error(VS_ERR_NULL, "vs_ckpt_init: %s is NULL", desc ? "desc.mesh" : "desc");
    if (desc->keep_last < 0)
        return vs_set_error(VS_ERR_INVALID, "vs_ckpt_init: desc.keep_last = %d (>= 0; 0: keep all)", desc->keep_last);
    const int flags[3] = {desc->no_checksum, desc->no_readahead, desc->untouched_on_error};
    const char* const fname[3] = {"no_checksum", "no_readahead", "untouched_on_error"};
    for (int i = 0; i < 3; i++)
        if (flags[i] != 0 && flags[i] != 1)
            return vs_set_error(VS_ERR_INVALID, "vs_ckpt_init: desc.%s = %d (0 or 1)", fname[i], flags[i]);
    vs_world* w = vs_mesh_world(desc->mesh);
    vs_ckpt* ck = (vs_ckpt*)vs_alloc(w, sizeof *ck);
    if (!ck) return vs_set_error(VS_ERR_NOMEM, "vs_ckpt_init: out of memory");
    memset(ck, 0, sizeof *ck);
    ck->magic = _VS_CKPT_LIVE;
    ck->mesh = desc->mesh;
    ck->w = w;
    ck->desc = *desc;
    _vs_ckpt_desc_defaults(&ck->desc);
    vs_comm* mc = vs_mesh_comm(desc->mesh);
    ck->rank = vs_comm_rank(mc);
    ck->size = vs_comm_size(mc);
    vs_result r = vs_comm_split(mc, 0, ck->rank, &ck->comm);
    if (!r) r = vs_mesh_retain(desc->mesh);
#ifdef _VS_CKPT_CUDA
    ck->staged = !r && (vs_comm_device(ck->comm) || _VS_CKPT_FORCE_STAGING);
    if (ck->staged && cudaGetDevice(&ck->cuda_dev) != cudaSuccess) ck->cuda_dev = 0;
#endif
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
    int seq;            // index among the holder's records (rank 0 sends the plan back in this order)
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
#define _VS_CKPT_BLOB_MAX ((uint64_t)1 << 48) // bytes of a blob, as a tensor's dims

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
    _vs_ckpt_fmt(rc->name, sizeof rc->name, "%s", e->name);
    rc->rank = rank;
    rc->kind = (int)e->kind;
    rc->entry = i;
    if (e->kind == VS_CKPT_BLOB) {
        if (e->blob_bytes && !e->blob)
            return vs_set_error(VS_ERR_NULL, "%s: entry \"%s\": blob is NULL for %zu bytes", fn, e->name, e->blob_bytes);
        if ((uint64_t)e->blob_bytes > _VS_CKPT_BLOB_MAX) // (a length that no memory holds: a wrong field)
            return vs_set_error(VS_ERR_INVALID, "%s: entry \"%s\": blob_bytes = %zu (at most 2^48)", fn, e->name,
                                e->blob_bytes);
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

#ifdef _VS_CKPT_CUDA
/* The device staging buffer, grown to `need` bytes (never shrunk: no cudaFree
   beside collectives waiting on peers). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_stage(vs_ckpt* ck, size_t need)
{
    if (need <= ck->dstage_bytes) return VS_OK;
    void* d = vs_device_alloc(ck->w, need);
    if (!d) return vs_set_error(VS_ERR_NOMEM, "checkpoint: %zu bytes of device memory for metadata", need);
    if (ck->dstage) vs_device_free(ck->w, ck->dstage);
    ck->dstage = d, ck->dstage_bytes = need;
    return VS_OK;
}
#endif

/* The checkpointer's metadata collectives, on host buffers. Staged (NCCL): each
   goes through the device buffer, copied in and out on the communicator's
   stream (the blocking collective between them waits with its deadline). */
enum { _VS_CKPT_BCAST, _VS_CKPT_MAX };
_VS_CKPT_PRIVATE vs_result _vs_ckpt_coll(vs_ckpt* ck, int kind, const void* send, void* recv, size_t count, vs_dtype dt,
                                         int root)
{
    vs_comm* c = ck->comm;
    if (!ck->staged)
        return kind == _VS_CKPT_BCAST ? vs_broadcast(c, recv, recv, count, dt, root, NULL)
                                      : vs_all_reduce(c, send, recv, count, dt, VS_OP_MAX, NULL);
#ifdef _VS_CKPT_CUDA
    const size_t sb = count * vs_dtype_size(dt), at = (sb + 255) / 256 * 256;
    vs_result r = _vs_ckpt_stage(ck, at + sb + 1);
    if (r) return r;
    char *ds = (char*)ck->dstage, *dr = ds + at;
    cudaStream_t st = (cudaStream_t)vs_comm_stream(c);
    cudaError_t e = cudaSuccess;
    if (sb) e = cudaMemcpyAsync(kind == _VS_CKPT_BCAST ? dr : ds, kind == _VS_CKPT_BCAST ? recv : send, sb,
                                cudaMemcpyDefault, st);
    if (e != cudaSuccess)
        return vs_set_error(VS_ERR_BACKEND, "checkpoint: staging %zu bytes: %s", sb, cudaGetErrorString(e));
    r = kind == _VS_CKPT_BCAST ? vs_broadcast(c, dr, dr, count, dt, root, NULL)
                               : vs_all_reduce(c, ds, dr, count, dt, VS_OP_MAX, NULL);
    if (r) return r;
    if (sb) e = cudaMemcpyAsync(recv, dr, sb, cudaMemcpyDefault, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st); // (the collective is done: the copy alone is left)
    return e == cudaSuccess ? VS_OK
                            : vs_set_error(VS_ERR_BACKEND, "checkpoint: staging %zu bytes back: %s", sb,
                                           cudaGetErrorString(e));
#else
    (void)send, (void)recv, (void)count, (void)dt, (void)root;
    return vs_set_error(VS_ERR_UNAVAILABLE, "checkpoint: staging needs a VESCALE_NCCL build");
#endif
}

/* Rank k's slot of a transfer between rank 0 and every rank: counts/displs, or
   `bytes` from every rank at k * bytes (counts NULL). */
_VS_CKPT_PRIVATE size_t _vs_ckpt_slot(const size_t* counts, const size_t* displs, size_t bytes, int k, size_t* n)
{
    *n = counts ? counts[k] : bytes;
    return counts ? displs[k] : (size_t)k * bytes;
}

/* Point to point between rank 0 and each rank, never all to all: the save's
   metadata stays linear in the world (rank 0 holds every rank's, each rank its
   own). up: rank 0 receives each rank's `bytes` of `one` into its slot of
   `all`; down: rank 0 sends each rank its slot, received into `one`. Staged
   (NCCL): through the device buffer, as _vs_ckpt_coll. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_xfer(vs_ckpt* ck, int up, void* one, size_t bytes, void* all, const size_t* counts,
                                         const size_t* displs)
{
    vs_comm* c = ck->comm;
    const int root = ck->rank == 0;
    size_t span = bytes, n = 0;
    for (int k = 0; root && k < ck->size; k++) {
        size_t at = _vs_ckpt_slot(counts, displs, bytes, k, &n);
        if (k == 0 || at + n > span) span = at + n;
    }
    char *h = root ? (char*)all : (char*)one, *b = h;
#ifdef _VS_CKPT_CUDA
    cudaStream_t st = NULL;
    cudaError_t e = cudaSuccess;
    if (ck->staged) {
        vs_result rs = _vs_ckpt_stage(ck, span + 1);
        if (rs) return rs;
        b = (char*)ck->dstage;
        st = (cudaStream_t)vs_comm_stream(c);
        if (span && up != root) e = cudaMemcpyAsync(b, h, span, cudaMemcpyDefault, st); // (the sending side)
        if (e != cudaSuccess)
            return vs_set_error(VS_ERR_BACKEND, "checkpoint: staging %zu bytes: %s", span, cudaGetErrorString(e));
    }
#endif
    vs_result r = vs_group_start(c);
    if (r) return r;
    for (int k = 1; root && !r && k < ck->size; k++) {
        size_t at = _vs_ckpt_slot(counts, displs, bytes, k, &n);
        if (n) r = up ? vs_recv(c, b + at, n, VS_U8, k, NULL) : vs_send(c, b + at, n, VS_U8, k, NULL);
    }
    if (!root && bytes) r = up ? vs_send(c, b, bytes, VS_U8, 0, NULL) : vs_recv(c, b, bytes, VS_U8, 0, NULL);
    vs_result r2 = vs_group_end(c, NULL); // (a failed post still closes the group)
    if (!r) r = r2;
#ifdef _VS_CKPT_CUDA
    if (!r && ck->staged) {
        if (span && up == root) e = cudaMemcpyAsync(h, b, span, cudaMemcpyDefault, st);
        if (e == cudaSuccess) e = cudaStreamSynchronize(st);
        if (e != cudaSuccess)
            return vs_set_error(VS_ERR_BACKEND, "checkpoint: staging %zu bytes back: %s", span, cudaGetErrorString(e));
    }
#endif
    size_t at0 = _vs_ckpt_slot(counts, displs, bytes, 0, &n);
    if (!r && root && n) memmove(up ? h + at0 : (char*)one, up ? (const char*)one : h + at0, n);
    return r;
}

/* Every rank's status: the first failing rank's result (and its rank), or VS_OK.
   flag (may be NULL): in, this rank's value; out, the largest over the ranks.
   One all-reduce. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_agree_flag(vs_ckpt* ck, vs_result mine, int64_t* flag, int* who)
{
    int64_t v[4] = {mine ? 1 : 0, mine ? -(int64_t)mine : 0, mine ? (int64_t)(ck->size - ck->rank) : 0, flag ? *flag : 0};
    int64_t all[4];
    vs_result r = _vs_ckpt_coll(ck, _VS_CKPT_MAX, v, all, 4, VS_I64, 0);
    if (r) return r;
    *who = all[2] ? ck->size - (int)all[2] : -1;
    if (flag) *flag = all[3];
    return all[0] ? (vs_result)(-all[1]) : VS_OK;
}

_VS_CKPT_PRIVATE vs_result _vs_ckpt_agree(vs_ckpt* ck, vs_result mine, int* who)
{
    return _vs_ckpt_agree_flag(ck, mine, NULL, who);
}

/* After _vs_ckpt_agree found rank `who` failing: every rank's error says what
   that rank saw (its message, broadcast), so the entry or file it names is in
   each rank's error; the failing rank keeps its own message. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_why(vs_ckpt* ck, vs_result mine, vs_result ra, int who, const char* fn,
                                        const char* what)
{
    char own[512] = "", why[512] = "";
    if (mine) _vs_ckpt_fmt(own, sizeof own, "%s", vs_last_error());
    if (who < 0 || who >= ck->size) // (the agreement itself failed)
        return mine ? vs_set_error(mine, "%s", own) : vs_set_error(ra, "%s: %s", fn, vs_last_error());
    if (ck->rank == who) _vs_ckpt_fmt(why, sizeof why, "%s", own);
    vs_result rb = _vs_ckpt_coll(ck, _VS_CKPT_BCAST, NULL, why, sizeof why, VS_U8, who);
    if (mine) return vs_set_error(mine, "%s", own);
    if (rb) return vs_set_error(ra, "%s: rank %d %s (its error says why)", fn, who, what);
    return vs_set_error(ra, "%s: rank %d %s: %s", fn, who, what, why);
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

/* Opens a checkpoint file for reading. A FIFO, device or directory in its place
   is an error, never a blocking open: O_NONBLOCK until fstat shows a regular
   file. (Symbolic links are followed: reading through one cannot harm.) */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_open_file(const char* path, int* fd, struct stat* st)
{
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0) return vs_set_error(VS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    int bad = fstat(*fd, st) != 0;
    int e = errno;
    if (bad || !S_ISREG(st->st_mode)) {
        close(*fd);
        *fd = -1;
        return bad ? vs_set_error(VS_ERR_IO, "cannot stat %s: %s", path, strerror(e))
                   : vs_set_error(VS_ERR_IO, "%s is not a regular file (a FIFO, device or directory): refused", path);
    }
    int fl = fcntl(*fd, F_GETFL);
    if (fl >= 0) fcntl(*fd, F_SETFL, fl & ~O_NONBLOCK);
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

_VS_CKPT_PRIVATE vs_result _vs_ckpt_copy_mem(void* dst, const void* src, size_t n, int to_device, int from_device);

/* Writes this rank's shard file: its pieces, one CRC per block of each. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_write_shard(vs_ckpt* ck, const char* dir, const vs_ckpt_entry* entries,
                                                _vs_ckpt_rec** mine, int nm, uint32_t** crcs, int* ncrc)
{
    char file[4096], key[VS_CKPT_NAME_MAX + 16], meta[64];
    _vs_ckpt_fmt(file, sizeof file, "%s/shard-%05d.safetensors", dir, ck->rank);
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
        _vs_ckpt_fmt(k, sizeof key, "%s#%d", rc->name, rc->key);
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
    _vs_ckpt_fmt(meta, sizeof meta, "{\"format\": \"vescale\", \"rank\": \"%d\"}", ck->rank);
    char* hdr = NULL;
    size_t hl = 0;
    vs_result r = _vs_st_header(ck->w, ts, nm, meta, &hdr, &hl);
    int fd = -1;
    if (!r && (fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
        r = vs_set_error(VS_ERR_IO, "cannot create %s: %s", file, strerror(errno));
    if (!r) r = _vs_ckpt_pwrite(fd, file, hdr, hl, 0);
    char* stage = NULL; // a sync save's device piece in host memory: one at a time, never the whole shard
    size_t staged = 0;
    for (int i = 0; i < nm && !r; i++) {
        _vs_ckpt_rec* rc = mine[i];
        const char* src = (const char*)_vs_ckpt_src(&entries[rc->entry]);
        if (entries[rc->entry].device && rc->bytes) {
            if (rc->bytes > staged) {
                vs_free(ck->w, stage);
                staged = (stage = (char*)vs_alloc(ck->w, rc->bytes)) ? rc->bytes : 0;
            }
            r = stage ? _vs_ckpt_copy_mem(stage, src, rc->bytes, 0, 1)
                      : vs_set_error(VS_ERR_NOMEM, "checkpoint: %llu bytes for \"%s\"", (unsigned long long)rc->bytes,
                                     rc->name);
            if (r) break;
            src = stage;
        }
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
    vs_free(ck->w, stage);
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
    _vs_ckpt_fmt(out, cap, "%016llx", (unsigned long long)h);
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
        _vs_ckpt_fmt(ix.mesh_dims[d], sizeof ix.mesh_dims[d], "%s", vs_mesh_dim_name(ck->mesh, d));
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
        _vs_ckpt_fmt(ix.files[f], sizeof fname, "shard-%05d.safetensors", f);
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
        _vs_ckpt_fmt(p->key, VS_CKPT_NAME_MAX + 16, "%s#%d", rc[i].name, rc[i].key);
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
        _vs_ckpt_fmt(file, sizeof file, "%s/" _VS_CKPT_INDEX, dir);
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

/* Rank 0, before a save writes anything: the stale leftovers of path's folder
   go, and an existing path (a link counts) without overwrite is VS_ERR_STATE. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_exists(vs_ckpt* ck, const char* path, int overwrite)
{
    char parent[4096];
    _vs_ckpt_parent(path, parent, sizeof parent);
    int root = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root >= 0) _vs_ckpt_sweep(ck->w, root, parent), close(root);
    return _vs_ckpt_taken(path, overwrite);
}

/* A save runs in three phases, so that all of its communication happens on the
   thread that calls vs_ckpt_save / vs_ckpt_wait (NCCL forbids two host threads
   issuing operations on one GPU at once: an async save's writer thread must not
   run collectives beside the trainer's):
     _vs_ckpt_begin   collective: the entries checked and agreed on, every
                      rank's records, the plan, the temporary directory;
     _vs_ckpt_write   this rank's shard file: files alone, no communication and
                      no CUDA (an async save's writer thread runs it);
     _vs_ckpt_finish  collective: every rank's write agreed on, the index, the
                      commit, retention. */
typedef struct _vs_ckpt_saving {
    vs_ckpt* ck;
    char path[4096];
    int overwrite;
    const vs_ckpt_entry* entries; // what is written: the caller's, or host copies of them
    _vs_ckpt_rec* mine;           // this rank's records, with their plan (writer, key)
    int nm;
    char* asg; // this rank's part of the plan as rank 0 sends it: the nonce, then a key a record (-1: not written)
    // rank 0 alone (the others hold only their own records): every rank's records, planned
    _vs_ckpt_rec* all;
    int na;
    int *first, *pos;         // rank k's record j is all[pos[first[k] + j]]
    size_t *counts, *displs;  // a transfer's slots a rank
    uint64_t* sizes;          // the bytes each rank sends
    char tmp[4096], nonce[32];
    int made_tmp, held;
    // the write (_vs_ckpt_write): the records this rank writes, their CRCs, the file's size
    _vs_ckpt_rec** wr;
    uint32_t** crcs;
    int* ncrc;
    int nw;
    uint64_t fbytes;
    vs_result wrote;
    char why[512]; // the write's error message (the writer thread's)
} _vs_ckpt_saving;

_VS_CKPT_PRIVATE void _vs_ckpt_saving_free(_vs_ckpt_saving* s)
{
    if (!s) return;
    vs_ckpt* ck = s->ck;
    if (s->made_tmp) _vs_ckpt_path_op(ck->w, s->tmp, 0); // a failed save leaves nothing behind
    if (s->held >= 0) close(s->held);
    for (int i = 0; s->crcs && i < s->nw; i++) vs_free(ck->w, s->crcs[i]);
    vs_free(ck->w, s->crcs);
    vs_free(ck->w, s->ncrc);
    vs_free(ck->w, s->wr);
    vs_free(ck->w, s->mine);
    vs_free(ck->w, s->asg);
    vs_free(ck->w, s->all);
    vs_free(ck->w, s->first);
    vs_free(ck->w, s->pos);
    vs_free(ck->w, s->counts);
    vs_free(ck->w, s->displs);
    vs_free(ck->w, s->sizes);
    vs_free(ck->w, s);
}

/* A save of entries[n] into path: this rank's entries checked (no
   communication), or an error. *out is NULL only when out of memory. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_saving_new(vs_ckpt* ck, const char* path, int overwrite, const vs_ckpt_entry* entries,
                                               int n, _vs_ckpt_saving** out)
{
    const char* fn = "vs_ckpt_save";
    _vs_ckpt_saving* s = (_vs_ckpt_saving*)vs_alloc(ck->w, sizeof *s);
    *out = s;
    if (!s) return vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    memset(s, 0, sizeof *s);
    s->ck = ck;
    s->overwrite = overwrite;
    s->entries = entries;
    s->held = -1;
    if (strlen(path) > 3000) return vs_set_error(VS_ERR_INVALID, "%s: path is longer than 3000 bytes", fn);
    _vs_ckpt_fmt(s->path, sizeof s->path, "%s", path);
    const size_t m = (size_t)(n > 0 ? n : 1), P = (size_t)ck->size;
    s->mine = (_vs_ckpt_rec*)vs_alloc(ck->w, sizeof(_vs_ckpt_rec) * m);
    s->asg = (char*)vs_alloc(ck->w, 32 + sizeof(int32_t) * m);
    if (ck->rank == 0) { // (here, where a failure is agreed on before any transfer)
        s->counts = (size_t*)vs_alloc(ck->w, sizeof(size_t) * P);
        s->displs = (size_t*)vs_alloc(ck->w, sizeof(size_t) * P);
        s->sizes = (uint64_t*)vs_alloc(ck->w, sizeof(uint64_t) * P);
        s->first = (int*)vs_alloc(ck->w, sizeof(int) * (P + 1));
    }
    if (!s->mine || !s->asg || (ck->rank == 0 && (!s->counts || !s->displs || !s->sizes || !s->first)))
        return vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    vs_result r = VS_OK;
    for (int i = 0; i < n && !r; i++) {
        if (entries[i].skip) continue;
        _vs_ckpt_rec* rc = &s->mine[s->nm];
        r = _vs_ckpt_entry_rec(fn, &entries[i], i, ck->rank, rc);
        rc->seq = s->nm;
        for (int j = 0; j < s->nm && !r; j++)
            if (!strcmp(s->mine[j].name, rc->name))
                r = vs_set_error(VS_ERR_INVALID, "%s: entry \"%s\" is given twice (entries %d and %d)", fn, rc->name,
                                 s->mine[j].entry, i);
        s->nm++;
    }
    return r;
}

/* Rank 0 gets every rank's `bytes` of mine, packed in rank order into *all (its
   slots in counts/displs, the sizes in sizes: rank 0's arrays of a slot a rank;
   the other ranks' *all stays NULL). The sizes go first, then an agreement (one
   all-reduce: nobody sends to a rank 0 that cannot hold it, and a rank that
   failed so far, r, ends the call on every rank with its origin named), then
   the bytes. A save's, and a load's requests. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_gather0(vs_ckpt* ck, size_t* counts, size_t* displs, uint64_t* sizes, vs_result r,
                                            const void* mine, size_t bytes, void** all, size_t* total, const char* fn,
                                            const char* what)
{
    char keep[512] = "";
    if (r) _vs_ckpt_fmt(keep, sizeof keep, "%s", vs_last_error());
    uint64_t b64 = r ? 0 : bytes;
    *all = NULL, *total = 0;
    vs_result rx = _vs_ckpt_xfer(ck, 1, &b64, sizeof b64, sizes, NULL, NULL);
    if (r) vs_set_error(r, "%s", keep);
    else r = rx;
    for (int k = 0; ck->rank == 0 && !r && k < ck->size; k++) {
        counts[k] = (size_t)sizes[k];
        displs[k] = *total;
        *total += counts[k];
    }
    if (ck->rank == 0 && !r && !(*all = vs_alloc(ck->w, *total ? *total : 1)))
        r = vs_set_error(VS_ERR_NOMEM, "%s: %zu bytes of metadata: out of memory", fn, *total);
    int who = -1;
    vs_result ra = _vs_ckpt_agree(ck, r, &who);
    if (ra) return _vs_ckpt_why(ck, r, ra, who, fn, what);
    return _vs_ckpt_xfer(ck, 1, (void*)mine, bytes, *all, counts, displs);
}

/* Rank 0: the plan of every rank's records; each rank's part of it in *down (the
   nonce, then a key a record, -1 where another rank writes the piece), its
   slots in s->counts/displs; the temporary directory. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_assign(vs_ckpt* ck, _vs_ckpt_saving* s, const char* fn, char** down)
{
    const int P = ck->size;
    for (int k = 0; k < P; k++) s->first[k] = (int)(s->displs[k] / sizeof(_vs_ckpt_rec));
    s->first[P] = s->na;
    vs_result r = _vs_ckpt_plan(fn, s->all, s->na);
    if (r) return r;
    s->pos = (int*)vs_alloc(ck->w, sizeof(int) * (size_t)(s->na ? s->na : 1));
    *down = (char*)vs_alloc(ck->w, 32 * (size_t)P + sizeof(int32_t) * (size_t)s->na);
    if (!s->pos || !*down) return vs_set_error(VS_ERR_NOMEM, "%s: out of memory for the plan", fn);
    _vs_ckpt_nonce(ck, s->nonce, sizeof s->nonce);
    for (int k = 0, at = 0; k < P; k++) {
        s->counts[k] = 32 + sizeof(int32_t) * (size_t)(s->first[k + 1] - s->first[k]);
        s->displs[k] = (size_t)at;
        at += (int)s->counts[k];
        memcpy(*down + s->displs[k], s->nonce, 32);
    }
    for (int i = 0; i < s->na; i++) {
        const _vs_ckpt_rec* rc = &s->all[i];
        if (rc->rank < 0 || rc->rank >= P || rc->seq < 0 || rc->seq >= s->first[rc->rank + 1] - s->first[rc->rank])
            return vs_set_error(VS_ERR_MISMATCH, "%s: record %d: rank %d, index %d", fn, i, rc->rank, rc->seq);
        s->pos[s->first[rc->rank] + rc->seq] = i;
        int32_t key = rc->writer ? rc->key : -1;
        memcpy(*down + s->displs[rc->rank] + 32 + sizeof key * (size_t)rc->seq, &key, sizeof key);
    }
    r = _vs_ckpt_exists(ck, s->path, s->overwrite);
    _vs_ckpt_fmt(s->tmp, sizeof s->tmp, "%s" _VS_CKPT_TMP "%s", s->path, s->nonce);
    if (!r && mkdir(s->tmp, 0755)) r = vs_set_error(VS_ERR_IO, "%s: cannot create %s: %s", fn, s->tmp, strerror(errno));
    s->made_tmp = !r;
    if (s->made_tmp) s->held = _vs_ckpt_hold(s->tmp); // (live: no other save's sweep takes it for debris)
    return r;
}

/* Collective. mine: this rank's result so far (every rank fails with the first
   failing rank's); sync: in, 1 where this rank saves synchronously; out, 1 where
   any rank does (then all do). Rank 0 alone gathers the records and plans; each
   rank gets back its own part (linear in the world in all: a rank's memory and
   time are its records' and O(1) collectives, rank 0's every rank's). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_begin(vs_ckpt* ck, _vs_ckpt_saving* s, vs_result mine, int64_t* sync)
{
    const char* fn = "vs_ckpt_save";
    int who = -1;
    vs_result ra = _vs_ckpt_agree_flag(ck, mine, sync, &who);
    if (ra) return _vs_ckpt_why(ck, mine, ra, who, fn, "could not start the save");
    size_t total = 0;
    vs_result r = _vs_ckpt_gather0(ck, s->counts, s->displs, s->sizes, VS_OK, s->mine,
                                   sizeof(_vs_ckpt_rec) * (size_t)s->nm, (void**)&s->all, &total, fn,
                                   "could not start the save");
    s->na = (int)(total / sizeof(_vs_ckpt_rec));
    char* down = NULL;
    if (!r && ck->rank == 0) r = _vs_ckpt_assign(ck, s, fn, &down);
    ra = _vs_ckpt_agree(ck, r, &who);
    if (!ra) r = _vs_ckpt_xfer(ck, 0, s->asg, 32 + sizeof(int32_t) * (size_t)s->nm, down, s->counts, s->displs);
    vs_free(ck->w, down);
    if (ra) return _vs_ckpt_why(ck, r, ra, who, fn, "could not plan the save");
    memcpy(s->nonce, s->asg, sizeof s->nonce);
    s->nonce[sizeof s->nonce - 1] = 0;
    _vs_ckpt_fmt(s->tmp, sizeof s->tmp, "%s" _VS_CKPT_TMP "%s", s->path, s->nonce);
    for (int j = 0; j < s->nm; j++) {
        int32_t key;
        memcpy(&key, s->asg + 32 + sizeof key * (size_t)j, sizeof key);
        s->mine[j].writer = key >= 0;
        s->mine[j].key = key >= 0 ? key : 0;
    }
    ra = _vs_ckpt_agree(ck, r, &who);
    return ra ? _vs_ckpt_why(ck, r, ra, who, fn, "could not start the save") : VS_OK;
}

static int _vs_ckpt_recp_cmp(const void* x, const void* y)
{
    return _vs_ckpt_rec_cmp(*(const _vs_ckpt_rec* const*)x, *(const _vs_ckpt_rec* const*)y);
}

/* This rank's shard (no communication: an async save's writer thread runs it). */
_VS_CKPT_PRIVATE void _vs_ckpt_write(vs_ckpt* ck, _vs_ckpt_saving* s)
{
    const size_t nm = (size_t)(s->nm ? s->nm : 1);
    s->wr = (_vs_ckpt_rec**)vs_alloc(ck->w, sizeof(void*) * nm);
    s->crcs = (uint32_t**)vs_alloc(ck->w, sizeof(uint32_t*) * nm);
    s->ncrc = (int*)vs_alloc(ck->w, sizeof(int) * nm);
    vs_result r = VS_OK;
    if (!s->wr || !s->crcs || !s->ncrc) r = vs_set_error(VS_ERR_NOMEM, "vs_ckpt_save: out of memory");
    else {
        memset(s->crcs, 0, sizeof(uint32_t*) * nm);
        memset(s->ncrc, 0, sizeof(int) * nm);
        for (int i = 0; i < s->nm; i++)
            if (s->mine[i].writer) s->wr[s->nw++] = &s->mine[i];
        qsort(s->wr, (size_t)s->nw, sizeof *s->wr, _vs_ckpt_recp_cmp); // (the shard's pieces in the plan's order)
    }
    if (!r && s->nw) r = _vs_ckpt_write_shard(ck, s->tmp, s->entries, s->wr, s->nw, s->crcs, s->ncrc);
    for (int i = 0; i < s->nw; i++)
        if (s->wr[i]->data_end > s->fbytes) s->fbytes = s->wr[i]->data_end;
    s->wrote = r;
    if (r) _vs_ckpt_fmt(s->why, sizeof s->why, "%s", vs_last_error());
}

/* Collective: every rank wrote its shard; rank 0 learns where every piece went
   (each rank's offsets and CRCs, to rank 0 alone), writes the index and commits. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_finish(vs_ckpt* ck, _vs_ckpt_saving* s)
{
    const char* fn = "vs_ckpt_save";
    _vs_ckpt_rec* all = s->all;
    const int na = s->na, nw = s->nw;
    _vs_ckpt_rec** wr = s->wr;
    int who = -1;
    vs_result r = s->wrote ? vs_set_error(s->wrote, "%s", s->why) : VS_OK; // (the message on this thread)
    vs_result ra = _vs_ckpt_agree(ck, r, &who);
    if (ra) r = _vs_ckpt_why(ck, r, ra, who, fn, "could not write its shard");
    if (r) return r;
    size_t mb = sizeof(uint64_t) * 2;
    for (int i = 0; i < nw; i++) mb += sizeof(uint64_t) * 4 + sizeof(uint32_t) * (size_t)s->ncrc[i];
    char* msg = (char*)vs_alloc(ck->w, mb);
    char* got = NULL;
    size_t t2 = 0;
    if (!msg) r = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    if (!r) {
        uint64_t* h = (uint64_t*)msg;
        h[0] = s->fbytes;
        h[1] = (uint64_t)nw;
        char* at = msg + sizeof(uint64_t) * 2;
        for (int i = 0; i < nw; i++) {
            uint64_t v[4] = {(uint64_t)wr[i]->seq, wr[i]->data_begin, wr[i]->data_end, (uint64_t)s->ncrc[i]};
            memcpy(at, v, sizeof v);
            at += sizeof v;
            if (s->ncrc[i]) memcpy(at, s->crcs[i], sizeof(uint32_t) * (size_t)s->ncrc[i]);
            at += sizeof(uint32_t) * (size_t)s->ncrc[i];
        }
    }
    r = _vs_ckpt_gather0(ck, s->counts, s->displs, s->sizes, r, msg, mb, (void**)&got, &t2, fn,
                         "could not send its shard's offsets");
    vs_result r0 = VS_OK;
    if (!r && ck->rank == 0) {
        uint64_t* fb = (uint64_t*)vs_alloc(ck->w, sizeof(uint64_t) * (size_t)ck->size);
        uint32_t** ac = (uint32_t**)vs_alloc(ck->w, sizeof(uint32_t*) * (size_t)(na ? na : 1));
        int* an = (int*)vs_alloc(ck->w, sizeof(int) * (size_t)(na ? na : 1));
        if (!fb || !ac || !an) r0 = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
        if (an) memset(an, 0, sizeof(int) * (size_t)(na ? na : 1));
        if (ac) memset(ac, 0, sizeof(uint32_t*) * (size_t)(na ? na : 1));
        for (int k = 0; !r0 && k < ck->size; k++) {
            const char* at = got + s->displs[k];
            uint64_t h[2]; // (a rank's message starts wherever the last one's CRC list ended: unaligned)
            memcpy(h, at, sizeof h);
            fb[k] = h[0];
            int cnt = (int)h[1];
            const uint64_t nrec = (uint64_t)(s->first[k + 1] - s->first[k]);
            at += sizeof(uint64_t) * 2;
            for (int i = 0; !r0 && i < cnt; i++) {
                uint64_t v[4];
                memcpy(v, at, sizeof v);
                at += sizeof v;
                if (v[0] >= nrec) {
                    r0 = vs_set_error(VS_ERR_MISMATCH, "%s: rank %d wrote record %llu of %llu", fn, k,
                                      (unsigned long long)v[0], (unsigned long long)nrec);
                    break;
                }
                const int x = s->pos[s->first[k] + (int)v[0]];
                _vs_ckpt_rec* rc = &all[x];
                rc->data_begin = v[1];
                rc->data_end = v[2];
                an[x] = (int)v[3];
                ac[x] = (uint32_t*)(uintptr_t)at; // (unaligned reads avoided below)
                at += sizeof(uint32_t) * v[3];
            }
        }
        if (r0 && ac) memset(ac, 0, sizeof(uint32_t*) * (size_t)(na ? na : 1)); // (pointers into got: not ours)
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
        if (!r0) r0 = _vs_ckpt_write_index(ck, s->tmp, all, na, fb, ac, an);
        if (!r0) r0 = _vs_ckpt_commit(ck->w, s->tmp, s->path, s->nonce, s->overwrite);
        if (!r0) s->made_tmp = 0;
        for (int i = 0; ac && i < na; i++) vs_free(ck->w, ac[i]);
        vs_free(ck->w, fb);
        vs_free(ck->w, ac);
        vs_free(ck->w, an);
    }
    ra = _vs_ckpt_agree(ck, r ? r : r0, &who);
    if (ra) r = _vs_ckpt_why(ck, r ? r : r0, ra, who, fn, "could not commit the checkpoint");
    vs_free(ck->w, msg);
    vs_free(ck->w, got);
    if (s->made_tmp && r) _vs_ckpt_path_op(ck->w, s->tmp, 0), s->made_tmp = 0;
    if (s->held >= 0) close(s->held), s->held = -1;
    if (!r && ck->rank == 0 && ck->desc.keep_last > 0) {
        char parent[4096];
        _vs_ckpt_parent(s->path, parent, sizeof parent);
        r = _vs_ckpt_retain_w(ck->w, parent, ck->desc.keep_last);
    }
    return r;
}

_VS_CKPT_PRIVATE vs_result _vs_ckpt_copy_mem(void* dst, const void* src, size_t n, int to_device, int from_device)
{
    if (!n) return VS_OK;
#ifdef _VS_CKPT_CUDA
    if (to_device || from_device) {
        cudaError_t e = cudaMemcpy(dst, src, n, cudaMemcpyDefault); // (unified addressing, as the other parts)
        /* From pageable memory cudaMemcpy returns once the bytes are staged, the
           DMA to the device maybe still on its way: wait for it, so the next
           kernel on any stream (the trainer's are non-blocking) reads them. */
        if (e == cudaSuccess && to_device) e = cudaStreamSynchronize(0);
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

/* What a rank needs of a tensor entry (its record rc), or of a blob of `bytes`
   (all of it). */
_VS_CKPT_PRIVATE void _vs_ckpt_need_of(const _vs_ckpt_rec* rc, uint64_t blob_bytes, _vs_ckpt_need* nd)
{
    memset(nd, 0, sizeof *nd);
    if (!rc) {
        nd->ndim = 1;
        nd->box[0] = nd->re = (int64_t)blob_bytes;
        return;
    }
    nd->ndim = rc->ndim;
    for (int d = 0; d < rc->ndim; d++) nd->off[d] = rc->off[d], nd->box[d] = rc->box[d];
    nd->rb = rc->rb, nd->re = rc->re;
}

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

typedef struct _vs_ckpt_rspan { // the byte span of a piece the runs read
    int64_t lo, hi;
} _vs_ckpt_rspan;

static void _vs_ckpt_span_fn(void* ctx, int64_t dst, int64_t src, int64_t n)
{
    _vs_ckpt_rspan* s = (_vs_ckpt_rspan*)ctx;
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

/* A shard's safetensors header, parsed when the file is opened: its tensors
   sorted by offset, and where its data section starts. */
typedef struct _vs_ckpt_hdr {
    _vs_st_tensor* t;
    int n;
    char* arena;
    uint64_t data0;
} _vs_ckpt_hdr;

typedef struct _vs_ckpt_files {
    const char* dir;
    const _vs_ckpt_index* ix;
    int* fd;
    const vs_world* w;
    _vs_ckpt_hdr* hdr;        // per file
    struct _vs_ckpt_ra* ra;   // the read-ahead helper, or NULL
} _vs_ckpt_files;

/* Opens file i (once): its size must be the index's and its safetensors header
   must parse (a corrupt header is an error even though the data offsets come
   from the index: the file is damaged, and other tools read that header). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_fd(_vs_ckpt_files* f, int i, int* fd)
{
    if (f->fd[i] < 0) {
        char p[4096];
        _vs_ckpt_fmt(p, sizeof p, "%s/%s", f->dir, f->ix->files[i]);
        int h;
        struct stat st;
        _VS_TRY(_vs_ckpt_open_file(p, &h, &st));
        uint64_t size = f->ix->file_bytes[i];
        unsigned char len8[8];
        char* json = NULL;
        uint64_t hl = 0;
        vs_result r = VS_OK;
        if ((uint64_t)st.st_size != size)
            r = vs_set_error(VS_ERR_IO, "%s has %lld bytes, the index says %llu (truncated or replaced)", p,
                             (long long)st.st_size, (unsigned long long)size);
        if (!r) r = _vs_ckpt_pread(h, p, len8, 8, 0);
        for (int k = 7; !r && k >= 0; k--) hl = hl << 8 | len8[k];
        if (!r && (hl > size - 8 || hl > ((uint64_t)100 << 20)))
            r = vs_set_error(VS_ERR_IO, "%s: corrupt safetensors header: its length %llu does not fit the file's %llu bytes",
                             p, (unsigned long long)hl, (unsigned long long)size);
        if (!r && !(json = (char*)vs_alloc(f->w, (size_t)hl + 1))) r = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", p);
        if (!r) r = _vs_ckpt_pread(h, p, json, (size_t)hl, 8);
        _vs_ckpt_hdr* H = &f->hdr[i];
        if (!r && (r = _vs_st_parse(f->w, p, json, (size_t)hl, size, &H->t, &H->n, &H->arena)) != VS_OK)
            r = vs_set_error(VS_ERR_IO, "corrupt safetensors header: %s", vs_last_error());
        H->data0 = 8 + hl;
        vs_free(f->w, json);
        if (r) {
            close(h);
            return r;
        }
        f->fd[i] = h;
    }
    *fd = f->fd[i];
    return VS_OK;
}

/* The shard's header holds piece p where the index says (key, bytes, dtype). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_hdr_check(_vs_ckpt_files* f, const _vs_ckpt_ientry* e, const _vs_ckpt_piece* p)
{
    const _vs_ckpt_hdr* H = &f->hdr[p->file];
    int lo = 0, hi = H->n - 1, at = -1;
    while (lo <= hi && at < 0) { // sorted by offset
        int mid = lo + (hi - lo) / 2;
        uint64_t b = H->data0 + H->t[mid].begin;
        if (b == p->data_begin) at = mid;
        else if (b < p->data_begin) lo = mid + 1;
        else hi = mid - 1;
    }
    const _vs_st_tensor* t = at >= 0 ? &H->t[at] : NULL;
    if (!t || strcmp(t->key, p->key) || H->data0 + t->end != p->data_end ||
        t->dtype != (e->kind == VS_CKPT_BLOB ? VS_U8 : e->dtype))
        return vs_set_error(VS_ERR_IO,
                            "%s/%s: corrupt safetensors header: it does not hold piece %s (entry \"%s\") at bytes "
                            "%llu..%llu as the index says",
                            f->dir, f->ix->files[p->file], p->key, e->name, (unsigned long long)p->data_begin,
                            (unsigned long long)p->data_end);
    return VS_OK;
}

/* Linux's MAP_POPULATE, which strict feature macros (-D_POSIX_C_SOURCE alone, as
   this project builds) hide: its value on the architectures that use the
   generic one; elsewhere none (the pages then come in by faults). */
#if defined(MAP_POPULATE)
#define _VS_CKPT_MAP_POPULATE MAP_POPULATE
#elif defined(__linux__) && (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) || defined(__arm__) || \
                             defined(__riscv) || defined(__powerpc__) || defined(__s390__))
#define _VS_CKPT_MAP_POPULATE 0x8000
#else
#define _VS_CKPT_MAP_POPULATE 0
#endif

/* Bytes [lo, hi) of a piece (whole checksum blocks, as _vs_ckpt_piece_span gives them). They
   are mapped from the file (one copy in all: the page cache's into the caller's
   buffer), or, where mmap fails, read into memory from the hooks. Verified here
   (verify = 1), or block by block as they are copied (_vs_ckpt_vcopy_fn: each
   block is checksummed right before its bytes are copied, while they are in the
   CPU's cache, so the data crosses memory once). Free with _vs_ckpt_unmap. */
typedef struct _vs_ckpt_view {
    const char* data; // byte lo of the piece
    void* map;        // the mapping (page-aligned), or NULL
    size_t map_len;
    char* heap;       // the fallback buffer, or NULL
    uint64_t lo, hi;  // the piece's bytes held: [lo, hi)
} _vs_ckpt_view;

_VS_CKPT_PRIVATE void _vs_ckpt_unmap(vs_ckpt* ck, _vs_ckpt_view* v)
{
    if (v->map) munmap(v->map, v->map_len);
    vs_free(ck->w, v->heap);
    memset(v, 0, sizeof *v);
}

/* Block b (a byte offset of the piece, a multiple of the block size) of a view,
   checked against the index's CRC32C. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_verify_block(const _vs_ckpt_files* f, const _vs_ckpt_ientry* e,
                                                 const _vs_ckpt_piece* p, const _vs_ckpt_view* v, uint64_t b)
{
    const uint64_t B = f->ix->block;
    uint64_t n = v->hi - b < B ? v->hi - b : B, k = b / B;
    uint32_t c = _vs_crc32c(0, v->data + (b - v->lo), (size_t)n);
    if ((int)k >= p->ncrc || c != p->crc[k])
        return vs_set_error(VS_ERR_IO, "checksum mismatch in %s/%s, entry \"%s\", piece %s, block %llu (bytes %llu..%llu): the file is corrupt",
                            f->dir, f->ix->files[p->file], e->name, p->key, (unsigned long long)k,
                            (unsigned long long)(p->data_begin + b), (unsigned long long)(p->data_begin + b + n));
    return VS_OK;
}

_VS_CKPT_PRIVATE vs_result _vs_ckpt_read_piece(vs_ckpt* ck, _vs_ckpt_files* f, const _vs_ckpt_ientry* e,
                                               const _vs_ckpt_piece* p, uint64_t lo, uint64_t hi, _vs_ckpt_view* v,
                                               int verify)
{
    const uint64_t B = f->ix->block;
    memset(v, 0, sizeof *v);
    v->lo = lo, v->hi = hi;
    int fd;
    vs_result r = _vs_ckpt_fd(f, p->file, &fd);
    if (!r) r = _vs_ckpt_hdr_check(f, e, p);
    if (r) return vs_set_error(r, "%s (entry \"%s\", piece %s)", vs_last_error(), e->name, p->key);
    if (hi == lo) return VS_OK;
    uint64_t at = p->data_begin + lo, page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = at / page * page;
    size_t mlen = (size_t)(p->data_begin + hi - start);
    /* MAP_POPULATE (Linux): the kernel reads the range in and maps every page in
       one go, instead of a fault per 64 KiB as the checksums walk it (twice as
       fast on 4 ranks: bench/ckpt). */
    void* m = mmap(NULL, mlen, PROT_READ, MAP_SHARED | _VS_CKPT_MAP_POPULATE, fd, (off_t)start);
    if (m != MAP_FAILED) { // (the file's size was checked against the index when it was opened)
        if (!_VS_CKPT_MAP_POPULATE) { // (populated: the pages are in already)
            posix_madvise(m, mlen, POSIX_MADV_SEQUENTIAL);
            posix_madvise(m, mlen, POSIX_MADV_WILLNEED);
        }
        v->map = m;
        v->map_len = mlen;
        v->data = (const char*)m + (at - start);
    } else {
        if (!(v->heap = (char*)vs_alloc(ck->w, (size_t)(hi - lo))))
            return vs_set_error(VS_ERR_NOMEM, "loading \"%s\": %llu bytes", e->name, (unsigned long long)(hi - lo));
        r = _vs_ckpt_pread(fd, f->ix->files[p->file], v->heap, (size_t)(hi - lo), at);
        if (r) {
            _vs_ckpt_unmap(ck, v);
            return vs_set_error(r, "%s (entry \"%s\", piece %s)", vs_last_error(), e->name, p->key);
        }
        v->data = v->heap;
    }
    for (uint64_t b = lo; verify && B && b < hi; b += B)
        if ((r = _vs_ckpt_verify_block(f, e, p, v, b)) != VS_OK) {
            _vs_ckpt_unmap(ck, v);
            return r;
        }
    return VS_OK;
}

/* Copying runs out of a view not verified yet: before a run's bytes are copied,
   every block up to its end is verified (runs come in increasing order). The
   first mismatch is kept and stops the copies. */
typedef struct _vs_ckpt_vcopy {
    _vs_ckpt_copy cp;
    const _vs_ckpt_files* f;
    const _vs_ckpt_ientry* e;
    const _vs_ckpt_piece* p;
    const _vs_ckpt_view* v;
    uint64_t next; // the first block not verified (a byte offset of the piece)
    vs_result r;
} _vs_ckpt_vcopy;

_VS_CKPT_PRIVATE vs_result _vs_ckpt_verify_to(_vs_ckpt_vcopy* c, uint64_t end)
{
    const uint64_t B = c->f->ix->block;
    while (c->r == VS_OK && B && c->next < end && c->next < c->v->hi) {
        c->r = _vs_ckpt_verify_block(c->f, c->e, c->p, c->v, c->next);
        c->next += B;
    }
    return c->r;
}

/* A run is copied a block at a time, each right after its block is verified: a
   contiguous run (a whole shard on the same mesh) verified in full first would
   leave its start out of the cache by the time it is copied (16 MiB a rank went
   through memory twice: +30% load time in bench/ckpt). */
static void _vs_ckpt_vcopy_fn(void* ctx, int64_t dst, int64_t src, int64_t n)
{
    _vs_ckpt_vcopy* c = (_vs_ckpt_vcopy*)ctx;
    const int64_t es = (int64_t)c->cp.es, B = (int64_t)c->f->ix->block;
    while (n > 0) {
        int64_t k = n;
        if (B) { // the elements up to the end of the block that holds element src
            int64_t end = ((src * es) / B + 1) * B;
            int64_t lim = (end + es - 1) / es - src;
            if (lim < k) k = lim;
        }
        if (_vs_ckpt_verify_to(c, (uint64_t)(src + k) * (uint64_t)es) != VS_OK) return;
        _vs_ckpt_copy_fn(&c->cp, dst, src, k);
        dst += k, src += k, n -= k;
    }
}

/* What piece k of entry e holds, as _vs_ckpt_runs takes it: its box (a blob's
   piece is all of it, a 1-D box of its bytes) and the flat range of it stored. */
typedef struct _vs_ckpt_pgeom {
    int64_t blob_off[1], blob_box[1];
    const int64_t *off, *box;
    int64_t rb, re;
} _vs_ckpt_pgeom;

_VS_CKPT_PRIVATE void _vs_ckpt_piece_geom(const _vs_ckpt_ientry* e, int k, _vs_ckpt_pgeom* g)
{
    const _vs_ckpt_piece* p = &e->pieces[k];
    g->blob_off[0] = 0, g->blob_box[0] = (int64_t)e->blob_bytes;
    g->off = e->kind == VS_CKPT_BLOB ? g->blob_off : p->off;
    g->box = e->kind == VS_CKPT_BLOB ? g->blob_box : p->box;
    g->rb = 0, g->re = e->kind == VS_CKPT_BLOB ? g->blob_box[0] : _vs_ckpt_numel(e->ndim, g->box);
    if (e->kind == VS_CKPT_RANGE) g->rb = p->range_begin, g->re = p->range_end;
}

/* The bytes [*lo, *hi) of piece k of entry e that a rank needing nd reads,
   widened to whole checksum blocks; returns the elements it needs from the
   piece (0: none, nothing to read). */
_VS_CKPT_PRIVATE int64_t _vs_ckpt_piece_span(const _vs_ckpt_index* ix, const _vs_ckpt_ientry* e, int k,
                                             const _vs_ckpt_need* nd, size_t es, uint64_t* lo, uint64_t* hi)
{
    const _vs_ckpt_piece* p = &e->pieces[k];
    _vs_ckpt_pgeom g;
    _vs_ckpt_piece_geom(e, k, &g);
    _vs_ckpt_rspan sp = {-1, 0};
    int64_t cnt = _vs_ckpt_runs(nd, g.off, g.box, g.rb, g.re, _vs_ckpt_span_fn, &sp);
    if (!cnt) return 0;
    // (runs give elements counted from the piece's first stored one)
    uint64_t a = (uint64_t)sp.lo * es, b = (uint64_t)sp.hi * es, B = ix->block, len = p->data_end - p->data_begin;
    if (B) {
        a = a / B * B;
        b = (b + B - 1) / B * B;
        if (b > len) b = len;
    }
    *lo = a, *hi = b;
    return cnt;
}

/* Read-ahead. A rank's load alternates reading (mmap with MAP_POPULATE: the
   thread waits on the disk) and CPU work (checksums, copies), so with one
   thread a rank the disk idles while it computes. A helper thread walks the
   same byte ranges in the same order and brings them into the page cache
   (mapped with MAP_POPULATE, unmapped at once: the pages stay cached), at most
   _VS_CKPT_RA_LEAD bytes ahead of the loader; the loader's own mapping then
   finds them in memory. Best effort: the helper opens the files itself and
   stops at its first failure; the loader reads and checks everything as
   without it. Ranges shorter than _VS_CKPT_RA_SPAN_MIN are left to the loader:
   with 8 MiB ranges that two ranks read from the same files (the (2,2,2) -> (4)
   load) the helper's second mapping cost 0.2 s of CPU a GiB and made the load
   20% slower. bench/ckpt (bench/RESULTS.md): the same-mesh load with checksums
   went from 0.72-0.78 of the raw read to 0.90-0.91, the checksums' share of it
   from 0.18-0.20 to 0.05-0.07. */
#define _VS_CKPT_RA_LEAD ((uint64_t)64 << 20)   // bytes the helper may be ahead
#define _VS_CKPT_RA_WINDOW ((uint64_t)16 << 20) // bytes it maps at once
/* (the tests set these two to 1 to run the helper on their small files) */
#ifndef _VS_CKPT_RA_MIN
#define _VS_CKPT_RA_MIN ((uint64_t)16 << 20) // less for it to map in all: no helper
#endif
#ifndef _VS_CKPT_RA_SPAN_MIN
#define _VS_CKPT_RA_SPAN_MIN _VS_CKPT_RA_WINDOW // a shorter range is left to the loader
#endif

typedef struct _vs_ckpt_ra_span {
    int file;
    uint64_t lo, hi; // bytes of the file
} _vs_ckpt_ra_span;

typedef struct _vs_ckpt_ra {
    const char* dir;
    const _vs_ckpt_index* ix;
    vs_world* w;
    _vs_ckpt_ra_span* s;
    int n, cap;
    uint64_t touch; // bytes of the spans it maps (those of _VS_CKPT_RA_SPAN_MIN or more)
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t used; // (mu) bytes of the spans the loader has read
    int stop;      // (mu)
} _vs_ckpt_ra;

static void* _vs_ckpt_ra_main(void* arg)
{
    _vs_ckpt_ra* a = (_vs_ckpt_ra*)arg;
    int fd = -1, cur = -1;
    uint64_t size = 0, done = 0, page = (uint64_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < a->n; i++) {
        const _vs_ckpt_ra_span* sp = &a->s[i];
        if (sp->file != cur) {
            char file[4096];
            struct stat st;
            if (fd >= 0) close(fd);
            _vs_ckpt_fmt(file, sizeof file, "%s/%s", a->dir, a->ix->files[sp->file]);
            if (_vs_ckpt_open_file(file, &fd, &st)) break; // (the reader reports it)
            cur = sp->file, size = (uint64_t)st.st_size;
        }
        const int touch = sp->hi - sp->lo >= _VS_CKPT_RA_SPAN_MIN; // (a short span only counts toward the lead)
        for (uint64_t at = sp->lo; at < sp->hi;) {
            uint64_t end = sp->hi - at > _VS_CKPT_RA_WINDOW ? at + _VS_CKPT_RA_WINDOW : sp->hi;
            int stop;
            pthread_mutex_lock(&a->mu);
            while (!a->stop && done > a->used + _VS_CKPT_RA_LEAD) pthread_cond_wait(&a->cv, &a->mu);
            stop = a->stop;
            pthread_mutex_unlock(&a->mu);
            if (stop) goto out;
            uint64_t e2 = end < size ? end : size, start = at / page * page;
            if (touch && e2 > start) { // (never touched: a short file cannot fault)
                void* m = mmap(NULL, (size_t)(e2 - start), PROT_READ, MAP_SHARED | _VS_CKPT_MAP_POPULATE, fd, (off_t)start);
                if (m != MAP_FAILED) munmap(m, (size_t)(e2 - start));
            }
            done += end - at;
            at = end;
        }
    }
out:
    if (fd >= 0) close(fd);
    return NULL;
}

_VS_CKPT_PRIVATE void _vs_ckpt_ra_used(_vs_ckpt_ra* a, uint64_t bytes)
{
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    a->used += bytes;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

_VS_CKPT_PRIVATE int _vs_ckpt_ra_push(_vs_ckpt_ra* a, int file, uint64_t lo, uint64_t hi)
{
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 64;
        _vs_ckpt_ra_span* s = (_vs_ckpt_ra_span*)vs_alloc(a->w, sizeof *s * (size_t)cap);
        if (!s) return 0;
        if (a->n) memcpy(s, a->s, sizeof *s * (size_t)a->n);
        vs_free(a->w, a->s);
        a->s = s, a->cap = cap;
    }
    a->s[a->n].file = file, a->s[a->n].lo = lo, a->s[a->n].hi = hi;
    a->n++;
    if (hi - lo >= _VS_CKPT_RA_SPAN_MIN) a->touch += hi - lo;
    return 1;
}

/* What vs_ckpt_load will read, in its order, up to the first entry it would
   reject (that one fails the load there anyway); then the helper, if there is
   enough to read. 1: started (stop it with _vs_ckpt_ra_stop). */
_VS_CKPT_PRIVATE int _vs_ckpt_ra_start(vs_ckpt* ck, _vs_ckpt_ra* a, const char* dir, const _vs_ckpt_index* ix,
                                       const vs_ckpt_entry* entries, int n);
_VS_CKPT_PRIVATE void _vs_ckpt_ra_stop(_vs_ckpt_ra* a, int started)
{
    if (started) {
        pthread_mutex_lock(&a->mu);
        a->stop = 1;
        pthread_cond_signal(&a->cv);
        pthread_mutex_unlock(&a->mu);
        pthread_join(a->th, NULL);
        pthread_cond_destroy(&a->cv);
        pthread_mutex_destroy(&a->mu);
    }
    if (a->s) vs_free(a->w, a->s);
    a->s = NULL;
}

/* One entry: everything this rank needs, verified, into dst (host). stream = 0:
   every piece is read and verified before the first byte reaches dst, so an
   entry that fails leaves dst untouched (a staging buffer: blobs, device
   entries); stream = 1: each block is verified right before its bytes are
   copied, so dst only ever gets verified bytes, but a mismatch in a later block
   leaves it partly written (the caller's own host buffer: the data crosses
   memory once instead of twice). A wrong header or missing elements fail
   before any copy either way. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_load_entry(vs_ckpt* ck, _vs_ckpt_files* f, const _vs_ckpt_ientry* e,
                                               const _vs_ckpt_need* nd, char* dst, size_t es, int stream)
{
    int64_t need = nd->re - nd->rb, got = 0;
    int np = e->npieces;
    _vs_ckpt_view* views = (_vs_ckpt_view*)vs_alloc(ck->w, sizeof(_vs_ckpt_view) * (size_t)(np ? np : 1));
    vs_result r = views ? VS_OK : vs_set_error(VS_ERR_NOMEM, "loading \"%s\": out of memory", e->name);
    if (views) memset(views, 0, sizeof(_vs_ckpt_view) * (size_t)(np ? np : 1));
    for (int k = 0; k < np && !r; k++) { // read (and, not streaming, verify)
        uint64_t lo = 0, hi = 0;
        int64_t cnt = _vs_ckpt_piece_span(f->ix, e, k, nd, es, &lo, &hi);
        if (!cnt) continue;
        got += cnt;
        r = _vs_ckpt_read_piece(ck, f, e, &e->pieces[k], lo, hi, &views[k], !stream);
        _vs_ckpt_ra_used(f->ra, hi - lo);
    }
    if (!r && got != need)
        r = vs_set_error(VS_ERR_INVALID,
                         "%s/" _VS_CKPT_INDEX ": entry \"%s\": its pieces hold %lld of the %lld elements this rank "
                         "needs (a piece missing from the index)",
                         f->dir, e->name, (long long)got, (long long)need);
    for (int k = 0; k < np && !r; k++) { // into dst (streaming: each block verified first)
        if (!views[k].data) continue;
        _vs_ckpt_pgeom g;
        _vs_ckpt_piece_geom(e, k, &g);
        _vs_ckpt_copy cp = {dst, views[k].data, (int64_t)(views[k].lo / es), es};
        if (!stream) {
            _vs_ckpt_runs(nd, g.off, g.box, g.rb, g.re, _vs_ckpt_copy_fn, &cp);
            continue;
        }
        _vs_ckpt_vcopy vc = {cp, f, e, &e->pieces[k], &views[k], views[k].lo, VS_OK};
        _vs_ckpt_runs(nd, g.off, g.box, g.rb, g.re, _vs_ckpt_vcopy_fn, &vc);
        r = _vs_ckpt_verify_to(&vc, views[k].hi); // the blocks past the last run (all that was read)
    }
    for (int k = 0; views && k < np; k++) _vs_ckpt_unmap(ck, &views[k]);
    vs_free(ck->w, views);
    return r;
}

/* A requested tensor q has the dtype and global shape of the stored entry e. */
_VS_CKPT_PRIVATE int _vs_ckpt_same_shape(const _vs_ckpt_ientry* e, const vs_ckpt_entry* q)
{
    int same = e->dtype == q->t.dtype && e->ndim == q->t.ndim;
    for (int d = 0; same && d < e->ndim; d++) same = e->shape[d] == q->t.shape[d];
    return same;
}

_VS_CKPT_PRIVATE const _vs_ckpt_ientry* _vs_ckpt_find(const _vs_ckpt_index* ix, const char* name)
{
    for (int i = 0; i < ix->ne; i++)
        if (!strcmp(ix->e[i].name, name)) return &ix->e[i];
    return NULL;
}

/* index.json's text, read by one rank: *text (from the hooks, *len bytes). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_index_text(vs_ckpt* ck, const char* file, char** text, int64_t* len)
{
    int fd;
    struct stat st;
    vs_result r = _vs_ckpt_open_file(file, &fd, &st);
    *text = NULL, *len = -1;
    if (r) {
        char why[600];
        _vs_ckpt_fmt(why, sizeof why, "%s", vs_last_error());
        return vs_set_error(r, "%s (not a complete checkpoint?)", why);
    }
    if (st.st_size > ((int64_t)1 << 31)) r = vs_set_error(VS_ERR_IO, "%s: cannot stat, or larger than 2 GiB", file);
    else if (!(*text = (char*)vs_alloc(ck->w, (size_t)st.st_size + 1)))
        r = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", file);
    else if ((r = _vs_ckpt_pread(fd, file, *text, (size_t)st.st_size, 0)) == VS_OK)
        *len = st.st_size;
    close(fd);
    if (r) vs_free(ck->w, *text), *text = NULL;
    return r;
}

/* index.json read and parsed by one rank into *ix (rank 0's part of a load,
   vs_train_load's look at it). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_index_read_one(vs_ckpt* ck, const char* file, _vs_ckpt_index* ix)
{
    char* text = NULL;
    int64_t len = -1;
    vs_result r = _vs_ckpt_index_text(ck, file, &text, &len);
    if (!r) r = _vs_ckpt_index_parse(ck->w, file, text, (size_t)len, ix);
    vs_free(ck->w, text);
    return r;
}

/* The whole index on every rank: rank 0 reads it, every rank gets its text and
   parses it (a rank's bytes linear in the world: vs_ckpt_load reads its part
   alone, _vs_ckpt_read_part, and vs_train_load rank 0 alone; the fuzz harness uses this). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_read_index(vs_ckpt* ck, const char* path, _vs_ckpt_index* ix)
{
    char file[4096];
    _vs_ckpt_fmt(file, sizeof file, "%s/" _VS_CKPT_INDEX, path);
    int64_t len = -1;
    char* text = NULL;
    vs_result r0 = ck->rank == 0 ? _vs_ckpt_index_text(ck, file, &text, &len) : VS_OK;
    vs_result r = _vs_ckpt_coll(ck, _VS_CKPT_BCAST, NULL, &len, 1, VS_I64, 0);
    if (r) {
        vs_free(ck->w, text);
        return r;
    }
    if (len < 0) return ck->rank == 0 ? r0 : vs_set_error(VS_ERR_IO, "cannot read %s (rank 0's error says why)", file);
    if (ck->rank != 0 && !(text = (char*)vs_alloc(ck->w, (size_t)len + 1))) r = VS_ERR_NOMEM;
    // (a rank out of memory still takes part in the broadcast, into a scratch byte)
    char one;
    vs_result rb = _vs_ckpt_coll(ck, _VS_CKPT_BCAST, NULL, text ? text : &one, text ? (size_t)len : 0, VS_U8, 0);
    if (r || rb) {
        vs_free(ck->w, text);
        return vs_set_error(r ? r : rb, "reading %s: %s", file, r ? "out of memory" : vs_last_error());
    }
    r = _vs_ckpt_index_parse(ck->w, file, text, (size_t)len, ix);
    vs_free(ck->w, text);
    return r;
}

/* The load's metadata, linear in the world in all (the save's shape in
   reverse): each rank sends rank 0 its requests (a name and what of the entry
   it needs); rank 0 alone reads and parses the whole index and sends each rank
   the part that meets them (those entries, the pieces it may read, the files
   they name) as index text, which the rank parses and loads from. A rank holds
   its own entries' metadata, rank 0 the whole index. */
enum { _VS_CKPT_REQ_META = 0, _VS_CKPT_REQ_BLOB, _VS_CKPT_REQ_PART };
typedef struct _vs_ckpt_req {
    char name[VS_CKPT_NAME_MAX];
    int32_t what; // _VS_CKPT_REQ_*: the entry's description alone; all of a blob; nd of a tensor
    _vs_ckpt_need nd;
} _vs_ckpt_req;

/* A request for entry name (1 if it fits, 0 if no entry can have the name). */
_VS_CKPT_PRIVATE int _vs_ckpt_req_set(_vs_ckpt_req* x, const char* name, int what, const _vs_ckpt_need* nd)
{
    memset(x, 0, sizeof *x); // (whole: the struct's padding travels too)
    size_t len = strlen(name);
    if (len >= VS_CKPT_NAME_MAX) return 0;
    memcpy(x->name, name, len + 1);
    x->what = what;
    if (nd) memcpy(&x->nd, nd, sizeof *nd);
    return 1;
}

/* This rank's requests for entries[n], up to the first one vs_ckpt_load
   refuses before reading (it stops there). Into rq[n]; returns their count. */
_VS_CKPT_PRIVATE int _vs_ckpt_requests(vs_ckpt* ck, const vs_ckpt_entry* entries, int n, _vs_ckpt_req* rq)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        const vs_ckpt_entry* q = &entries[i];
        if (q->skip) continue;
        if (!q->name || !q->name[0]) break;
        _vs_ckpt_need nd;
        int what = _VS_CKPT_REQ_BLOB;
        if (q->kind != VS_CKPT_BLOB) {
            _vs_ckpt_rec rc;
            if (_vs_ckpt_entry_rec("vs_ckpt_load", q, i, ck->rank, &rc) != VS_OK) break;
            _vs_ckpt_need_of(&rc, 0, &nd);
            what = _VS_CKPT_REQ_PART;
        }
        m += _vs_ckpt_req_set(&rq[m], q->name, what, what == _VS_CKPT_REQ_PART ? &nd : NULL);
    }
    vs_clear_error();
    return m;
}

/* The elements [rb, re) of a box, flattened row-major, lie in a slab of its
   dim 0: the box narrowed to it (a bound: the exact test walks every row). */
_VS_CKPT_PRIVATE void _vs_ckpt_slab(int ndim, const int64_t* off, const int64_t* box, int64_t rb, int64_t re,
                                    int64_t* lo, int64_t* hi)
{
    for (int d = 0; d < ndim; d++) lo[d] = off[d], hi[d] = off[d] + box[d];
    if (ndim < 1 || re <= rb) return;
    int64_t row = _vs_ckpt_numel(ndim - 1, box + 1);
    if (row <= 0) return;
    lo[0] = off[0] + rb / row, hi[0] = off[0] + (re - 1) / row + 1;
}

/* Piece k of e may hold elements request q needs (1): blobs always (read
   whole); a tensor's when their boxes' slabs meet, or, for one box, when their
   ranges do. A superset: the loader skips a piece it needs nothing of. */
_VS_CKPT_PRIVATE int _vs_ckpt_part_meets(const _vs_ckpt_ientry* e, int k, const _vs_ckpt_req* q)
{
    if (e->kind == VS_CKPT_BLOB) return 1;
    const _vs_ckpt_need* nd = &q->nd;
    if (q->what != _VS_CKPT_REQ_PART || nd->ndim != e->ndim || nd->re <= nd->rb) return 0;
    _vs_ckpt_pgeom g;
    _vs_ckpt_piece_geom(e, k, &g);
    if (g.re <= g.rb) return 0;
    int same = 1;
    for (int d = 0; d < e->ndim; d++) same &= g.off[d] == nd->off[d] && g.box[d] == nd->box[d];
    if (same) return g.rb < nd->re && nd->rb < g.re;
    int64_t a0[_VS_CKPT_MAXD], a1[_VS_CKPT_MAXD], b0[_VS_CKPT_MAXD], b1[_VS_CKPT_MAXD];
    _vs_ckpt_slab(e->ndim, nd->off, nd->box, nd->rb, nd->re, a0, a1);
    _vs_ckpt_slab(e->ndim, g.off, g.box, g.rb, g.re, b0, b1);
    for (int d = 0; d < e->ndim; d++)
        if (a0[d] >= b1[d] || b0[d] >= a1[d]) return 0;
    return 1;
}

/* Rank 0's view of the whole index while it writes the parts: entries by name,
   each one's pieces sorted along a dim, and marks (the rank's number + 1: never
   cleared) of what a part holds. */
typedef struct _vs_ckpt_parts {
    const _vs_ckpt_index* ix;
    const _vs_ckpt_ientry** order; // entries sorted by name (a name is an entry's first member)
    int *pbase, *pmark;            // entry i's pieces (their marks, their order) from pbase[i]
    _vs_ckpt_sortp* sorted;        // entry i's pieces by where their slabs start along dim sdim[i]
    int* sdim;
    int64_t* ext;                  // the longest slab along it
    int *emark, *epos, *src;       // an entry's mark, its number in the part; the part's entries
    int *fmark, *fmap, *fsrc;      // a file's mark, its number in the part; the part's files
    _vs_ckpt_sortp* sel;           // the part's pieces: (its entry, the piece)
    int nsel, capsel;
} _vs_ckpt_parts;

_VS_CKPT_PRIVATE void _vs_ckpt_parts_free(const vs_world* w, _vs_ckpt_parts* P)
{
    void* v[] = {(void*)P->order, P->pbase, P->pmark, P->sorted, P->sdim, P->ext, P->emark,
                 P->epos, P->src, P->fmark, P->fmap, P->fsrc, P->sel};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) vs_free(w, v[i]);
    memset(P, 0, sizeof *P);
}

/* Entry e's pieces sorted by where their slabs start along the dim they cover
   least of (the one they are cut along): a request finds those it may meet by
   a binary search, not a walk over all of them (rank 0 would walk n pieces for
   each of n ranks: quadratic). */
_VS_CKPT_PRIVATE void _vs_ckpt_parts_sort(const _vs_ckpt_ientry* e, _vs_ckpt_sortp* sp, int* sd, int64_t* ext)
{
    const int D = e->kind == VS_CKPT_BLOB ? 0 : e->ndim;
    int64_t lo[_VS_CKPT_MAXD], hi[_VS_CKPT_MAXD];
    double best = -1;
    *sd = 0, *ext = 0;
    for (int d = 0; d < D; d++) {
        double cover = 0;
        for (int k = 0; k < e->npieces; k++) {
            _vs_ckpt_pgeom g;
            _vs_ckpt_piece_geom(e, k, &g);
            _vs_ckpt_slab(D, g.off, g.box, g.rb, g.re, lo, hi);
            cover += e->shape[d] ? (double)(hi[d] - lo[d]) / (double)e->shape[d] : 0;
        }
        if (best < 0 || cover < best) best = cover, *sd = d;
    }
    for (int k = 0; k < e->npieces; k++) {
        _vs_ckpt_pgeom g;
        _vs_ckpt_piece_geom(e, k, &g);
        sp[k].i = k, sp[k].lo = 0, sp[k].hi = 1;
        if (!D) continue;
        if (g.re <= g.rb) { // (holds nothing: never met)
            sp[k].lo = sp[k].hi = INT64_MAX;
            continue;
        }
        _vs_ckpt_slab(D, g.off, g.box, g.rb, g.re, lo, hi);
        sp[k].lo = lo[*sd], sp[k].hi = hi[*sd];
        if (sp[k].hi - sp[k].lo > *ext) *ext = sp[k].hi - sp[k].lo;
    }
    if (e->npieces > 1) qsort(sp, (size_t)e->npieces, sizeof *sp, _vs_ckpt_cmp_sortp);
}

_VS_CKPT_PRIVATE vs_result _vs_ckpt_parts_init(const vs_world* w, const _vs_ckpt_index* ix, _vs_ckpt_parts* P)
{
    memset(P, 0, sizeof *P);
    P->ix = ix;
    const size_t ne = (size_t)ix->ne + 1, nf = (size_t)ix->nfiles + 1;
    size_t np = 1;
    for (int i = 0; i < ix->ne; i++) np += (size_t)ix->e[i].npieces;
    P->order = (const _vs_ckpt_ientry**)_vs_ckpt_zalloc(w, ne, sizeof *P->order);
    P->pbase = (int*)_vs_ckpt_zalloc(w, ne, sizeof(int));
    P->pmark = (int*)_vs_ckpt_zalloc(w, np, sizeof(int));
    P->sorted = (_vs_ckpt_sortp*)_vs_ckpt_zalloc(w, np, sizeof *P->sorted);
    P->sdim = (int*)_vs_ckpt_zalloc(w, ne, sizeof(int));
    P->ext = (int64_t*)_vs_ckpt_zalloc(w, ne, sizeof(int64_t));
    P->emark = (int*)_vs_ckpt_zalloc(w, ne, sizeof(int));
    P->epos = (int*)_vs_ckpt_zalloc(w, ne, sizeof(int));
    P->src = (int*)_vs_ckpt_zalloc(w, ne, sizeof(int));
    P->fmark = (int*)_vs_ckpt_zalloc(w, nf, sizeof(int));
    P->fmap = (int*)_vs_ckpt_zalloc(w, nf, sizeof(int));
    P->fsrc = (int*)_vs_ckpt_zalloc(w, nf, sizeof(int));
    if (!P->order || !P->pbase || !P->pmark || !P->sorted || !P->sdim || !P->ext || !P->emark || !P->epos || !P->src ||
        !P->fmark || !P->fmap || !P->fsrc) {
        _vs_ckpt_parts_free(w, P);
        return vs_set_error(VS_ERR_NOMEM, "vs_ckpt_load: out of memory for the index of %d entries", ix->ne);
    }
    for (int i = 0, at = 0; i < ix->ne; at += ix->e[i].npieces, i++) {
        P->order[i] = &ix->e[i], P->pbase[i] = at;
        _vs_ckpt_parts_sort(&ix->e[i], P->sorted + at, &P->sdim[i], &P->ext[i]);
    }
    if (ix->ne > 1) qsort((void*)P->order, (size_t)ix->ne, sizeof *P->order, _vs_ckpt_cmp_name);
    return VS_OK;
}

/* The index's entry named name, or -1 (a binary search of P->order). */
_VS_CKPT_PRIVATE int _vs_ckpt_parts_find(const _vs_ckpt_parts* P, const char* name)
{
    int lo = 0, hi = P->ix->ne - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(name, P->order[mid]->name);
        if (!c) return (int)(P->order[mid] - P->ix->e);
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return -1;
}

/* The first of entry i's sorted pieces whose slab starts after `at` (n: none). */
_VS_CKPT_PRIVATE int _vs_ckpt_parts_after(const _vs_ckpt_parts* P, int i, int64_t at)
{
    const _vs_ckpt_sortp* sp = P->sorted + P->pbase[i];
    int lo = 0, hi = P->ix->e[i].npieces;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (sp[mid].lo > at) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* Marks entry i's pieces that request q may meet, each once, into P->sel as
   (pos, piece). Only those whose slabs start within the longest slab before
   the request's and before its end are looked at. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_parts_mark(const vs_world* w, _vs_ckpt_parts* P, int i, int pos,
                                               const _vs_ckpt_req* q, int mark)
{
    const _vs_ckpt_ientry* e = &P->ix->e[i];
    const _vs_ckpt_sortp* sp = P->sorted + P->pbase[i];
    int s0 = 0, s1 = e->npieces; // (a blob's: all)
    if (e->kind != VS_CKPT_BLOB) {
        if (q->what != _VS_CKPT_REQ_PART || q->nd.ndim != e->ndim || q->nd.re <= q->nd.rb) return VS_OK;
        if (e->ndim) {
            int64_t a0[_VS_CKPT_MAXD], a1[_VS_CKPT_MAXD];
            _vs_ckpt_slab(e->ndim, q->nd.off, q->nd.box, q->nd.rb, q->nd.re, a0, a1);
            const int d = P->sdim[i];
            s0 = _vs_ckpt_parts_after(P, i, a0[d] - P->ext[i]);
            s1 = _vs_ckpt_parts_after(P, i, a1[d] - 1);
        }
    }
    for (int s = s0; s < s1; s++) {
        const int k = sp[s].i;
        if (P->pmark[P->pbase[i] + k] == mark || !_vs_ckpt_part_meets(e, k, q)) continue;
        if (P->nsel == P->capsel) {
            int cap = P->capsel ? 2 * P->capsel : 64;
            _vs_ckpt_sortp* v = (_vs_ckpt_sortp*)vs_alloc(w, sizeof *v * (size_t)cap);
            if (!v) return VS_ERR_NOMEM;
            if (P->nsel) memcpy(v, P->sel, sizeof *v * (size_t)P->nsel);
            vs_free(w, P->sel);
            P->sel = v, P->capsel = cap;
        }
        P->pmark[P->pbase[i] + k] = mark;
        P->sel[P->nsel].lo = pos, P->sel[P->nsel].hi = 0, P->sel[P->nsel].i = k;
        P->nsel++;
    }
    return VS_OK;
}

/* Rank 0: the part of the index that meets requests rq[nrq] of the rank
   marked `mark`, appended to out as index text (the whole index's format: the
   rank parses it with the same checks). Its pieces and names are the index's
   (shallow copies); only the part's arrays are its own. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_part_write(const vs_world* w, _vs_ckpt_parts* P, const _vs_ckpt_req* rq, int nrq,
                                               int mark, _vs_sbuf* out)
{
    const _vs_ckpt_index* ix = P->ix;
    _vs_ckpt_index sub;
    memset(&sub, 0, sizeof sub);
    sub.mesh_ndims = ix->mesh_ndims;
    memcpy(sub.mesh_shape, ix->mesh_shape, sizeof sub.mesh_shape);
    memcpy(sub.mesh_dims, ix->mesh_dims, sizeof sub.mesh_dims);
    sub.block = ix->block;
    vs_result r = VS_OK;
    P->nsel = 0;
    for (int j = 0; !r && j < nrq; j++) { // the entries, and their pieces that meet a request
        int i = _vs_ckpt_parts_find(P, rq[j].name);
        if (i < 0) continue; // (the rank reports it missing)
        if (P->emark[i] != mark) P->emark[i] = mark, P->epos[i] = sub.ne, P->src[sub.ne++] = i;
        r = _vs_ckpt_parts_mark(w, P, i, P->epos[i], &rq[j], mark);
    }
    if (P->nsel > 1) // (by entry, then the index's order)
        qsort(P->sel, (size_t)P->nsel, sizeof *P->sel, _vs_ckpt_cmp_sortp);
    sub.e = (_vs_ckpt_ientry*)_vs_ckpt_zalloc(w, (size_t)sub.ne + 1, sizeof *sub.e);
    if (!sub.e) r = VS_ERR_NOMEM;
    for (int j = 0, s = 0; !r && j < sub.ne; j++) {
        const _vs_ckpt_ientry* e = &ix->e[P->src[j]];
        _vs_ckpt_ientry* x = &sub.e[j];
        *x = *e;
        x->npieces = 0;
        while (s + x->npieces < P->nsel && P->sel[s + x->npieces].lo == j) x->npieces++;
        if (!(x->pieces = (_vs_ckpt_piece*)_vs_ckpt_zalloc(w, (size_t)x->npieces + 1, sizeof *x->pieces))) {
            r = VS_ERR_NOMEM;
            break;
        }
        for (int c = 0; c < x->npieces; c++, s++) {
            const _vs_ckpt_piece* p = &e->pieces[P->sel[s].i];
            if (P->fmark[p->file] != mark)
                P->fmark[p->file] = mark, P->fmap[p->file] = sub.nfiles, P->fsrc[sub.nfiles++] = p->file;
            x->pieces[c] = *p;
            x->pieces[c].file = P->fmap[p->file];
        }
    }
    sub.files = (char**)_vs_ckpt_zalloc(w, (size_t)sub.nfiles + 1, sizeof *sub.files);
    sub.file_bytes = (uint64_t*)_vs_ckpt_zalloc(w, (size_t)sub.nfiles + 1, sizeof *sub.file_bytes);
    if (!r && (!sub.files || !sub.file_bytes)) r = VS_ERR_NOMEM;
    for (int f = 0; !r && f < sub.nfiles; f++)
        sub.files[f] = ix->files[P->fsrc[f]], sub.file_bytes[f] = ix->file_bytes[P->fsrc[f]];
    if (!r) r = _vs_ckpt_index_write(&sub, out);
    else vs_set_error(r, "vs_ckpt_load: out of memory for a rank's part of the index");
    for (int j = 0; sub.e && j < sub.ne; j++) vs_free(w, sub.e[j].pieces);
    vs_free(w, sub.e);
    vs_free(w, sub.files);
    vs_free(w, sub.file_bytes);
    return r;
}

/* After an agreement found rank `who` failing: every rank's error is that
   rank's, word for word (a bad index names the same value on every rank). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_same_error(vs_ckpt* ck, vs_result mine, vs_result ra, int who)
{
    char why[1024] = "";
    if (mine) _vs_ckpt_fmt(why, sizeof why, "%s", vs_last_error());
    if (who < 0 || who >= ck->size) // (the agreement itself failed)
        return mine ? vs_set_error(mine, "%s", why) : vs_set_error(ra, "vs_ckpt_load: %s", vs_last_error());
    vs_result rb = _vs_ckpt_coll(ck, _VS_CKPT_BCAST, NULL, why, sizeof why, VS_U8, who);
    why[sizeof why - 1] = 0;
    if (mine) return vs_set_error(mine, "%s", why);
    if (rb) return vs_set_error(ra, "vs_ckpt_load: rank %d could not read the index (its error says why)", who);
    return vs_set_error(ra, "%s", why);
}

/* Collective: this rank's part of the index at path, for its requests rq[nrq]
   (_vs_ckpt_parts), into *ix (free with _vs_ckpt_index_free). mine: this
   rank's result so far. Every rank returns the same result: an index rank 0
   cannot read or parse fails every rank with rank 0's message. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_read_part(vs_ckpt* ck, const char* path, vs_result mine, const _vs_ckpt_req* rq,
                                              int nrq, _vs_ckpt_index* ix)
{
    const char* fn = "vs_ckpt_load";
    const int root = ck->rank == 0;
    const size_t P = (size_t)ck->size;
    char file[4096];
    _vs_ckpt_fmt(file, sizeof file, "%s/" _VS_CKPT_INDEX, path);
    memset(ix, 0, sizeof *ix);
    _vs_ckpt_index all;
    _vs_ckpt_parts parts;
    memset(&all, 0, sizeof all);
    memset(&parts, 0, sizeof parts);
    size_t *counts = NULL, *displs = NULL, total = 0;
    uint64_t *sizes = NULL, len = 0;
    void* got = NULL;
    char* one = NULL;
    _vs_sbuf down = {ck->w, NULL, 0, 0, 0};
    vs_result r = mine;
    if (root && !r) { // rank 0 alone reads and checks the whole index
        r = _vs_ckpt_index_read_one(ck, file, &all);
        if (!r) r = _vs_ckpt_parts_init(ck->w, &all, &parts);
        counts = (size_t*)vs_alloc(ck->w, sizeof(size_t) * P);
        displs = (size_t*)vs_alloc(ck->w, sizeof(size_t) * P);
        sizes = (uint64_t*)vs_alloc(ck->w, sizeof(uint64_t) * P);
        if (!r && (!counts || !displs || !sizes)) r = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    }
    int who = -1;
    vs_result ra = _vs_ckpt_agree(ck, r, &who);
    if (ra) {
        r = _vs_ckpt_same_error(ck, r, ra, who);
        goto done;
    }
    r = _vs_ckpt_gather0(ck, counts, displs, sizes, VS_OK, rq, sizeof *rq * (size_t)nrq, &got, &total, fn,
                         "could not send its requests");
    for (size_t k = 0; root && !r && k < P; k++) { // each rank's part, into its slot of `down`
        const _vs_ckpt_req* q = (const _vs_ckpt_req*)((const char*)got + displs[k]);
        size_t at = down.len;
        r = _vs_ckpt_part_write(ck->w, &parts, q, (int)(counts[k] / sizeof *q), (int)k + 1, &down);
        displs[k] = at, counts[k] = down.len - at, sizes[k] = counts[k];
    }
    _vs_ckpt_parts_free(ck->w, &parts); // (rank 0 holds the ranks' parts alone from here)
    _vs_ckpt_index_free(ck->w, &all);
    ra = _vs_ckpt_agree(ck, r, &who);
    if (!ra) r = _vs_ckpt_xfer(ck, 0, &len, sizeof len, sizes, NULL, NULL);
    if (!ra && !r && !(one = (char*)vs_alloc(ck->w, (size_t)len + 1)))
        r = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    if (!ra) ra = _vs_ckpt_agree(ck, r, &who);
    if (ra) {
        r = _vs_ckpt_why(ck, r, ra, who, fn, "could not get its part of the index");
        goto done;
    }
    r = _vs_ckpt_xfer(ck, 0, one, (size_t)len, down.p, counts, displs);
    if (!r) r = _vs_ckpt_index_parse(ck->w, file, one, (size_t)len, ix);
    ra = _vs_ckpt_agree(ck, r, &who);
    if (ra) r = _vs_ckpt_why(ck, r, ra, who, fn, "could not read its part of the index");
done:
    if (r) _vs_ckpt_index_free(ck->w, ix);
    _vs_ckpt_parts_free(ck->w, &parts);
    _vs_ckpt_index_free(ck->w, &all);
    _vs_sb_free(&down);
    vs_free(ck->w, one);
    vs_free(ck->w, got);
    vs_free(ck->w, counts);
    vs_free(ck->w, displs);
    vs_free(ck->w, sizes);
    return r;
}

_VS_CKPT_PRIVATE int _vs_ckpt_ra_start(vs_ckpt* ck, _vs_ckpt_ra* a, const char* dir, const _vs_ckpt_index* ix,
                                       const vs_ckpt_entry* entries, int n)
{
    memset(a, 0, sizeof *a);
    a->dir = dir, a->ix = ix, a->w = ck->w;
    if (!_VS_CKPT_MAP_POPULATE) return 0; // (without it the helper's mappings would read nothing)
    for (int i = 0; i < n; i++) {
        const vs_ckpt_entry* q = &entries[i];
        if (q->skip) continue;
        const _vs_ckpt_ientry* e = q->name ? _vs_ckpt_find(ix, q->name) : NULL;
        if (!e || (q->kind == VS_CKPT_BLOB) != (e->kind == VS_CKPT_BLOB)) break;
        _vs_ckpt_need nd;
        size_t es = 1;
        if (e->kind == VS_CKPT_BLOB) _vs_ckpt_need_of(NULL, e->blob_bytes, &nd);
        else {
            _vs_ckpt_rec rc;
            if (!_vs_ckpt_same_shape(e, q) || _vs_ckpt_entry_rec("vs_ckpt_load", q, i, ck->rank, &rc) != VS_OK) break;
            _vs_ckpt_need_of(&rc, 0, &nd);
            es = vs_dtype_size(e->dtype);
        }
        for (int k = 0; k < e->npieces; k++) {
            uint64_t lo = 0, hi = 0;
            const _vs_ckpt_piece* p = &e->pieces[k];
            if (_vs_ckpt_piece_span(ix, e, k, &nd, es, &lo, &hi) && hi > lo &&
                !_vs_ckpt_ra_push(a, p->file, p->data_begin + lo, p->data_begin + hi))
                return 0;
        }
    }
    if (a->touch < _VS_CKPT_RA_MIN) return 0; // (short spans alone: a thread that would map nothing)
    if (pthread_mutex_init(&a->mu, NULL)) return 0;
    if (pthread_cond_init(&a->cv, NULL)) {
        pthread_mutex_destroy(&a->mu);
        return 0;
    }
    if (pthread_create(&a->th, NULL, _vs_ckpt_ra_main, a)) {
        pthread_cond_destroy(&a->cv);
        pthread_mutex_destroy(&a->mu);
        return 0;
    }
    return 1;
}

VS_API vs_result vs_ckpt_load(vs_ckpt* ck, const char* path, vs_ckpt_entry* entries, int n, int* loaded)
{
    const char* fn = "vs_ckpt_load";
    _VS_TRY(_VS_CKPT_GONE(fn, ck));
    if (!ck || !path) return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, ck ? "path" : "ck");
    for (int i = 0; loaded && entries && i < n; i++) loaded[i] = 0;
    vs_result r = vs_ckpt_wait(ck);
    if (r) r = vs_set_error(r, "%s: the async save before it failed: %s", fn, vs_last_error());
    else if (n < 0 || (n && !entries)) r = vs_set_error(VS_ERR_INVALID, "%s: %d entries at %p", fn, n, (void*)entries);
    // every rank returns the same result: one rank's bad call (or, below, one
    // rank's corrupt bytes) fails the load on all, each naming the rank and why
    int who = -1;
    vs_result agreed = _vs_ckpt_agree(ck, r, &who);
    if (agreed) return _vs_ckpt_why(ck, r, agreed, who, fn, "cannot load");
    // this rank's part of the index: the entries it asks for, the pieces it may read
    _vs_ckpt_req* rq = (_vs_ckpt_req*)vs_alloc(ck->w, sizeof *rq * (size_t)(n > 0 ? n : 1));
    int nrq = rq ? _vs_ckpt_requests(ck, entries, n, rq) : 0;
    _vs_ckpt_index ix;
    r = _vs_ckpt_read_part(ck, path, rq ? VS_OK : vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn), rq, nrq, &ix);
    vs_free(ck->w, rq);
    if (r) return r;
    _vs_ckpt_files f = {path, &ix, (int*)vs_alloc(ck->w, sizeof(int) * (size_t)(ix.nfiles ? ix.nfiles : 1)), ck->w,
                        (_vs_ckpt_hdr*)vs_alloc(ck->w, sizeof(_vs_ckpt_hdr) * (size_t)(ix.nfiles ? ix.nfiles : 1)), NULL};
    if (!f.fd || !f.hdr) r = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    for (int i = 0; f.fd && i < ix.nfiles; i++) f.fd[i] = -1;
    if (f.hdr) memset(f.hdr, 0, sizeof(_vs_ckpt_hdr) * (size_t)(ix.nfiles ? ix.nfiles : 1));
    _vs_ckpt_ra ra;
    memset(&ra, 0, sizeof ra);
    int ra_on = !r && !ck->desc.no_readahead && _vs_ckpt_ra_start(ck, &ra, path, &ix, entries, n);
    if (ra_on) f.ra = &ra;
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
            _vs_ckpt_need_of(NULL, e->blob_bytes, &nd);
            char* tmpb = (char*)vs_alloc(ck->w, e->blob_bytes ? e->blob_bytes : 1);
            if (!tmpb) r = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
            if (!r) r = _vs_ckpt_load_entry(ck, &f, e, &nd, tmpb, 1, 0);
            if (!r) {
                if (e->blob_bytes) memcpy(q->blob, tmpb, e->blob_bytes);
                q->blob_bytes = e->blob_bytes;
            }
            vs_free(ck->w, tmpb);
        } else {
            if (!_vs_ckpt_same_shape(e, q)) {
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
            _vs_ckpt_need_of(&rc, 0, &nd);
            size_t es = vs_dtype_size(e->dtype), bytes = (size_t)(nd.re - nd.rb) * es;
            if (!q->device) r = _vs_ckpt_load_entry(ck, &f, e, &nd, (char*)q->t.data, es, !ck->desc.untouched_on_error);
            else { // device buffers: through host memory
                char* h = (char*)vs_alloc(ck->w, bytes ? bytes : 1);
                r = h ? _vs_ckpt_load_entry(ck, &f, e, &nd, h, es, 0) : vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
                if (!r) r = _vs_ckpt_copy_mem(q->t.data, h, bytes, 1, 0);
                vs_free(ck->w, h);
            }
        }
        if (!r && loaded) loaded[i] = 1;
    }
    _vs_ckpt_ra_stop(&ra, ra_on);
    for (int i = 0; f.fd && i < ix.nfiles; i++)
        if (f.fd[i] >= 0) close(f.fd[i]);
    for (int i = 0; f.hdr && i < ix.nfiles; i++) vs_free(ck->w, f.hdr[i].t), vs_free(ck->w, f.hdr[i].arena);
    vs_free(ck->w, f.fd);
    vs_free(ck->w, f.hdr);
    _vs_ckpt_index_free(ck->w, &ix);
    agreed = _vs_ckpt_agree(ck, r, &who);
    return agreed ? _vs_ckpt_why(ck, r, agreed, who, fn, "failed loading") : VS_OK;
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
    vs_ckpt_entry* e;
    void* block;
    size_t bytes, block_bytes;
    int keep; // an async save's block: kept in ck->spare for the next one
    int pinned; // page-locked (cudaHostRegister): device memory is copied into it at full speed
} _vs_ckpt_job;

/* Page-locks a host block that device memory is copied into (it stays memory
   from the allocator hooks); 1 when it is. */
_VS_CKPT_PRIVATE int _vs_ckpt_pin(void* p, size_t n)
{
#ifdef _VS_CKPT_CUDA
    if (cudaHostRegister(p, n, 0) == cudaSuccess) return 1;
    cudaGetLastError(); // (pageable then; the failure must not stay for the caller's next error check)
    return 0;
#else
    (void)p, (void)n;
    return 0;
#endif
}

_VS_CKPT_PRIVATE void _vs_ckpt_unpin(void* p, int pinned)
{
#ifdef _VS_CKPT_CUDA
    if (p && pinned) cudaHostUnregister(p);
#else
    (void)p, (void)pinned;
#endif
}

_VS_CKPT_PRIVATE void _vs_ckpt_job_free(vs_ckpt* ck, _vs_ckpt_job* j)
{
    if (!j) return;
    if (j->keep) {
        _vs_ckpt_unpin(ck->spare, ck->spare_pinned);
        vs_free(ck->w, ck->spare);
        ck->spare = j->block, ck->spare_bytes = j->block_bytes, ck->spare_pinned = j->pinned;
    } else {
        _vs_ckpt_unpin(j->block, j->pinned);
        vs_free(ck->w, j->block);
    }
    vs_free(ck->w, j);
}

/* Copies of entries[n] (checked already) into one block; bound (an async save's
   limit; 0: none) exceeded: VS_ERR_UNSUPPORTED, nothing copied. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_job_make(vs_ckpt* ck, const vs_ckpt_entry* entries, int n, size_t bound,
                                             _vs_ckpt_job** out)
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
    void* block = NULL;
    size_t bsize = head + data;
    int pinned = 0, dev = 0;
    for (int i = 0; i < n; i++) dev |= entries[i].device && !entries[i].skip;
    if (j && bound && ck->spare && ck->spare_bytes >= head + data) { // (async: the last one's block)
        block = ck->spare, bsize = ck->spare_bytes, pinned = ck->spare_pinned;
        ck->spare = NULL;
    } else if (j) {
        _vs_ckpt_unpin(ck->spare, ck->spare_pinned);
        vs_free(ck->w, ck->spare);
        ck->spare = NULL;
        block = vs_alloc(ck->w, head + data);
    }
    if (block && dev && !pinned) pinned = _vs_ckpt_pin(block, bsize); // (unpinned still works, slower)
    if (!j || !block) {
        vs_free(ck->w, j);
        return vs_set_error(VS_ERR_NOMEM, "vs_ckpt_save: %zu bytes for the copies", head + data);
    }
    memset(j, 0, sizeof *j);
    j->block = block;
    j->block_bytes = bsize;
    j->pinned = pinned;
    j->keep = bound != 0;
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

/* An async save's writer: this rank's shard, from the copies; no collective
   (the calling thread runs those, in vs_ckpt_save and vs_ckpt_wait). */
static void* _vs_ckpt_async_main(void* arg)
{
    _vs_ckpt_saving* s = (_vs_ckpt_saving*)arg;
#ifdef _VS_CKPT_CUDA
    // (a new thread starts on device 0: should this thread ever call CUDA, it is on the rank's GPU)
    if (s->ck->staged) cudaSetDevice(s->ck->cuda_dev);
#endif
    _vs_ckpt_write(s->ck, s);
    return NULL;
}

VS_API vs_result vs_ckpt_save(vs_ckpt* ck, const char* path, const vs_ckpt_entry* entries, int n,
                              const vs_ckpt_save_opts* opts)
{
    const char* fn = "vs_ckpt_save";
    _VS_TRY(_VS_CKPT_GONE(fn, ck));
    if (!ck) return vs_set_error(VS_ERR_NULL, "%s: ck is NULL", fn);
    int overwrite = opts ? opts->overwrite : 0, async = opts ? opts->async : 0;
    vs_result r = vs_ckpt_wait(ck);
    if (r) r = vs_set_error(r, "%s: the async save before it failed: %s", fn, vs_last_error());
    else if (!path) r = vs_set_error(VS_ERR_NULL, "%s: path is NULL", fn);
    else if (n < 0 || (n && !entries)) r = vs_set_error(VS_ERR_INVALID, "%s: %d entries at %p", fn, n, (void*)entries);
    else if (async != 0 && async != 1) r = vs_set_error(VS_ERR_INVALID, "%s: opts.async = %d (0 or 1)", fn, async);
    else if (overwrite != 0 && overwrite != 1)
        r = vs_set_error(VS_ERR_INVALID, "%s: opts.overwrite = %d (0 or 1)", fn, overwrite);
    else if (async) // known now, not at vs_ckpt_wait: every rank sees the folder (rank 0 commits what
        r = _vs_ckpt_taken(path, overwrite); // all ranks write), so each checks without a collective
    if (r) return r;
    /* This rank's entries are checked before anything is copied (a length past
       the caller's memory is an error here, not a copy); then the copies (async:
       within desc.async_max_bytes, else this rank saves now, and so do all). */
    _vs_ckpt_saving* s = NULL;
    _vs_ckpt_job* j = NULL;
    int64_t sync = !async;
    r = _vs_ckpt_saving_new(ck, path, overwrite, entries, n, &s);
    if (!r && async) { // (a sync save streams device memory, a piece at a time: _vs_ckpt_write_shard)
        r = _vs_ckpt_job_make(ck, entries, n, ck->desc.async_max_bytes, &j);
        if (r == VS_ERR_UNSUPPORTED) sync = 1, r = VS_OK;
        if (j) s->entries = j->e;
    }
    r = _vs_ckpt_begin(ck, s, r, &sync); // (agreed: every rank's call fails, or none)
    if (async) ck->async_used = !r && !sync ? j->bytes : 0;
    if (!r && !sync) { // this rank's shard in the background; vs_ckpt_wait (collective) commits
        ck->save = s;
        ck->job = j;
        ck->running = 1;
        ck->threaded = !pthread_create(&ck->thread, NULL, _vs_ckpt_async_main, s);
        if (!ck->threaded) _vs_ckpt_write(ck, s); // (no thread to be had: written now)
        return VS_OK;
    }
    if (!r) {
        _vs_ckpt_write(ck, s);
        r = _vs_ckpt_finish(ck, s);
    }
    _vs_ckpt_saving_free(s);
    _vs_ckpt_job_free(ck, j);
    return r;
}

VS_API vs_result vs_ckpt_wait(vs_ckpt* ck)
{
    _VS_TRY(_VS_CKPT_GONE("vs_ckpt_wait", ck));
    if (!ck) return vs_set_error(VS_ERR_NULL, "vs_ckpt_wait: ck is NULL");
    if (!ck->running) return VS_OK;
    if (ck->threaded) pthread_join(ck->thread, NULL);
    ck->running = ck->threaded = 0;
    vs_result r = _vs_ckpt_finish(ck, ck->save);
    _vs_ckpt_saving_free(ck->save);
    _vs_ckpt_job_free(ck, ck->job);
    ck->save = NULL;
    ck->job = NULL;
    return r;
}

VS_API vs_result vs_ckpt_async_memory(const vs_ckpt* ck, size_t* used, size_t* bound)
{
    _VS_TRY(_VS_CKPT_GONE("vs_ckpt_async_memory", ck));
    if (!ck || !used || !bound)
        return vs_set_error(VS_ERR_NULL, "vs_ckpt_async_memory: %s is NULL", !ck ? "ck" : !used ? "used" : "bound");
    *used = ck->async_used;
    *bound = ck->desc.async_max_bytes;
    return VS_OK;
}

VS_API vs_result vs_ckpt_query_desc(const vs_ckpt* ck, vs_ckpt_desc* out)
{
    _VS_TRY(_VS_CKPT_GONE("vs_ckpt_query_desc", ck));
    if (!ck || !out) return vs_set_error(VS_ERR_NULL, "vs_ckpt_query_desc: %s is NULL", ck ? "out" : "ck");
    *out = ck->desc; // resolved by vs_ckpt_init (_vs_ckpt_desc_defaults)
    return VS_OK;
}

VS_API vs_result vs_ckpt_free(vs_ckpt* ck)
{
    if (!ck) return VS_OK;
    _VS_TRY(_VS_CKPT_GONE("vs_ckpt_free", ck));
    vs_result r = vs_ckpt_wait(ck);
    _vs_ckpt_unpin(ck->spare, ck->spare_pinned);
    vs_free(ck->w, ck->spare);
    vs_comm_free(ck->comm);
    if (ck->dstage) vs_device_free(ck->w, ck->dstage); // (after the communicator: nothing queued uses it)
    vs_mesh_release(ck->mesh);
    ck->magic = _VS_CKPT_DEAD;
    vs_free_later(ck->w, ck);
    return r;
}

// >>ckpt-ddp -------------------------------------------------------------------

#ifdef VESCALE_DDP_INCLUDED
static const vs_ddp_state _vs_ckpt_states[] = {VS_DDP_STATE_MASTER,   VS_DDP_STATE_EXP_AVG, VS_DDP_STATE_EXP_AVG_SQ,
                                               VS_DDP_STATE_MOMENTUM, VS_DDP_STATE_CUSTOM0, VS_DDP_STATE_CUSTOM1};
static const char* const _vs_ckpt_state_names[] = {"master", "exp_avg", "exp_avg_sq", "momentum", "custom0", "custom1"};

/* The DDP's entries (then the extra ones): for save (primary ranks give the
   optimizer ranges) or load (every rank takes its own). */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_ddp_entries(vs_ckpt* ck, vs_ddp* d, const char* prefix, const vs_ckpt_entry* extra,
                                                int nextra, int save, int64_t* step, vs_ckpt_entry** out, int* n,
                                                char** names)
{
    const char* fn = save ? "vs_ckpt_save_ddp" : "vs_ckpt_load_ddp";
    *out = NULL;
    *names = NULL;
    if (!d) return vs_set_error(VS_ERR_NULL, "%s: ddp is NULL", fn);
    if (!prefix) prefix = "";
    if (nextra < 0 || (nextra && !extra)) return vs_set_error(VS_ERR_INVALID, "%s: %d extra entries", fn, nextra);
    vs_ddp_desc dd;
    _VS_TRY(vs_ddp_query_desc(d, &dd));
    int np = vs_ddp_num_params(d);
    if (np < 0) return vs_set_error(VS_ERR_STATE, "%s: %s", fn, vs_last_error());
    const int K = (int)(sizeof _vs_ckpt_states / sizeof _vs_ckpt_states[0]);
    size_t cap = (size_t)np * (size_t)(K + 1) + 1 + (size_t)nextra;
    vs_ckpt_entry* e = (vs_ckpt_entry*)vs_alloc(ck->w, sizeof *e * cap);
    char* nm = (char*)vs_alloc(ck->w, (size_t)VS_CKPT_NAME_MAX * cap);
    if (!e || !nm) {
        vs_free(ck->w, e);
        vs_free(ck->w, nm);
        return vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    }
    memset(e, 0, sizeof *e * cap);
    int dev = vs_comm_device(vs_mesh_comm(dd.mesh));
    int k = 0;
    vs_result r = VS_OK;
    for (int i = 0; i < np && !r; i++) {
        vs_ddp_param_info pi;
        if ((r = vs_ddp_query_param_info(d, i, &pi)) != VS_OK) break;
        vs_layout L;
        memset(&L, 0, sizeof L);
        L.mesh = dd.mesh;
        for (int m = 0; m < VS_MESH_MAX_DIMS; m++) // a DDP Partial: the value is replicated, only its gradient is partial
            L.p[m] = pi.placements[m].kind == VS_PLACE_PARTIAL ? vs_replicate() : pi.placements[m];
        for (int s = -1; s < K && !r; s++) {
            vs_ckpt_entry* x = &e[k];
            char* name = nm + (size_t)k * VS_CKPT_NAME_MAX;
            x->t.layout = L;
            x->t.ndim = pi.ndim;
            for (int q = 0; q < pi.ndim; q++) x->t.shape[q] = pi.shape[q];
            x->device = dev;
            if (s < 0) { // the parameter itself
                _vs_ckpt_fmt(name, VS_CKPT_NAME_MAX, "%s%s", prefix, pi.name);
                x->t.dtype = pi.dtype;
                x->t.data = dd.zero == VS_ZERO_3 ? NULL : vs_ddp_param(d, i);
                vs_ddp_span sp;
                if (dd.zero == VS_ZERO_3 && (r = vs_ddp_param_owned(d, i, &sp)) == VS_OK) {
                    // ZeRO-3 keeps only the owned range between uses: a range, as the optimizer state
                    x->kind = VS_CKPT_RANGE;
                    x->t.data = sp.data;
                    x->range_begin = sp.begin;
                    x->range_end = sp.end;
                    x->skip = save && !pi.primary;
                }
                if (r) break;
            } else {
                vs_ddp_span sp;
                int has = vs_ddp_has_optim_state(d, i, _vs_ckpt_states[s]);
                if (has == 0) continue; // the optimizer keeps no such state (asked quietly: no error logged)
                vs_result rs = has < 0 ? (vs_result)has : vs_ddp_optim_state(d, i, _vs_ckpt_states[s], &sp);
                if (rs) {
                    r = rs;
                    break;
                }
                _vs_ckpt_fmt(name, VS_CKPT_NAME_MAX, "%s%s.%s", prefix, pi.name, _vs_ckpt_state_names[s]);
                x->kind = VS_CKPT_RANGE;
                x->t.dtype = VS_F32;
                x->t.data = sp.data;
                x->range_begin = sp.begin;
                x->range_end = sp.end;
                x->skip = save && !pi.primary; // each element saved once, by its primary owner
            }
            x->name = name;
            k++;
        }
    }
    if (!r) {
        vs_ckpt_entry* x = &e[k];
        char* name = nm + (size_t)k * VS_CKPT_NAME_MAX;
        _vs_ckpt_fmt(name, VS_CKPT_NAME_MAX, "%s__step", prefix);
        x->name = name;
        x->kind = VS_CKPT_BLOB;
        x->blob = step;
        x->blob_bytes = sizeof *step;
        k++;
        for (int i = 0; i < nextra; i++) e[k++] = extra[i];
    }
    vs_clear_error();
    if (r) {
        vs_free(ck->w, e);
        vs_free(ck->w, nm);
        return vs_set_error(r, "%s: %s", fn, vs_last_error());
    }
    *out = e;
    *n = k;
    *names = nm;
    return VS_OK;
}

VS_API vs_result vs_ckpt_save_ddp(vs_ckpt* ck, const char* path, struct vs_ddp* ddp, const char* prefix,
                                  const vs_ckpt_entry* extra, int nextra, const vs_ckpt_save_opts* opts)
{
    if (!ck) return vs_set_error(VS_ERR_NULL, "vs_ckpt_save_ddp: ck is NULL");
    _VS_TRY(_VS_CKPT_GONE("vs_ckpt_save_ddp", ck));
    int64_t step = vs_ddp_step_count(ddp);
    vs_ckpt_entry* e;
    char* names;
    int n;
    _VS_TRY(_vs_ckpt_ddp_entries(ck, ddp, prefix, extra, nextra, 1, &step, &e, &n, &names));
    // the last step's optimizer kernels and gathers done before anything is copied
    // (the copies do not wait for the DDP's stream); an async save copies the step with the rest
    vs_result r = vs_ddp_synchronize(ddp);
    if (!r) r = vs_ckpt_save(ck, path, e, n, opts);
    vs_free(ck->w, e);
    vs_free(ck->w, names);
    return r;
}

/* A parameter saved in another floating dtype than the DDP holds it (a bf16 run
   resumed in f32, or the reverse): loaded into a host buffer from its f32
   master when the file has one (the exact weights), else as saved, and
   rounded into the parameter after the load. */
typedef struct _vs_ckpt_conv {
    void* tmp;       // host, n elements of `from`
    int64_t n;
    vs_dtype from, to;
    void* dst;       // the parameter's shard
    int device;
} _vs_ckpt_conv;

_VS_CKPT_PRIVATE int _vs_ckpt_is_float(vs_dtype t) { return t == VS_F32 || t == VS_BF16 || t == VS_F16; }

_VS_CKPT_PRIVATE float _vs_ckpt_ld(const void* p, vs_dtype t, int64_t i)
{
    if (t == VS_F32) return ((const float*)p)[i];
    uint16_t h = ((const uint16_t*)p)[i];
    return t == VS_BF16 ? vs_bf16_to_f32(h) : vs_f16_to_f32(h);
}

/* Rewrites the load's entries for parameters whose dtype in the file differs
   (and, for a bf16/f16 parameter from a file without masters, its master from
   the saved f32 parameter); *conv gets the conversions to make after it. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_dtype_plan(vs_ckpt* ck, const char* path, vs_ckpt_entry* e, int n,
                                               _vs_ckpt_conv* conv, int* nconv)
{
    // the index's descriptions of the entries, and of their masters or parameters (no pieces)
    _vs_ckpt_req* rq = (_vs_ckpt_req*)vs_alloc(ck->w, sizeof *rq * (size_t)(2 * n + 1));
    int m = 0;
    for (int j = 0; rq && j < n; j++) {
        const vs_ckpt_entry* x = &e[j];
        if (x->kind == VS_CKPT_BLOB || !x->name) continue;
        char other[VS_CKPT_NAME_MAX + 8];
        size_t nl = strlen(x->name);
        m += _vs_ckpt_req_set(&rq[m], x->name, _VS_CKPT_REQ_META, NULL);
        other[0] = 0;
        if (x->kind == VS_CKPT_RANGE && nl > 7 && !strcmp(x->name + nl - 7, ".master"))
            _vs_ckpt_fmt(other, sizeof other, "%.*s", (int)(nl - 7), x->name); // its parameter
        if (x->kind == VS_CKPT_TENSOR) _vs_ckpt_fmt(other, sizeof other, "%s.master", x->name);
        if (other[0]) m += _vs_ckpt_req_set(&rq[m], other, _VS_CKPT_REQ_META, NULL);
    }
    _vs_ckpt_index ix;
    vs_result r = rq ? VS_OK : vs_set_error(VS_ERR_NOMEM, "vs_ckpt_load_ddp: out of memory");
    r = _vs_ckpt_read_part(ck, path, r, rq, m, &ix);
    vs_free(ck->w, rq);
    if (r) return r;
    *nconv = 0;
    for (int j = 0; !r && j < n; j++) {
        vs_ckpt_entry* x = &e[j];
        if (x->kind == VS_CKPT_BLOB || !x->name) continue;
        const _vs_ckpt_ientry* fe = _vs_ckpt_find(&ix, x->name);
        char mname[VS_CKPT_NAME_MAX];
        size_t nl = strlen(x->name);
        if (!fe && x->kind == VS_CKPT_RANGE && nl > 7 && !strcmp(x->name + nl - 7, ".master")) {
            // a master the file lacks: the f32 parameter it saved is the exact value
            _vs_ckpt_fmt(mname, sizeof mname, "%.*s", (int)(nl - 7), x->name);
            const _vs_ckpt_ientry* fp = _vs_ckpt_find(&ix, mname);
            if (fp && fp->dtype == VS_F32) memcpy((char*)x->name, mname, strlen(mname) + 1);
            continue;
        }
        if (x->kind != VS_CKPT_TENSOR || !fe || fe->kind == VS_CKPT_BLOB || fe->dtype == x->t.dtype ||
            !_vs_ckpt_is_float(fe->dtype) || !_vs_ckpt_is_float(x->t.dtype))
            continue; // (a mismatch that cannot convert: vs_ckpt_load refuses it, naming both)
        _vs_ckpt_fmt(mname, sizeof mname, "%s.master", x->name);
        const _vs_ckpt_ientry* fm = _vs_ckpt_find(&ix, mname);
        vs_dtype from = fm && fm->dtype == VS_F32 ? VS_F32 : fe->dtype;
        int64_t ln = 0;
        r = vs_dtensor_local_numel(&x->t, &ln);
        void* tmp = r ? NULL : vs_alloc(ck->w, (size_t)(ln ? ln : 1) * vs_dtype_size(from));
        if (!r && !tmp) r = vs_set_error(VS_ERR_NOMEM, "vs_ckpt_load_ddp: out of memory for \"%s\"", x->name);
        if (r) break;
        conv[*nconv].tmp = tmp, conv[*nconv].n = ln, conv[*nconv].from = from, conv[*nconv].to = x->t.dtype;
        conv[*nconv].dst = x->t.data, conv[*nconv].device = x->device;
        ++*nconv;
        vs_log(vs_mesh_world(ck->desc.mesh), VS_LOG_INFO,
               "vs_ckpt_load_ddp: \"%s\" is %s in %s and %s here: loaded from its %s%s and converted", x->name,
               vs_dtype_name(fe->dtype), path, vs_dtype_name(x->t.dtype), from == VS_F32 && fm ? "f32 master " : "",
               from == VS_F32 && fm ? mname : "saved value");
        if (from == VS_F32 && fm) memcpy((char*)x->name, mname, strlen(mname) + 1);
        x->t.dtype = from, x->t.data = tmp, x->device = 0;
    }
    _vs_ckpt_index_free(ck->w, &ix);
    int who = -1; // (a rank that failed here must not leave the others in vs_ckpt_load)
    vs_result ra = _vs_ckpt_agree(ck, r, &who);
    return ra ? _vs_ckpt_why(ck, r, ra, who, "vs_ckpt_load_ddp", "could not plan the load") : VS_OK;
}

/* After the load: each converted parameter rounded into its shard. */
_VS_CKPT_PRIVATE vs_result _vs_ckpt_dtype_finish(vs_ckpt* ck, const _vs_ckpt_conv* c)
{
    size_t tsz = vs_dtype_size(c->to), bytes = (size_t)c->n * tsz;
    char* out = (char*)vs_alloc(ck->w, bytes ? bytes : 1);
    if (!out) return vs_set_error(VS_ERR_NOMEM, "vs_ckpt_load_ddp: out of memory");
    for (int64_t i = 0; i < c->n; i++) {
        float v = _vs_ckpt_ld(c->tmp, c->from, i);
        if (c->to == VS_F32)
            ((float*)out)[i] = v;
        else
            ((uint16_t*)out)[i] = c->to == VS_BF16 ? vs_f32_to_bf16(v) : vs_f32_to_f16(v);
    }
    vs_result r = VS_OK;
    if (c->device)
        r = _vs_ckpt_copy_mem(c->dst, out, bytes, 1, 0);
    else
        memcpy(c->dst, out, bytes);
    vs_free(ck->w, out);
    return r;
}

VS_API vs_result vs_ckpt_load_ddp(vs_ckpt* ck, const char* path, struct vs_ddp* ddp, const char* prefix,
                                  vs_ckpt_entry* extra, int nextra)
{
    if (!ck) return vs_set_error(VS_ERR_NULL, "vs_ckpt_load_ddp: ck is NULL");
    _VS_TRY(_VS_CKPT_GONE("vs_ckpt_load_ddp", ck));
    if (!path) return vs_set_error(VS_ERR_NULL, "vs_ckpt_load_ddp: path is NULL");
    int64_t step = 0;
    vs_ckpt_entry* e;
    char* names;
    int n;
    _VS_TRY(_vs_ckpt_ddp_entries(ck, ddp, prefix, extra, nextra, 0, &step, &e, &n, &names));
    _vs_ckpt_conv* conv = (_vs_ckpt_conv*)vs_alloc(ck->w, sizeof *conv * (size_t)(n ? n : 1));
    int nconv = 0;
    vs_result r = conv ? vs_ddp_synchronize(ddp) : vs_set_error(VS_ERR_NOMEM, "vs_ckpt_load_ddp: out of memory");
    // (synchronized: nothing of the DDP's still reads or writes its buffers.) ZeRO-3 between
    // steps: the next step's first gathers were made from the old shards: dropped, made again after
    if (!r && (r = vs_ddp_owned_rewrite(ddp, 1)) != VS_OK) r = vs_set_error(r, "vs_ckpt_load_ddp: %s", vs_last_error());
    if (!r) r = _vs_ckpt_dtype_plan(ck, path, e, n - nextra, conv, &nconv);
    if (!r) r = vs_ckpt_load(ck, path, e, n, NULL);
    for (int i = 0; !r && i < nconv; i++) r = _vs_ckpt_dtype_finish(ck, &conv[i]);
    if (!r) r = vs_ddp_owned_rewrite(ddp, 0);
    if (!r) r = vs_ddp_set_step_count(ddp, step);
    for (int i = 0; !r && i < nextra; i++) extra[i].blob_bytes = e[n - nextra + i].blob_bytes; // blobs' stored sizes
    for (int i = 0; i < nconv; i++) vs_free(ck->w, conv[i].tmp);
    vs_free(ck->w, conv);
    vs_free(ck->w, e);
    vs_free(ck->w, names);
    return r;
}
#else
VS_API vs_result vs_ckpt_save_ddp(vs_ckpt* ck, const char* path, struct vs_ddp* ddp, const char* prefix,
                                  const vs_ckpt_entry* extra, int nextra, const vs_ckpt_save_opts* opts)
{
    (void)ck, (void)path, (void)ddp, (void)prefix, (void)extra, (void)nextra, (void)opts;
    return vs_set_error(VS_ERR_UNAVAILABLE, "vs_ckpt_save_ddp: include vescale_ddp.h before vescale_ckpt.h's implementation");
}
VS_API vs_result vs_ckpt_load_ddp(vs_ckpt* ck, const char* path, struct vs_ddp* ddp, const char* prefix,
                                  vs_ckpt_entry* extra, int nextra)
{
    (void)ck, (void)path, (void)ddp, (void)prefix, (void)extra, (void)nextra;
    return vs_set_error(VS_ERR_UNAVAILABLE, "vs_ckpt_load_ddp: include vescale_ddp.h before vescale_ckpt.h's implementation");
}
#endif

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
