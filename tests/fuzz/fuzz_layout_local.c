/* fuzz_layout_local.c - libFuzzer harness for vs_layout_local with arbitrary
   shapes, tensor ranks, placements and mesh ranks on meshes of several shapes.
   Input (big-endian, zeros past the end): mesh (1 byte), ndim (1 byte, signed),
   mesh_rank (2 bytes, signed), per mesh dim: kind, dim (signed), op (1 byte each),
   then up to VS_TENSOR_MAX_DIMS shape entries (8 bytes each, signed, any value).
   Properties: never crashes; on VS_OK every dim has 0 <= offset, 0 <= local and
   offset + local <= global, and equals an independent torch.chunk reference
   computed in 128-bit arithmetic. Violations trap. */
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

/* torch.chunk of n into m pieces, piece i: start and length, exactly. */
static void ref_chunk(__int128 n, int m, int i, __int128* start, __int128* len)
{
    __int128 c = (n + m - 1) / m, s = c * i;
    if (s > n) s = n;
    __int128 e = s + c > n ? n : s + c;
    *start = s;
    *len = e - s;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    fz_in in = {data, size};
    int nm = fz_meshes();
    vs_mesh* m = fz_mesh[fz_take(&in, 1) % (uint64_t)nm];
    int ndim = (int)(int8_t)fz_take(&in, 1);
    int mesh_rank = (int)(int16_t)fz_take(&in, 2);
    vs_layout L;
    memset(&L, 0, sizeof L);
    L.mesh = m;
    int nd = vs_mesh_ndims(m);
    for (int k = 0; k < nd; k++) {
        L.p[k].kind = (vs_placement_kind)(fz_take(&in, 1) % 5); /* 3, 4: invalid kinds */
        L.p[k].dim = (int)(int8_t)fz_take(&in, 1);
        L.p[k].op = (vs_op)(int8_t)fz_take(&in, 1);
    }
    int64_t shape[VS_TENSOR_MAX_DIMS], local[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS];
    for (int d = 0; d < VS_TENSOR_MAX_DIMS; d++) shape[d] = (int64_t)fz_take(&in, 8);
    for (int d = 0; d < VS_TENSOR_MAX_DIMS; d++) local[d] = off[d] = -7;
    vs_result r = vs_layout_local(&L, ndim, shape, mesh_rank, local, off);
    if (r != VS_OK) {
        FZ_ASSERT(vs_last_error()[0] != 0);
        return 0;
    }
    FZ_ASSERT(ndim >= 0 && ndim <= VS_TENSOR_MAX_DIMS);
    FZ_ASSERT(mesh_rank >= 0 && mesh_rank < vs_mesh_nranks(m));
    int coord[VS_MESH_MAX_DIMS];
    FZ_ASSERT(vs_mesh_coord_of(m, mesh_rank, coord) == VS_OK);
    __int128 rs[VS_TENSOR_MAX_DIMS], ro[VS_TENSOR_MAX_DIMS];
    for (int d = 0; d < ndim; d++) rs[d] = shape[d], ro[d] = 0;
    for (int k = 0; k < nd; k++) {
        if (L.p[k].kind != VS_PLACE_SHARD) continue;
        int d = L.p[k].dim;
        FZ_ASSERT(d >= 0 && d < ndim);
        __int128 s, l;
        ref_chunk(rs[d], vs_mesh_size(m, vs_mesh_dim_name(m, k)), coord[k], &s, &l);
        ro[d] += s;
        rs[d] = l;
    }
    for (int d = 0; d < ndim; d++) {
        FZ_ASSERT(shape[d] >= 0);
        FZ_ASSERT(off[d] >= 0 && local[d] >= 0);
        FZ_ASSERT(local[d] <= shape[d] - off[d]);
        FZ_ASSERT(local[d] == rs[d] && off[d] == ro[d]);
    }
    for (int d = ndim; d < VS_TENSOR_MAX_DIMS; d++) FZ_ASSERT(local[d] == -7 && off[d] == -7); /* no overrun */
    return 0;
}
