/* fuzz_dims.c - libFuzzer harness for the dim-list parser behind vs_mesh_submesh,
   vs_mesh_group_of and vs_mesh_groups ("DP,TP"), and for dim names
   (vs_mesh_size, vs_mesh_dim_index), on meshes of several shapes.
   Input: mesh (1 byte), mesh rank (1 byte, signed), cap (1 byte), then the text.
   Properties: never crashes; an accepted group has 1..cap distinct members in
   [0, world size) and contains the rank asked about; group_of's group is one of
   vs_mesh_groups' rows; an accepted dim name has its size. */
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

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    fz_in in = {data, size};
    int nm = fz_meshes();
    vs_mesh* m = fz_mesh[fz_take(&in, 1) % (uint64_t)nm];
    int mesh_rank = (int)(int8_t)fz_take(&in, 1);
    int cap = (int)fz_take(&in, 1) % (FZ_RANKS + 2);
    char* text = fz_rest(&in);
    int nranks = vs_mesh_nranks(m);

    int ranks[FZ_RANKS + 2], n = -1;
    for (int i = 0; i < FZ_RANKS + 2; i++) ranks[i] = -5;
    vs_result r = vs_mesh_group_of(m, text, mesh_rank, ranks, cap, &n);
    if (r == VS_OK) {
        FZ_ASSERT(mesh_rank >= 0 && mesh_rank < nranks);
        FZ_ASSERT(n >= 1 && n <= cap && n <= nranks);
        int self = vs_mesh_global_rank(m, mesh_rank), has_self = 0;
        for (int i = 0; i < n; i++) {
            FZ_ASSERT(ranks[i] >= 0 && ranks[i] < FZ_RANKS);
            for (int j = 0; j < i; j++) FZ_ASSERT(ranks[i] != ranks[j]);
            has_self |= ranks[i] == self;
        }
        FZ_ASSERT(has_self);
        for (int i = n; i < FZ_RANKS + 2; i++) FZ_ASSERT(ranks[i] == -5); /* nothing past n */
        int all[FZ_RANKS], ng = 0, gs = 0, row = -1;
        FZ_ASSERT(vs_mesh_groups(m, text, all, FZ_RANKS, &ng, &gs) == VS_OK);
        FZ_ASSERT(gs == n && ng * gs == nranks);
        for (int g = 0; g < ng && row < 0; g++)
            if (!memcmp(all + g * gs, ranks, sizeof(int) * (size_t)n)) row = g;
        FZ_ASSERT(row >= 0);
    } else {
        FZ_ASSERT(vs_last_error()[0] != 0);
    }

    int sz = vs_mesh_size(m, text);
    int di = vs_mesh_dim_index(m, text);
    if (sz >= 0) {
        FZ_ASSERT(di >= 0 && di < vs_mesh_ndims(m));
        /* the name itself (blanks around it may be allowed: "DP, TP") */
        const char* a = text;
        while (*a == ' ' || *a == '\t') a++;
        size_t l = strlen(a);
        while (l && (a[l - 1] == ' ' || a[l - 1] == '\t')) l--;
        const char* name = vs_mesh_dim_name(m, di);
        FZ_ASSERT(strlen(name) == l && !memcmp(name, a, l));
        FZ_ASSERT(sz >= 1 && nranks % sz == 0);
    } else {
        FZ_ASSERT(di < 0);
    }
    free(text);
    return 0;
}
