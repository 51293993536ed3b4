/* ckpt_handmade.h - checkpoints written by hand with vescale_ckpt.h's format
   functions (_vs_st_header, _vs_crc32c, _vs_ckpt_index_write), for the format's
   tests and the tool's (tests/ckpt_tool.sh), independent of vs_ckpt_save.

   hm_sample(dir, variant) writes a checkpoint of tensor, range and blob entries
   (uneven boxes, several files, a 0-dim and an empty tensor, 64-byte CRC blocks)
   and, beside it in dir/expect/, each entry's full tensor as raw bytes
   (<name>.bin). Variant 1 differs from 0 in one element of "w1", a missing
   "plan", a different shape of "ids" and a different dtype of "bias"; variant 2
   lacks one box of "w1" (the pieces do not cover it).
   Include after vescale_ckpt.h with the implementation. */
#ifndef CKPT_HANDMADE_H
#define CKPT_HANDMADE_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct hm_piece {
    int file;
    int64_t off[VS_TENSOR_MAX_DIMS], box[VS_TENSOR_MAX_DIMS];
    int64_t rb, re; // range pieces
} hm_piece;

typedef struct hm_entry {
    const char* name;
    vs_ckpt_kind kind;
    vs_dtype dt;
    int ndim;
    int64_t shape[VS_TENSOR_MAX_DIMS];
    const char* layout;
    const void* full; // the whole tensor, or the blob
    size_t blob_bytes;
    int np;
    hm_piece p[8];
} hm_entry;

static int64_t hm_numel(int nd, const int64_t* s)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= s[d];
    return n;
}

/* The box's elements of a full row-major tensor, row-major, into out. */
static void hm_gather(const hm_entry* e, const hm_piece* p, unsigned char* out)
{
    size_t es = vs_dtype_size(e->dt);
    int64_t n = hm_numel(e->ndim, p->box), idx[VS_TENSOR_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t lin = 0;
        for (int d = 0; d < e->ndim; d++) lin = lin * e->shape[d] + p->off[d] + idx[d];
        memcpy(out + (size_t)k * es, (const unsigned char*)e->full + (size_t)lin * es, es);
        for (int d = e->ndim - 1; d >= 0; d--) {
            if (++idx[d] < p->box[d]) break;
            idx[d] = 0;
        }
    }
}

static int hm_write_file(const char* path, const void* a, size_t na, const void* b, size_t nb)
{
    FILE* f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(a, 1, na, f) == na && (!nb || fwrite(b, 1, nb, f) == nb);
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Writes entries e[0..n) into dir (nfiles shard files, CRC blocks of `block`
   bytes, 0: none). 0 on success. */
static int hm_write(const char* dir, const hm_entry* e, int n, int nfiles, uint64_t block)
{
    _vs_ckpt_index ix;
    memset(&ix, 0, sizeof ix);
    ix.mesh_ndims = 2;
    ix.mesh_shape[0] = 2, ix.mesh_shape[1] = nfiles > 2 ? (nfiles + 1) / 2 : 1;
    strcpy(ix.mesh_dims[0], "DP");
    strcpy(ix.mesh_dims[1], "TP");
    ix.block = block;
    ix.nfiles = nfiles;
    ix.files = (char**)calloc((size_t)nfiles, sizeof(char*));
    ix.file_bytes = (uint64_t*)calloc((size_t)nfiles, sizeof(uint64_t));
    ix.e = (_vs_ckpt_ientry*)calloc((size_t)n, sizeof *ix.e);
    ix.ne = n;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        _vs_ckpt_ientry* ie = &ix.e[i];
        ie->name = strdup(e[i].name);
        ie->kind = e[i].kind;
        ie->dtype = e[i].kind == VS_CKPT_BLOB ? VS_U8 : e[i].dt;
        ie->ndim = e[i].kind == VS_CKPT_BLOB ? 1 : e[i].ndim;
        memcpy(ie->shape, e[i].shape, sizeof ie->shape);
        if (e[i].kind == VS_CKPT_BLOB) ie->shape[0] = (int64_t)e[i].blob_bytes;
        ie->blob_bytes = e[i].blob_bytes;
        ie->layout = e[i].layout ? strdup(e[i].layout) : NULL;
        ie->npieces = e[i].np;
        ie->pieces = (_vs_ckpt_piece*)calloc((size_t)e[i].np + 1, sizeof(_vs_ckpt_piece));
    }
    for (int f = 0; f < nfiles && !rc; f++) {
        _vs_st_tensor t[64];
        unsigned char* data[64];
        size_t len[64];
        int nt = 0;
        uint64_t at = 0;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < e[i].np; k++) {
                const hm_piece* p = &e[i].p[k];
                if (p->file != f) continue;
                _vs_ckpt_piece* ip = &ix.e[i].pieces[k];
                char key[300];
                snprintf(key, sizeof key, "%s#%d", e[i].name, k);
                ip->key = strdup(key);
                ip->file = f;
                size_t es = vs_dtype_size(ix.e[i].dtype);
                _vs_st_tensor* s = &t[nt];
                memset(s, 0, sizeof *s);
                s->key = ip->key;
                s->dtype = ix.e[i].dtype;
                s->ndim = 1;
                if (e[i].kind == VS_CKPT_BLOB) {
                    len[nt] = e[i].blob_bytes;
                    data[nt] = (unsigned char*)malloc(len[nt] + 1);
                    memcpy(data[nt], e[i].full, len[nt]);
                    s->shape[0] = (int64_t)len[nt];
                } else {
                    memcpy(ip->off, p->off, sizeof ip->off);
                    memcpy(ip->box, p->box, sizeof ip->box);
                    int64_t nb = hm_numel(e[i].ndim, p->box);
                    unsigned char* boxb = (unsigned char*)malloc((size_t)nb * es + 1);
                    hm_gather(&e[i], p, boxb);
                    if (e[i].kind == VS_CKPT_RANGE) {
                        ip->range_begin = p->rb, ip->range_end = p->re;
                        len[nt] = (size_t)(p->re - p->rb) * es;
                        data[nt] = (unsigned char*)malloc(len[nt] + 1);
                        memcpy(data[nt], boxb + (size_t)p->rb * es, len[nt]);
                        s->shape[0] = p->re - p->rb;
                        free(boxb);
                    } else {
                        len[nt] = (size_t)nb * es;
                        data[nt] = boxb;
                        s->ndim = e[i].ndim;
                        memcpy(s->shape, p->box, sizeof s->shape);
                    }
                }
                s->begin = at;
                s->end = at + len[nt];
                at = s->end;
                if (block) {
                    ip->ncrc = (int)((len[nt] + block - 1) / block);
                    ip->crc = (uint32_t*)calloc((size_t)ip->ncrc + 1, sizeof(uint32_t));
                    for (int c = 0; c < ip->ncrc; c++) {
                        size_t b0 = (size_t)c * block, b1 = b0 + block < len[nt] ? b0 + block : len[nt];
                        ip->crc[c] = _vs_crc32c(0, data[nt] + b0, b1 - b0);
                    }
                }
                nt++;
            }
        char meta[64];
        snprintf(meta, sizeof meta, "{\"format\":\"vescale\",\"rank\":\"%d\"}", f);
        char* hdr = NULL;
        size_t hl = 0;
        if (_vs_st_header(NULL, t, nt, meta, &hdr, &hl) != VS_OK) {
            fprintf(stderr, "hm_write: %s\n", vs_last_error());
            rc = -1;
        }
        size_t total = 0;
        for (int j = 0; j < nt; j++) total += len[j];
        unsigned char* all = (unsigned char*)malloc(total + 1);
        size_t o = 0;
        for (int j = 0; j < nt; j++) memcpy(all + o, data[j], len[j]), o += len[j], free(data[j]);
        for (int i = 0; i < n; i++)
            for (int k = 0; k < e[i].np; k++)
                if (e[i].p[k].file == f) {
                    const _vs_st_tensor* s = NULL;
                    for (int j = 0; j < nt; j++)
                        if (!strcmp(t[j].key, ix.e[i].pieces[k].key)) s = &t[j];
                    ix.e[i].pieces[k].data_begin = hl + s->begin;
                    ix.e[i].pieces[k].data_end = hl + s->end;
                }
        char name[64], path[1024];
        snprintf(name, sizeof name, "shard-%05d.safetensors", f);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        ix.files[f] = strdup(name);
        ix.file_bytes[f] = hl + total;
        if (!rc && hm_write_file(path, hdr, hl, all, total)) rc = -1;
        free(all);
        vs_free(NULL, hdr);
    }
    _vs_sbuf sb;
    memset(&sb, 0, sizeof sb);
    if (!rc && _vs_ckpt_index_write(&ix, &sb) != VS_OK) rc = -1;
    if (!rc) {
        char path[1024];
        snprintf(path, sizeof path, "%s/index.json", dir);
        rc = hm_write_file(path, sb.p, sb.len, NULL, 0);
    }
    _vs_sb_free(&sb);
    _vs_ckpt_index_free(NULL, &ix); // built with malloc: the NULL world's allocator
    return rc;
}

/* Element k of a sample tensor of dtype dt, seed s. */
static void hm_value(vs_dtype dt, int64_t k, int s, void* out)
{
    double v = (double)((k * 37 + s * 11) % 201 - 100) * 0.25;
    switch (dt) {
    case VS_F32: { float x = (float)v; memcpy(out, &x, 4); break; }
    case VS_F64: { double x = v / 3.0; memcpy(out, &x, 8); break; }
    case VS_F16: { uint16_t x = vs_f32_to_f16((float)v); memcpy(out, &x, 2); break; }
    case VS_BF16: { uint16_t x = vs_f32_to_bf16((float)v); memcpy(out, &x, 2); break; }
    case VS_I32: { int32_t x = (int32_t)(k * 1000003 % 65537) - 30000; memcpy(out, &x, 4); break; }
    case VS_I64: { int64_t x = (k - 3) * 4000000000LL + s; memcpy(out, &x, 8); break; }
    default: { uint8_t x = (uint8_t)(k * 7 + (int64_t)s); memcpy(out, &x, 1); break; }
    }
}

static void* hm_full(vs_dtype dt, int nd, const int64_t* shape, int seed)
{
    int64_t n = hm_numel(nd, shape);
    size_t es = vs_dtype_size(dt);
    unsigned char* p = (unsigned char*)malloc((size_t)n * es + 1);
    for (int64_t k = 0; k < n; k++) hm_value(dt, k, seed, p + (size_t)k * es);
    return p;
}

static hm_piece hm_box2(int file, int64_t o0, int64_t o1, int64_t b0, int64_t b1)
{
    hm_piece p;
    memset(&p, 0, sizeof p);
    p.file = file, p.off[0] = o0, p.off[1] = o1, p.box[0] = b0, p.box[1] = b1;
    return p;
}

#define HM_NSAMPLE 10
/* The sample checkpoint (see the top); its entries into e[HM_NSAMPLE] (free the
   `full` buffers with hm_free). */
static int hm_sample_entries(hm_entry* e, int variant)
{
    memset(e, 0, HM_NSAMPLE * sizeof *e);
    int n = 0;
    // w1: f32 [6, 5] in four uneven boxes over two files
    hm_entry* x = &e[n++];
    x->name = "w1", x->kind = VS_CKPT_TENSOR, x->dt = VS_F32, x->ndim = 2, x->shape[0] = 6, x->shape[1] = 5;
    x->layout = "[Shard(0), Shard(1)]";
    x->full = hm_full(x->dt, 2, x->shape, 1);
    if (variant == 1) ((float*)x->full)[13] += 1.0f; // element (2, 3)
    x->np = variant == 2 ? 3 : 4; // variant 2: the last box is missing
    x->p[0] = hm_box2(0, 0, 0, 3, 3), x->p[1] = hm_box2(1, 0, 3, 3, 2);
    x->p[2] = hm_box2(1, 3, 0, 3, 3), x->p[3] = hm_box2(0, 3, 3, 3, 2);
    // emb: bf16 [4, 40] sharded on dim 1 (pieces over several CRC blocks)
    x = &e[n++];
    x->name = "emb", x->kind = VS_CKPT_TENSOR, x->dt = VS_BF16, x->ndim = 2, x->shape[0] = 4, x->shape[1] = 40;
    x->layout = "[Replicate, Shard(1)]";
    x->full = hm_full(x->dt, 2, x->shape, 2);
    x->np = 2;
    x->p[0] = hm_box2(2, 0, 0, 4, 20), x->p[1] = hm_box2(1, 0, 20, 4, 20);
    // adam.m: f32 [5, 4] as one box in three ranges (ZeRO over a replicated tensor)
    x = &e[n++];
    x->name = "adam.m", x->kind = VS_CKPT_RANGE, x->dt = VS_F32, x->ndim = 2, x->shape[0] = 5, x->shape[1] = 4;
    x->layout = "[Replicate, Replicate]";
    x->full = hm_full(x->dt, 2, x->shape, 3);
    x->np = 3;
    x->p[0] = hm_box2(0, 0, 0, 5, 4), x->p[1] = x->p[0], x->p[2] = x->p[0];
    x->p[0].rb = 0, x->p[0].re = 7, x->p[1].rb = 7, x->p[1].re = 14, x->p[2].rb = 14, x->p[2].re = 20;
    x->p[1].file = 1, x->p[2].file = 2;
    // adam.v: f64 [4, 3], two row boxes, each in two ranges
    x = &e[n++];
    x->name = "adam.v", x->kind = VS_CKPT_RANGE, x->dt = VS_F64, x->ndim = 2, x->shape[0] = 4, x->shape[1] = 3;
    x->layout = "[Shard(0), Replicate]";
    x->full = hm_full(x->dt, 2, x->shape, 4);
    x->np = 4;
    x->p[0] = hm_box2(0, 0, 0, 2, 3), x->p[1] = x->p[0], x->p[2] = hm_box2(2, 2, 0, 2, 3), x->p[3] = x->p[2];
    x->p[0].rb = 0, x->p[0].re = 4, x->p[1].rb = 4, x->p[1].re = 6, x->p[1].file = 1;
    x->p[2].rb = 0, x->p[2].re = 1, x->p[3].rb = 1, x->p[3].re = 6, x->p[3].file = 0;
    // ids: i64 [7] (variant 1: [8])
    x = &e[n++];
    x->name = "ids", x->kind = VS_CKPT_TENSOR, x->dt = VS_I64, x->ndim = 1, x->shape[0] = variant == 1 ? 8 : 7;
    x->full = hm_full(x->dt, 1, x->shape, 5);
    x->np = 1;
    x->p[0].file = 2, x->p[0].box[0] = x->shape[0];
    // bias: f16 [3] (variant 1: i32), 0-dim scale f32 [], empty f16 [0, 3]
    x = &e[n++];
    x->name = "bias", x->kind = VS_CKPT_TENSOR, x->dt = variant == 1 ? VS_I32 : VS_F16, x->ndim = 1, x->shape[0] = 3;
    x->full = hm_full(x->dt, 1, x->shape, 6);
    x->np = 1;
    x->p[0].file = 0, x->p[0].box[0] = 3;
    x = &e[n++];
    x->name = "scale", x->kind = VS_CKPT_TENSOR, x->dt = VS_F32, x->ndim = 0;
    x->full = hm_full(x->dt, 0, x->shape, 7);
    x->np = 1;
    x = &e[n++];
    x->name = "empty", x->kind = VS_CKPT_TENSOR, x->dt = VS_F16, x->ndim = 2, x->shape[0] = 0, x->shape[1] = 3;
    x->full = hm_full(x->dt, 2, x->shape, 8);
    x->np = 0;
    // blobs: step (8 bytes), plan text (not in variant 1)
    x = &e[n++];
    x->name = "step", x->kind = VS_CKPT_BLOB;
    x->blob_bytes = 8;
    x->full = hm_full(VS_U8, 1, (const int64_t[]){8}, 9);
    x->np = 1;
    x->p[0].file = 1;
    if (variant != 1) {
        x = &e[n++];
        x->name = "plan", x->kind = VS_CKPT_BLOB;
        static const char plan[] = "pipeline: 1F1B, 4 stages\n";
        x->blob_bytes = sizeof plan - 1;
        char* c = (char*)malloc(sizeof plan);
        memcpy(c, plan, sizeof plan);
        x->full = c;
        x->np = 1;
        x->p[0].file = 2;
    }
    return n;
}

static void hm_free(hm_entry* e, int n)
{
    for (int i = 0; i < n; i++) free((void*)e[i].full);
}

/* dir/ (created) gets the checkpoint, dir/expect/<name>.bin the full tensors. */
static int hm_sample(const char* dir, int variant)
{
    hm_entry e[HM_NSAMPLE];
    int n = hm_sample_entries(e, variant);
    mkdir(dir, 0777);
    int rc = hm_write(dir, e, n, 3, 64);
    char path[1024];
    snprintf(path, sizeof path, "%s/expect", dir);
    mkdir(path, 0777);
    for (int i = 0; i < n && !rc; i++) {
        size_t bytes = e[i].kind == VS_CKPT_BLOB ? e[i].blob_bytes
                                                  : (size_t)hm_numel(e[i].ndim, e[i].shape) * vs_dtype_size(e[i].dt);
        snprintf(path, sizeof path, "%s/expect/%s.bin", dir, e[i].name);
        rc = hm_write_file(path, e[i].full, bytes, NULL, 0);
    }
    hm_free(e, n);
    return rc;
}
#endif
