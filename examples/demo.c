/* demo.c - what `make run` does until the trainer exists: 8 thread ranks build a
   2x2x2 (PP, DP, TP) mesh, print its groups, and run one collective on each kind
   of group, checking the result against the formula. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"

#include <stdio.h>
#include <string.h>

static void print_groups(vs_mesh* m, const char* dims)
{
    int ranks[64], ng = 0, gs = 0;
    if (vs_mesh_groups(m, dims, ranks, 64, &ng, &gs) != VS_OK) return;
    printf("  %-6s groups:", dims);
    for (int g = 0; g < ng; g++) {
        printf(" [");
        for (int j = 0; j < gs; j++) printf("%s%d", j ? "," : "", ranks[g * gs + j]);
        printf("]");
    }
    printf("\n");
}

static int rank_main(vs_world* w, void* arg)
{
    int* failures = (int*)arg;
    vs_mesh* mesh = NULL;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    md.shape[0] = md.shape[1] = md.shape[2] = 2; // PP, DP, TP (TP innermost)
    vs_result r = vs_mesh_init(w, &md, &mesh);
    if (r) {
        fprintf(stderr, "mesh: %s\n", vs_last_error());
        return r;
    }
    int me = vs_world_rank(w);
    if (me == 0) {
        char d[128];
        vs_mesh_describe(mesh, d, sizeof d);
        printf("mesh %s over %d thread ranks\n", d, vs_world_size(w));
        print_groups(mesh, "PP");
        print_groups(mesh, "DP");
        print_groups(mesh, "TP");
        print_groups(mesh, "DP,TP");
    }
    const char* dims[] = {"PP", "DP", "TP", "DP,TP"};
    for (int i = 0; i < 4; i++) {
        vs_mesh* sub = NULL;
        r = vs_mesh_submesh(mesh, dims[i], &sub);
        if (r) break;
        // sum of the members' global ranks, against the member list
        int32_t v = me, sum = 0;
        r = vs_all_reduce(vs_mesh_comm(sub), &v, &sum, 1, VS_I32, VS_OP_SUM, NULL);
        if (r) break;
        int32_t expect = 0;
        for (int k = 0; k < vs_mesh_nranks(sub); k++) expect += vs_mesh_global_rank(sub, k);
        if (sum != expect) __atomic_add_fetch(failures, 1, __ATOMIC_SEQ_CST);
        if (me == 0) printf("  all-reduce over %-5s on rank 0: %d (expected %d)\n", dims[i], sum, expect);
        vs_barrier(vs_world_comm(w), NULL);
    }
    int next = -1;
    if (!r) r = vs_mesh_neighbor(mesh, "PP", +1, 0, &next, NULL);
    if (!r && me == 0) printf("  rank 0's next pipeline stage is rank %d\n", next);
    if (r) fprintf(stderr, "rank %d: %s\n", me, vs_last_error());
    vs_mesh_free(mesh);
    return r;
}

int main(void)
{
    int failures = 0;
    vs_result r = vs_launch(8, rank_main, &failures);
    if (r || failures) {
        fprintf(stderr, "demo failed: %s (%d wrong results)\n", vs_result_string(r), failures);
        return 1;
    }
    printf("demo ok\n");
    return 0;
}
