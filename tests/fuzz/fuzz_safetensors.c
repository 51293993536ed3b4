/* fuzz_safetensors.c - libFuzzer harness for vescale_ckpt.h's safetensors header
   parser. Input: a whole file (8-byte little-endian length N, N bytes of JSON,
   data); when N does not fit, the rest of the input is the header of a file of
   a size taken from the length. Properties: never crashes, leaks or reads past
   the input; errors name the file; accepted tensors are contiguous from 0 in
   file order with dtype x shape bytes each, inside the file; and the header
   _vs_st_header builds from them parses back to the same tensors. */
#define VESCALE_IMPLEMENTATION
#include "vescale_ckpt.h"
#include <stdlib.h>

#define FZ_ASSERT(c)                                                                 \
    do {                                                                             \
        if (!(c)) {                                                                  \
            fprintf(stderr, "fuzz_safetensors: %s:%d: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    if (size < 8) return 0;
    uint64_t n = 0;
    for (int k = 0; k < 8; k++) n |= (uint64_t)data[k] << (8 * k);
    const char* json = (const char*)data + 8;
    size_t jl = size - 8;
    uint64_t file_size = size;
    if (n <= jl) jl = (size_t)n;
    else file_size = n; // any claimed size, the header being the rest
    _vs_st_tensor* t = NULL;
    int nt = 0;
    char* arena = NULL;
    vs_clear_error();
    vs_result r = _vs_st_parse(NULL, "fuzz.safetensors", json, jl, file_size, &t, &nt, &arena);
    if (r != VS_OK) {
        FZ_ASSERT(r == VS_ERR_INVALID || r == VS_ERR_NOMEM);
        FZ_ASSERT(strstr(vs_last_error(), "fuzz.safetensors") != NULL);
        FZ_ASSERT(!t && !arena && !nt);
        return 0;
    }
    uint64_t at = 0;
    for (int i = 0; i < nt; i++) {
        uint64_t b = vs_dtype_size(t[i].dtype);
        FZ_ASSERT(b && t[i].ndim >= 0 && t[i].ndim <= VS_TENSOR_MAX_DIMS && t[i].begin == at);
        for (int d = 0; d < t[i].ndim; d++) b *= (uint64_t)t[i].shape[d];
        FZ_ASSERT(t[i].end - t[i].begin == b);
        at = t[i].end;
    }
    FZ_ASSERT(at == file_size - 8 - jl);
    char* h = NULL;
    size_t hl = 0;
    if (_vs_st_header(NULL, t, nt, "{\"format\":\"vescale\"}", &h, &hl) != VS_OK) {
        // only a header past the format's 100 MB may be refused
        FZ_ASSERT(strstr(vs_last_error(), "100 MB") != NULL);
    } else {
        FZ_ASSERT(hl % 8 == 0);
        _vs_st_tensor* t2 = NULL;
        int n2 = 0;
        char* a2 = NULL;
        FZ_ASSERT(_vs_st_parse(NULL, "rebuilt", h + 8, hl - 8, hl + at, &t2, &n2, &a2) == VS_OK);
        FZ_ASSERT(n2 == nt);
        for (int i = 0; i < nt; i++)
            FZ_ASSERT(!strcmp(t[i].key, t2[i].key) && t[i].dtype == t2[i].dtype && t[i].ndim == t2[i].ndim &&
                      !memcmp(t[i].shape, t2[i].shape, sizeof t[i].shape) && t[i].begin == t2[i].begin &&
                      t[i].end == t2[i].end);
        vs_free(NULL, t2);
        vs_free(NULL, a2);
        vs_free(NULL, h);
    }
    vs_free(NULL, t);
    vs_free(NULL, arena);
    return 0;
}
