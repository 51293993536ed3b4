/* test_lifetimes.c - handles that depend on others (issue 8, point 8): a submesh
   is freed by its parent only; a mesh with a live dependent refuses to go; a work
   handle outlives its communicator; a second free or wait is an error, not a use
   after free. Run under ASan (make test-asan) this also proves nothing dangles. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vs_test.h"

#include <stdlib.h>
#include <string.h>


static int submesh_rank(vs_world* w, void* arg)
{
    (void)arg;
    vs_mesh* mesh = NULL;
    vs_mesh* dp = NULL;
    VT_OK(vs_mesh_init(w, &(vs_mesh_desc){.shape = {2, 2}}, &mesh));
    VT_OK(vs_mesh_submesh(mesh, "DP", &dp));
    VT_ERR(vs_mesh_free(dp), VS_ERR_STATE, "submesh");
    float x = 1;
    VT_OK(vs_all_reduce(vs_mesh_comm(dp), &x, &x, 1, VS_F32, VS_OP_SUM, NULL)); // still usable
    VT_CHECK(x == 2, "sum over DP %g", (double)x);
    // a dependent retains the mesh (through a submesh): free is refused until released
    VT_OK(vs_mesh_retain(dp));
    VT_ERR(vs_mesh_free(mesh), VS_ERR_STATE, "still alive");
    // which handles those are (a user's checkpointer was told "DDP, ..." and about training states)
    VT_EXPECT_ERR(vs_mesh_free(mesh), VS_ERR_STATE, "a vs_ddp, vs_pipe or vs_ckpt", "free them first");
    VT_OK(vs_mesh_release(dp));
    VT_ERR(vs_mesh_release(mesh), VS_ERR_STATE, "no vs_mesh_retain");
    VT_OK(vs_mesh_free(mesh));
    return 0;
}

static int comm_rank(vs_world* w, void* arg)
{
    (void)arg;
    int me = vs_world_rank(w);
    vs_comm* sc = NULL;
    VT_OK(vs_comm_split(vs_world_comm(w), me % 2, me, &sc));
    // an async all-reduce whose handle outlives the communicator
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)(me + i);
    vs_work* wk = NULL;
    VT_OK(vs_all_reduce(sc, x, x, 64, VS_F32, VS_OP_SUM, &wk));
    VT_OK(vs_comm_free(sc)); // completes the operation, detaches the handle
    VT_OK(vs_wait(wk));
    int peer = me ^ 2; // same color: me % 2
    for (int i = 0; i < 64; i++) VT_CHECK(x[i] == (float)(me + peer + 2 * i), "x[%d] = %g", i, (double)x[i]);
    // a second free, and any use of the freed communicator, is an error
    VT_ERR(vs_comm_free(sc), VS_ERR_STATE, "already freed");
    VT_ERR(vs_all_reduce(sc, x, x, 4, VS_F32, VS_OP_SUM, NULL), VS_ERR_STATE, "already freed");
    VT_ERR(vs_barrier(sc, NULL), VS_ERR_STATE, "already freed");
    VT_ERR(vs_comm_set_timeout(sc, 1), VS_ERR_STATE, "already freed");
    // a second wait on a handle is an error
    VT_OK(vs_all_reduce(vs_world_comm(w), x, x, 4, VS_F32, VS_OP_SUM, &wk));
    VT_OK(vs_wait(wk));
    VT_ERR(vs_wait(wk), VS_ERR_STATE, "already freed");
    int done = 0;
    VT_ERR(vs_test(wk, &done), VS_ERR_STATE, "already freed");
    // something that is not a handle at all
    union {
        char bytes[1024];
        double align;
    } junk;
    memset(junk.bytes, 0, sizeof junk.bytes);
    VT_ERR(vs_wait((vs_work*)(void*)junk.bytes), VS_ERR_INVALID, "not a live work");
    VT_ERR(vs_barrier((vs_comm*)(void*)junk.bytes, NULL), VS_ERR_INVALID, "not a live comm");
    // the world's own communicator is not the caller's to free
    VT_ERR(vs_comm_free(vs_world_comm(w)), VS_ERR_INVALID, "world");
    return 0;
}

/* Many waited handles and freed communicators: the quarantine stays bounded and
   releases everything (ASan's leak check). */
static int churn_rank(vs_world* w, void* arg)
{
    (void)arg;
    float x = 1;
    for (int i = 0; i < 100; i++) {
        vs_work* wk = NULL;
        VT_OK(vs_all_reduce(vs_world_comm(w), &x, &x, 1, VS_F32, VS_OP_MAX, &wk));
        VT_OK(vs_wait(wk));
    }
    for (int i = 0; i < 40; i++) {
        vs_comm* sc = NULL;
        VT_OK(vs_comm_split(vs_world_comm(w), 0, 0, &sc));
        VT_OK(vs_comm_free(sc));
    }
    return 0;
}

int main(void)
{
    VT_CASE("lifetimes/submesh_owned_by_parent", VT_OK(vs_launch(4, submesh_rank, NULL)));
    VT_CASE("lifetimes/comm_and_work_handles", VT_OK(vs_launch(4, comm_rank, NULL)));
    VT_CASE("lifetimes/quarantine_bounded", VT_OK(vs_launch(2, churn_rank, NULL)));
    return vt_summary();
}
