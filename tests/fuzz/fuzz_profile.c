/* fuzz_profile.c - libFuzzer harness for vs_profile_parse.
   Input: a profile's one line of text.
   Properties: never crashes or leaks; an error leaves a message naming
   vs_profile_parse; an accepted profile prints without error (the length
   contract holds) to text that parses back to the same profile and prints the
   same; vs_generate_plan with it, for a small model on 4 ranks, gives a plan
   that passes vs_plan_check and an explanation, or an error with a message. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#include <stdlib.h>

#define FZ_ASSERT(c)                                                                 \
    do {                                                                             \
        if (!(c)) {                                                                  \
            fprintf(stderr, "fuzz_profile: %s:%d: %s\n", __FILE__, __LINE__, #c);    \
            abort();                                                                 \
        }                                                                            \
    } while (0)

static vs_result nop(vs_pipe_call* c)
{
    (void)c;
    return VS_OK;
}

static const vs_layer_decl L[3] = {
    {.unit = {.name = "l0", .inputs = "x", .outputs = "h0:f32[*,16]", .forward = nop, .backward = nop, .flops = 512},
     .params = {{.name = "l0.w", .ndim = 2, .shape = {16, 16}, .role = VS_ROLE_COLUMN}},
     .nparams = 1},
    {.unit = {.name = "l1", .inputs = "h0", .outputs = "h1:f32[*,16]", .forward = nop, .backward = nop, .flops = 512},
     .params = {{.name = "l1.w", .ndim = 2, .shape = {16, 16}, .role = VS_ROLE_ROW}},
     .nparams = 1},
    {.unit = {.name = "loss", .inputs = "h1,t", .outputs = "loss:f32[]", .forward = nop, .backward = nop, .flops = 32}},
};
static const vs_model_desc MODEL = {L, 3, 1};

static char* print(const vs_profile* p)
{
    int n = vs_profile_print(p, NULL, 0);
    if (n < 0) fprintf(stderr, "a parsed profile does not print: %s\n", vs_last_error());
    FZ_ASSERT(n > 0);
    char* t = (char*)malloc((size_t)n + 1);
    FZ_ASSERT(t && vs_profile_print(p, t, (size_t)n + 1) == n && strlen(t) == (size_t)n);
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    char* text = (char*)malloc(size + 1);
    FZ_ASSERT(text);
    memcpy(text, data, size);
    text[size] = 0;
    vs_profile p, q;
    vs_clear_error();
    vs_result r = vs_profile_parse(text, &p);
    free(text);
    if (r != VS_OK) {
        FZ_ASSERT(strstr(vs_last_error(), "vs_profile_parse"));
        return 0;
    }
    char* t1 = print(&p);
    if (vs_profile_parse(t1, &q) != VS_OK) {
        fprintf(stderr, "a printed profile does not parse: %s\n%s\n", vs_last_error(), t1);
        abort();
    }
    FZ_ASSERT(!memcmp(&p, &q, sizeof p));
    char* t2 = print(&q);
    FZ_ASSERT(!strcmp(t1, t2));
    vs_constraints c;
    memset(&c, 0, sizeof c);
    c.world = 4, c.global_batch = 8;
    vs_plan out;
    static vs_plan_estimate est[64];
    int n = 0;
    vs_clear_error();
    r = vs_generate_plan(&MODEL, &c, &p, &out, est, 64, &n);
    if (r == VS_OK) {
        FZ_ASSERT(n >= 1 && n <= 64);
        if (vs_plan_check(&out, &MODEL) != VS_OK) {
            fprintf(stderr, "the planner's plan fails its check: %s\n", vs_last_error());
            abort();
        }
        char buf[256];
        FZ_ASSERT(vs_plan_explain(est, n, buf, sizeof buf) > 0);
    } else {
        FZ_ASSERT(vs_last_error()[0]);
    }
    free(t1);
    free(t2);
    return 0;
}
