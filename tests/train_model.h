/* train_model.h - the model test_train.c and test_elastic_train.c train: an
   MLP of two column- then row-parallel blocks (D -> H -> D) with a tied
   input/output projection "proj" (used on the first and the last stage), its
   layers written once for any TP size, and the global batch of a step
   (tm_batch: every rank makes the same). build_model() fills MODEL. */
#ifndef TRAIN_MODEL_H
#define TRAIN_MODEL_H

enum { D = 8, H = 16 };

/* A fault a test injects (test_elastic_train.c: a rank that dies in the middle
   of a step): called at the start of every layer's forward (backward 0) and
   backward (1); non-zero makes that call fail. NULL: none. */
static int (*tm_fault)(vs_pipe_call* c, int backward);
#define TM_FAULT(c, bwd)                                                                                   \
    do {                                                                                                  \
        if (tm_fault && tm_fault((c), (bwd))) return vs_set_error(VS_ERR_INVALID, "killed by the test");  \
    } while (0)

/* --- the model ------------------------------------------------------------ */

static vs_result out2(vs_pipe_call* c, int64_t rows, int64_t cols, float** y)
{
    int64_t sh[2] = {rows, cols};
    return vs_pipe_output(c, 0, VS_F32, 2, sh, (void**)y);
}

/* y = x W + b, W [D, H] column-parallel: this rank's H/tp columns. */
static long n_fc1_fwd; // forwards of the fc1 units run (atomic: every rank's)
static vs_result fc1_fwd(vs_pipe_call* c)
{
    TM_FAULT(c, 0);
    __atomic_add_fetch(&n_fc1_fwd, 1, __ATOMIC_SEQ_CST);
    vs_layer_ctx* L = vs_layer(c);
    const float* x = (const float*)c->in[0].data;
    const float *W = (const float*)L->param[0], *b = (const float*)L->param[1];
    int64_t R = c->in[0].shape[0], h = L->local_shape[0][1];
    float* y;
    vs_result r = out2(c, R, h, &y);
    for (int64_t i = 0; !r && i < R; i++)
        for (int64_t j = 0; j < h; j++) {
            float a = b[j];
            for (int k = 0; k < D; k++) a += x[i * D + k] * W[k * h + j];
            y[i * h + j] = a;
        }
    return r;
}

static vs_result fc1_bwd(vs_pipe_call* c)
{
    TM_FAULT(c, 1);
    vs_layer_ctx* L = vs_layer(c);
    const float* x = (const float*)c->in[0].data;
    const float* gy = (const float*)c->out[0].grad;
    const float* W = (const float*)L->param[0];
    float *gW = (float*)L->grad[0], *gb = (float*)L->grad[1];
    int64_t R = c->in[0].shape[0], h = L->local_shape[0][1];
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < h; j++) {
            gb[j] += gy[i * h + j];
            for (int k = 0; k < D; k++) gW[k * h + j] += x[i * D + k] * gy[i * h + j];
        }
    float* gx = (float*)c->in[0].grad;
    if (!gx) return VS_OK;
    float* part = (float*)calloc((size_t)(R > 0 ? R : 1) * D, sizeof(float)); // this rank's columns' share
    for (int64_t i = 0; i < R; i++)
        for (int k = 0; k < D; k++) {
            float a = 0;
            for (int64_t j = 0; j < h; j++) a += gy[i * h + j] * W[k * h + j];
            part[i * D + k] = a;
        }
    vs_result r = L->tp ? vs_tp_copy_backward(L->tp, part, (size_t)(R * D), VS_F32) : VS_OK; // sum over TP
    for (int64_t e = 0; !r && e < R * D; e++) gx[e] += part[e];
    free(part);
    return r;
}

static vs_result act_fwd(vs_pipe_call* c)
{
    TM_FAULT(c, 0);
    const float* a = (const float*)c->in[0].data;
    int64_t R = c->in[0].shape[0], h = c->in[0].shape[1];
    float* z;
    vs_result r = out2(c, R, h, &z);
    for (int64_t e = 0; !r && e < R * h; e++) z[e] = tanhf(a[e]);
    return r;
}

static vs_result act_bwd(vs_pipe_call* c)
{
    TM_FAULT(c, 1);
    const float* z = (const float*)c->out[0].data;
    const float* gz = (const float*)c->out[0].grad;
    float* ga = (float*)c->in[0].grad;
    for (int64_t e = 0; e < c->in[0].shape[0] * c->in[0].shape[1]; e++) ga[e] += gz[e] * (1 - z[e] * z[e]);
    return VS_OK;
}

/* y = z W + b, W [H, D] row-parallel: this rank's H/tp rows; partial sums
   added over TP, then b once. */
static vs_result fc2_fwd(vs_pipe_call* c)
{
    TM_FAULT(c, 0);
    vs_layer_ctx* L = vs_layer(c);
    const float* z = (const float*)c->in[0].data;
    const float *W = (const float*)L->param[0], *b = (const float*)L->param[1];
    int64_t R = c->in[0].shape[0], h = L->local_shape[0][0];
    float* y;
    vs_result r = out2(c, R, D, &y);
    for (int64_t i = 0; !r && i < R; i++)
        for (int k = 0; k < D; k++) {
            float a = 0;
            for (int64_t j = 0; j < h; j++) a += z[i * h + j] * W[j * D + k];
            y[i * D + k] = a;
        }
    if (!r && L->tp) r = vs_tp_reduce_forward(L->tp, y, (size_t)(R * D), VS_F32);
    for (int64_t i = 0; !r && i < R; i++)
        for (int k = 0; k < D; k++) y[i * D + k] += b[k];
    return r;
}

static vs_result fc2_bwd(vs_pipe_call* c)
{
    TM_FAULT(c, 1);
    vs_layer_ctx* L = vs_layer(c);
    const float* z = (const float*)c->in[0].data;
    const float* gy = (const float*)c->out[0].grad;
    const float* W = (const float*)L->param[0];
    float *gW = (float*)L->grad[0], *gb = (float*)L->grad[1], *gz = (float*)c->in[0].grad;
    int64_t R = c->in[0].shape[0], h = L->local_shape[0][0];
    for (int64_t i = 0; i < R; i++)
        for (int k = 0; k < D; k++) {
            gb[k] += gy[i * D + k];
            for (int64_t j = 0; j < h; j++) {
                gW[j * D + k] += z[i * h + j] * gy[i * D + k];
                gz[i * h + j] += gy[i * D + k] * W[j * D + k];
            }
        }
    return VS_OK;
}

/* The input projection P [D, D] (replicated), tied: the loss layer uses it again. */
static vs_result in_fwd(vs_pipe_call* c)
{
    TM_FAULT(c, 0);
    vs_layer_ctx* L = vs_layer(c);
    const float* x = (const float*)c->in[0].data;
    const float* P = (const float*)L->param[0];
    int64_t R = c->in[0].shape[0];
    float* y;
    vs_result r = out2(c, R, D, &y);
    for (int64_t i = 0; !r && i < R; i++)
        for (int k = 0; k < D; k++) {
            float a = 0;
            for (int j = 0; j < D; j++) a += x[i * D + j] * P[j * D + k];
            y[i * D + k] = a;
        }
    return r;
}

static vs_result in_bwd(vs_pipe_call* c)
{
    TM_FAULT(c, 1);
    vs_layer_ctx* L = vs_layer(c);
    const float* x = (const float*)c->in[0].data;
    const float* gy = (const float*)c->out[0].grad;
    float* gP = (float*)L->grad[0];
    int64_t R = c->in[0].shape[0];
    for (int64_t i = 0; i < R; i++)
        for (int j = 0; j < D; j++)
            for (int k = 0; k < D; k++) gP[j * D + k] += x[i * D + j] * gy[i * D + k];
    return VS_OK;
}

/* loss = mean((y P - t)^2): P is the tied input projection. */
static vs_result loss_fwd(vs_pipe_call* c)
{
    TM_FAULT(c, 0);
    vs_layer_ctx* L = vs_layer(c);
    const float *y = (const float*)c->in[0].data, *t = (const float*)c->in[1].data;
    const float* P = (const float*)L->param[0];
    int64_t R = c->in[0].shape[0];
    float* loss;
    vs_result r = vs_pipe_output(c, 0, VS_F32, 0, NULL, (void**)&loss);
    float s = 0;
    for (int64_t i = 0; !r && i < R; i++)
        for (int k = 0; k < D; k++) {
            float a = 0;
            for (int j = 0; j < D; j++) a += y[i * D + j] * P[j * D + k];
            s += (a - t[i * D + k]) * (a - t[i * D + k]);
        }
    if (!r) *loss = s / (float)(R * D);
    return r;
}

static vs_result loss_bwd(vs_pipe_call* c)
{
    TM_FAULT(c, 1);
    vs_layer_ctx* L = vs_layer(c);
    const float *y = (const float*)c->in[0].data, *t = (const float*)c->in[1].data;
    const float* P = (const float*)L->param[0];
    float* gP = (float*)L->grad[0];
    float* gy = (float*)c->in[0].grad;
    float g0 = *(const float*)c->out[0].grad;
    int64_t R = c->in[0].shape[0];
    for (int64_t i = 0; i < R; i++)
        for (int k = 0; k < D; k++) {
            float a = 0;
            for (int j = 0; j < D; j++) a += y[i * D + j] * P[j * D + k];
            float g = g0 * 2 * (a - t[i * D + k]) / (float)(R * D);
            for (int j = 0; j < D; j++) {
                gy[i * D + j] += g * P[j * D + k];
                gP[j * D + k] += g * y[i * D + j];
            }
        }
    return VS_OK;
}

enum { NL = 8 };
static vs_layer_decl LAYERS[NL];
static vs_model_desc MODEL;

static void param(vs_layer_decl* l, const char* name, int ndim, int64_t a, int64_t b, vs_role role, double std)
{
    vs_param_decl* p = &l->params[l->nparams++];
    p->name = name;
    p->ndim = ndim;
    p->shape[0] = a;
    p->shape[1] = b;
    p->role = role;
    p->init.kind = std > 0 ? VS_INIT_NORMAL : VS_INIT_ZEROS;
    p->init.b = std;
}

static void unit(vs_layer_decl* l, const char* name, const char* in, const char* out, vs_pipe_fn f, vs_pipe_fn b)
{
    memset(l, 0, sizeof *l);
    l->unit.name = name;
    l->unit.inputs = in;
    l->unit.outputs = out;
    l->unit.forward = f;
    l->unit.backward = b;
    l->unit.flops = 1;
}

static void build_model(void)
{
    unit(&LAYERS[0], "in", "x", "h0", in_fwd, in_bwd);
    param(&LAYERS[0], "proj", 2, D, D, VS_ROLE_OTHER, 0.3);
    static const char* names[2][6] = {{"b0.fc1", "b0.fc1.w", "b0.fc1.b", "b0.fc2", "b0.fc2.w", "b0.fc2.b"},
                                      {"b1.fc1", "b1.fc1.w", "b1.fc1.b", "b1.fc2", "b1.fc2.w", "b1.fc2.b"}};
    static const char* io[2][4] = {{"h0", "a0", "z0", "h1"}, {"h1", "a1", "z1", "h2"}};
    static const char* act[2] = {"b0.act", "b1.act"};
    for (int b = 0; b < 2; b++) {
        vs_layer_decl* l = &LAYERS[1 + 3 * b];
        unit(l, names[b][0], io[b][0], io[b][1], fc1_fwd, fc1_bwd);
        param(l, names[b][1], 2, D, H, VS_ROLE_COLUMN, 0.4);
        param(l, names[b][2], 1, H, 0, VS_ROLE_COLUMN, 0.1);
        unit(l + 1, act[b], io[b][1], io[b][2], act_fwd, act_bwd);
        unit(l + 2, names[b][3], io[b][2], io[b][3], fc2_fwd, fc2_bwd);
        param(l + 2, names[b][4], 2, H, D, VS_ROLE_ROW, 0.4);
        param(l + 2, names[b][5], 1, D, 0, VS_ROLE_ROW, 0.1);
    }
    unit(&LAYERS[7], "loss", "h2,t", "loss:f32[]", loss_fwd, loss_bwd);
    param(&LAYERS[7], "proj", 2, D, D, VS_ROLE_OTHER, 0.3); // tied with "in"
    MODEL.layers = LAYERS;
    MODEL.nlayers = NL;
    MODEL.seed = 7;
}

/* The global batch of a step: every rank makes the same, in its own buffers. */
static vs_batch tm_batch(int step, float* X, float* T, int rows)
{
    for (int i = 0; i < rows * D; i++) {
        X[i] = sinf(0.3f * (float)(step * 131 + i));
        T[i] = 0.5f * cosf(0.7f * (float)(step * 17 + i));
    }
    vs_batch b;
    memset(&b, 0, sizeof b);
    b.n = 2;
    b.name[0] = "x", b.name[1] = "t";
    b.dtype[0] = b.dtype[1] = VS_F32;
    b.ndim[0] = b.ndim[1] = 2;
    b.shape[0][0] = b.shape[1][0] = rows;
    b.shape[0][1] = b.shape[1][1] = D;
    b.data[0] = X, b.data[1] = T;
    return b;
}

#endif
