/* fuzz_ckpt_index.c - libFuzzer harness for vescale_ckpt.h's index parser.
   Input: the bytes of an index.json. Properties: never crashes, leaks or reads
   past the input; an error leaves a message naming the label and the index
   cleared; an accepted index satisfies the checks the loader relies on (pieces
   inside their files, boxes inside shapes, sizes, CRC counts) and writes out to
   text that parses back and writes out the same. */
#define VESCALE_IMPLEMENTATION
#include "vescale_ckpt.h"
#include <stdlib.h>

#define FZ_ASSERT(c)                                                                 \
    do {                                                                             \
        if (!(c)) {                                                                  \
            fprintf(stderr, "fuzz_ckpt_index: %s:%d: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

static void check(const _vs_ckpt_index* ix)
{
    for (int i = 0; i < ix->ne; i++) {
        const _vs_ckpt_ientry* e = &ix->e[i];
        FZ_ASSERT(e->name && e->name[0] && strlen(e->name) < VS_CKPT_NAME_MAX);
        size_t es = vs_dtype_size(e->dtype);
        FZ_ASSERT(es > 0 && e->ndim >= 0 && e->ndim <= VS_TENSOR_MAX_DIMS);
        for (int k = 0; k < e->npieces; k++) {
            const _vs_ckpt_piece* p = &e->pieces[k];
            FZ_ASSERT(p->file >= 0 && p->file < ix->nfiles && p->key);
            FZ_ASSERT(p->data_begin <= p->data_end && p->data_end <= ix->file_bytes[p->file]);
            uint64_t bytes = p->data_end - p->data_begin;
            if (e->kind == VS_CKPT_BLOB) {
                FZ_ASSERT(bytes == e->blob_bytes);
            } else {
                uint64_t n = 1;
                for (int d = 0; d < e->ndim; d++) {
                    FZ_ASSERT(p->off[d] >= 0 && p->box[d] >= 0 && p->off[d] + p->box[d] <= e->shape[d]);
                    n *= (uint64_t)p->box[d];
                }
                if (e->kind == VS_CKPT_RANGE) {
                    FZ_ASSERT(0 <= p->range_begin && p->range_begin <= p->range_end && (uint64_t)p->range_end <= n);
                    n = (uint64_t)(p->range_end - p->range_begin);
                }
                FZ_ASSERT(bytes == n * es);
            }
            if (ix->block) FZ_ASSERT((uint64_t)p->ncrc == (bytes + ix->block - 1) / ix->block && (p->crc || !p->ncrc));
            else FZ_ASSERT(!p->crc && !p->ncrc);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    _vs_ckpt_index ix;
    vs_clear_error();
    vs_result r = _vs_ckpt_index_parse(NULL, "fuzz/index.json", (const char*)data, size, &ix);
    if (r != VS_OK) {
        FZ_ASSERT(r == VS_ERR_INVALID || r == VS_ERR_NOMEM);
        FZ_ASSERT(strstr(vs_last_error(), "fuzz/index.json") != NULL);
        FZ_ASSERT(ix.e == NULL && ix.files == NULL && ix.ne == 0);
        return 0;
    }
    check(&ix);
    _vs_sbuf a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    FZ_ASSERT(_vs_ckpt_index_write(&ix, &a) == VS_OK);
    _vs_ckpt_index ix2;
    if (_vs_ckpt_index_parse(NULL, "again", a.p, a.len, &ix2) != VS_OK) {
        fprintf(stderr, "rewritten index does not parse: %s\n%s\n", vs_last_error(), a.p);
        abort();
    }
    FZ_ASSERT(_vs_ckpt_index_write(&ix2, &b) == VS_OK);
    FZ_ASSERT(a.len == b.len && !memcmp(a.p, b.p, a.len));
    _vs_sb_free(&a);
    _vs_sb_free(&b);
    _vs_ckpt_index_free(NULL, &ix2);
    _vs_ckpt_index_free(NULL, &ix);
    return 0;
}
