/* fuzz_layout_parse.c - libFuzzer harness for vs_layout_parse.
   Input: one byte picks a mesh (fuzz_mesh.h), the rest is the layout text.
   Properties: never crashes; an accepted layout passes vs_layout_check (a tensor
   of VS_TENSOR_MAX_DIMS dims), and formats to text that parses back to the same
   placements. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "fuzz_mesh.h"

int LLVMFuzzerInitialize(int* argc, char*** argv)
{
    (void)argc;
    (void)argv;
    fz_meshes();
    return 0;
}

static int same_layout(const vs_layout* a, const vs_layout* b, int ndims)
{
    for (int k = 0; k < ndims; k++) {
        if (a->p[k].kind != b->p[k].kind) return 0;
        if (a->p[k].kind == VS_PLACE_SHARD && a->p[k].dim != b->p[k].dim) return 0;
        if (a->p[k].kind == VS_PLACE_PARTIAL && a->p[k].op != b->p[k].op) return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    fz_in in = {data, size};
    int nm = fz_meshes();
    vs_mesh* m = fz_mesh[fz_take(&in, 1) % (uint64_t)nm];
    char* text = fz_rest(&in);
    vs_layout L;
    memset(&L, 0, sizeof L);
    if (vs_layout_parse(m, text, &L) == VS_OK) {
        int nd = vs_mesh_ndims(m);
        FZ_ASSERT(L.mesh == m);
        FZ_ASSERT(vs_layout_check(&L, VS_TENSOR_MAX_DIMS) == VS_OK);
        char buf[512];
        int need = vs_layout_format(&L, buf, sizeof buf);
        FZ_ASSERT(need > 0 && (size_t)need < sizeof buf && strlen(buf) == (size_t)need);
        vs_layout again;
        memset(&again, 0, sizeof again);
        FZ_ASSERT(vs_layout_parse(m, buf, &again) == VS_OK);
        FZ_ASSERT(same_layout(&L, &again, nd));
    } else {
        FZ_ASSERT(vs_last_error()[0] != 0); /* an error says why */
    }
    free(text);
    return 0;
}
