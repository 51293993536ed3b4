/* pipe_mlp.c - a pipeline trainer to copy: an 8-layer MLP cut into 4 stages x 2
   chunks on 4 thread ranks, trained with each built-in schedule in turn, next to
   the same model trained on one rank. The program fails (exit 1) unless every
   schedule's loss, at every step, and every final weight equal the one-rank run
   bit for bit.

   The model, with x [R, D] a microbatch and t [R, D] its target:
       h0 = tanh(x W0 + b0), h1 = tanh(h0 W1 + b1), ..., h7 = tanh(h6 W7 + b7)
       h5 also takes h1 as a skip connection: h5 = tanh(h4 W5 + b5 + h1)
       loss = mean((h7 - t)^2)
   9 units: 8 layers and the loss. Each layer gives its backward in two parts
   (input gradient B, weight gradient W), which the zero-bubble schedules run
   apart. The optimizer (SGD with momentum) runs in the on_step hook, on the
   stage's own layers.

   Build and run:
       cc -std=c99 -O2 -I. examples/pipe_mlp.c -o pipe_mlp -lpthread -lm && ./pipe_mlp
       ./pipe_mlp zbv       (one schedule: gpipe 1f1b interleaved zbh1 zbv dualpipev) */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { R = 4, D = 16, NL = 8, NU = NL + 1, P = 4, M = 8, STEPS = 5 };

typedef struct layer {
    float w[D * D], b[D];   /* parameters */
    float gw[D * D], gb[D]; /* their gradients, summed over microbatches */
    float vw[D * D], vb[D]; /* momentum */
} layer;

typedef struct model { /* one per rank: every rank keeps all layers, uses its stage's */
    layer l[NL];
    vs_pipe_unit units[NU];
    const vs_pipe_plan* plan;
    int stage;
    int step;
} model;

/* Deterministic data: microbatch mb of step s. */
static float datum(int s, int mb, int i, int which) { return sinf(0.37f * (float)(s * 977 + mb * 131 + i) + (float)which); }

static vs_result load(vs_pipe_call* c)
{
    const model* m = (const model*)c->user;
    int target = !strcmp(c->out[0].name, "target");
    int64_t shape[2] = {R, D};
    float* v;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 2, shape, (void**)&v);
    if (r) return r;
    for (int i = 0; i < R * D; i++) v[i] = target ? 0.5f * datum(m->step, c->mb, i, 1) : datum(m->step, c->mb, i, 0);
    return VS_OK;
}

static vs_result layer_fwd(vs_pipe_call* c)
{
    const layer* l = (const layer*)c->user;
    const float* x = (const float*)c->in[0].data;
    const float* skip = c->n_in > 1 ? (const float*)c->in[1].data : NULL;
    int64_t shape[2] = {R, D};
    float* y;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 2, shape, (void**)&y);
    if (r) return r;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < D; j++) {
            float a = l->b[j];
            for (int k = 0; k < D; k++) a += x[i * D + k] * l->w[k * D + j];
            if (skip) a += skip[i * D + j];
            y[i * D + j] = tanhf(a);
        }
    return VS_OK;
}

/* d(loss)/d(pre-activation) of element (i, j) */
static float layer_da(const vs_pipe_call* c, int e)
{
    const float y = ((const float*)c->out[0].data)[e];
    return ((const float*)c->out[0].grad)[e] * (1.0f - y * y);
}

static vs_result layer_bwd_input(vs_pipe_call* c) /* B: input gradients (added) */
{
    const layer* l = (const layer*)c->user;
    float* gx = (float*)c->in[0].grad; /* NULL for a data input */
    float* gskip = c->n_in > 1 ? (float*)c->in[1].grad : NULL;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < D; j++) {
            float da = layer_da(c, i * D + j);
            if (gx)
                for (int k = 0; k < D; k++) gx[i * D + k] += da * l->w[k * D + j];
            if (gskip) gskip[i * D + j] += da;
        }
    return VS_OK;
}

static vs_result layer_bwd_weight(vs_pipe_call* c) /* W: parameter gradients (added) */
{
    layer* l = (layer*)c->user;
    const float* x = (const float*)c->in[0].data;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < D; j++) {
            float da = layer_da(c, i * D + j);
            for (int k = 0; k < D; k++) l->gw[k * D + j] += da * x[i * D + k];
            l->gb[j] += da;
        }
    return VS_OK;
}

static vs_result loss_fwd(vs_pipe_call* c)
{
    const float* y = (const float*)c->in[0].data;
    const float* t = (const float*)c->in[1].data;
    float* loss;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 0, NULL, (void**)&loss);
    if (r) return r;
    float s = 0;
    for (int i = 0; i < R * D; i++) s += (y[i] - t[i]) * (y[i] - t[i]);
    *loss = s / (float)(R * D);
    return VS_OK;
}

static vs_result loss_bwd(vs_pipe_call* c)
{
    const float* y = (const float*)c->in[0].data;
    const float* t = (const float*)c->in[1].data;
    float g = *(const float*)c->out[0].grad; /* 1/M: the minibatch loss is the mean */
    float* gy = (float*)c->in[0].grad;
    for (int i = 0; i < R * D; i++) gy[i] += g * 2.0f * (y[i] - t[i]) / (float)(R * D);
    return VS_OK;
}

/* The optimizer, on the layers of this rank's stage; then the gradients are zeroed. */
static vs_result sgd_step(void* user)
{
    model* m = (model*)user;
    for (int k = 0; k < m->plan->nchunks; k++) {
        if (m->plan->chunk_stage[k] != m->stage) continue;
        for (int u = m->plan->first_unit[k]; u < m->plan->first_unit[k + 1] && u < NL; u++) {
            layer* l = &m->l[u];
            for (int i = 0; i < D * D; i++) l->vw[i] = 0.9f * l->vw[i] + l->gw[i], l->w[i] -= 0.05f * l->vw[i];
            for (int i = 0; i < D; i++) l->vb[i] = 0.9f * l->vb[i] + l->gb[i], l->b[i] -= 0.05f * l->vb[i];
            memset(l->gw, 0, sizeof l->gw);
            memset(l->gb, 0, sizeof l->gb);
        }
    }
    return VS_OK;
}

static void model_init(model* m)
{
    static const char* names[NU] = {"l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7", "loss"};
    static const char* ins[NU] = {"x", "h0", "h1", "h2", "h3", "h4,h1", "h5", "h6", "h7,target"};
    static const char* outs[NU] = {"h0:f32[*,16]", "h1:f32[*,16]", "h2", "h3", "h4", "h5", "h6", "h7", "loss:f32[]"};
    memset(m, 0, sizeof *m);
    for (int u = 0; u < NU; u++) {
        vs_pipe_unit* un = &m->units[u];
        un->name = names[u];
        un->inputs = ins[u];
        un->outputs = outs[u];
        un->flops = 2.0 * R * D * D;
        if (u < NL) {
            for (int i = 0; i < D * D; i++) m->l[u].w[i] = 0.4f * sinf((float)(u * 1000 + i));
            un->forward = layer_fwd;
            un->backward_input = layer_bwd_input;
            un->backward_weight = layer_bwd_weight;
            un->user = &m->l[u];
        } else {
            un->forward = loss_fwd;
            un->backward = loss_bwd;
        }
    }
}

typedef struct job {
    vs_pipe_kind kind;
    int stages, chunks;
    double loss[STEPS];
    layer final[NL]; /* each layer as the stage that holds it left it */
} job;

static int train(vs_world* w, void* arg)
{
    job* jb = (job*)arg;
    model m;
    model_init(&m);
    vs_mesh* mesh = NULL;
    vs_pipe* pipe = NULL;
    vs_pipe_sched* sched = NULL;
    vs_pipe_plan plan;
    vs_result r = vs_mesh_init(w, &(vs_mesh_desc){.shape = {jb->stages}, .dim_names = {"PP"}}, &mesh);
    if (!r) r = vs_pipe_split(m.units, NU, &(vs_pipe_split_desc){.stages = jb->stages, .chunks = jb->chunks,
                                                                 .kind = VS_PIPE_SPLIT_UNIFORM,
                                                                 .placement = jb->chunks == 2 && jb->kind != VS_PIPE_INTERLEAVED
                                                                                  ? VS_PIPE_PLACE_V
                                                                                  : VS_PIPE_PLACE_LOOP},
                              &plan);
    if (!r) r = vs_pipe_init(&(vs_pipe_desc){.mesh = mesh, .units = m.units, .nunits = NU, .plan = &plan,
                                             .data = load, .data_user = &m, .on_step = sgd_step, .hook_user = &m},
                             &pipe);
    if (!r) r = vs_pipe_generate(w, jb->kind, jb->stages, jb->chunks, M, &sched);
    m.plan = &plan;
    m.stage = pipe ? vs_pipe_stage(pipe) : 0;
    for (int s = 0; s < STEPS && !r; s++) {
        m.step = s;
        double loss = 0;
        r = vs_pipe_run(pipe, sched, &loss); /* every stage gets the loss */
        if (!r && vs_world_rank(w) == 0) jb->loss[s] = loss; /* (one writer: the ranks are threads) */
    }
    for (int k = 0; k < plan.nchunks && !r; k++)
        for (int u = plan.first_unit[k]; u < plan.first_unit[k + 1] && u < NL; u++)
            if (plan.chunk_stage[k] == m.stage) jb->final[u] = m.l[u];
    if (r) fprintf(stderr, "rank %d: %s\n", vs_world_rank(w), vs_last_error());
    vs_pipe_sched_free(sched);
    vs_pipe_free(pipe);
    vs_mesh_free(mesh);
    return r;
}

int main(int argc, char** argv)
{
    static job ref, j; /* (large: not on the stack) */
    ref.kind = VS_PIPE_GPIPE; /* the reference: one rank, one stage */
    ref.stages = ref.chunks = 1;
    if (vs_launch(1, train, &ref) != VS_OK) return fprintf(stderr, "one rank: %s\n", vs_last_error()), 1;
    int bad = 0;
    for (int k = VS_PIPE_GPIPE; k < VS_PIPE_KIND_COUNT; k++) {
        if (argc > 1 && strcmp(argv[1], vs_pipe_kind_name((vs_pipe_kind)k))) continue;
        memset(&j, 0, sizeof j);
        j.kind = (vs_pipe_kind)k;
        j.stages = P;
        j.chunks = k == VS_PIPE_INTERLEAVED || k == VS_PIPE_ZBV || k == VS_PIPE_DUALPIPEV ? 2 : 1;
        if (vs_launch(P, train, &j) != VS_OK) return fprintf(stderr, "%s: %s\n", vs_pipe_kind_name(j.kind), vs_last_error()), 1;
        int same = !memcmp(j.loss, ref.loss, sizeof ref.loss);
        for (int u = 0; u < NL; u++) same &= !memcmp(j.final[u].w, ref.final[u].w, sizeof ref.final[u].w);
        printf("%-11s %d stages x %d chunks, %d microbatches: loss", vs_pipe_kind_name(j.kind), P, j.chunks, M);
        for (int s = 0; s < STEPS; s++) printf(" %.7f", j.loss[s]);
        printf("  %s\n", same ? "== one rank, bit for bit" : "DIFFERS from one rank");
        bad |= !same;
    }
    printf("one rank                                 loss");
    for (int s = 0; s < STEPS; s++) printf(" %.7f", ref.loss[s]);
    printf("\n");
    return bad;
}
