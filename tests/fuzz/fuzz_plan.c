/* fuzz_plan.c - libFuzzer harness for vescale.h's plans as text and JSON.
   Input: a plan's text or JSON for vs_plan_parse.
   Properties: never crashes or leaks; an error leaves a message naming
   vs_plan_parse; an accepted plan prints (text and JSON) without error, the
   JSON is valid UTF-8, and the round trips hold: text -> plan -> text -> plan
   gives the same plan and text, and that plan -> JSON -> plan gives it again;
   vs_plan_check against a small model and vs_plan_placement of its parameters
   give VS_OK or an error with a message. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#include <stdlib.h>

#define FZ_ASSERT(c)                                                                 \
    do {                                                                             \
        if (!(c)) {                                                                  \
            fprintf(stderr, "fuzz_plan: %s:%d: %s\n", __FILE__, __LINE__, #c);       \
            abort();                                                                 \
        }                                                                            \
    } while (0)

static vs_result nop(vs_pipe_call* c)
{
    (void)c;
    return VS_OK;
}

/* Four layers: parameters of every role, a tied one, a head-width block. */
static const vs_layer_decl L[4] = {
    {.unit = {.name = "embed", .inputs = "tok", .outputs = "x0", .forward = nop, .backward = nop, .flops = 1},
     .params = {{.name = "wte", .ndim = 2, .shape = {64, 16}, .role = VS_ROLE_EMBEDDING}},
     .nparams = 1,
     .sp_ok = 1},
    {.unit = {.name = "h.0.attn", .inputs = "x0", .outputs = "x1", .forward = nop, .backward = nop, .flops = 4},
     .params = {{.name = "h.0.attn.wq", .ndim = 2, .shape = {16, 16}, .role = VS_ROLE_COLUMN, .shard_unit = 4},
                {.name = "h.0.attn.bq", .ndim = 1, .shape = {16}, .role = VS_ROLE_COLUMN},
                {.name = "h.0.attn.proj", .ndim = 2, .shape = {16, 16}, .role = VS_ROLE_ROW, .shard_unit = 4},
                {.name = "h.0.ln.g", .ndim = 1, .shape = {16}, .role = VS_ROLE_NORM}},
     .nparams = 4,
     .sp_ok = 1},
    {.unit = {.name = "h.0.mlp", .inputs = "x1", .outputs = "x2", .forward = nop, .backward = nop, .flops = 8},
     .params = {{.name = "h.0.mlp.fc", .ndim = 2, .shape = {16, 64}, .role = VS_ROLE_COLUMN},
                {.name = "h.0.mlp.fc2", .ndim = 2, .shape = {64, 16}, .role = VS_ROLE_ROW}},
     .nparams = 2},
    {.unit = {.name = "head", .inputs = "x2,tgt", .outputs = "loss:f32[]", .forward = nop, .backward = nop, .flops = 2},
     .params = {{.name = "wte", .ndim = 2, .shape = {64, 16}, .role = VS_ROLE_EMBEDDING},
                {.name = "head.b", .ndim = 1, .shape = {64}, .role = VS_ROLE_HEAD}},
     .nparams = 2,
     .sp_ok = 1},
};
static const vs_model_desc MODEL = {L, 4, 1};

/* RFC 3629: the shortest form of a scalar value, no surrogates, <= U+10FFFF. */
static int utf8(const unsigned char* s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        int k = c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : -1;
        if (k < 0 || i + (size_t)k >= n + (k == 0)) return 0;
        unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80, hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
        for (int j = 1; j <= k; j++)
            if (s[i + j] < (j == 1 ? lo : 0x80) || s[i + j] > (j == 1 ? hi : 0xbf)) return 0;
        i += (size_t)k + 1;
    }
    return 1;
}

static char* print(const vs_plan* p, int json)
{
    int n = json ? vs_plan_print_json(p, NULL, 0) : vs_plan_print(p, NULL, 0);
    if (n < 0) fprintf(stderr, "a parsed plan does not print: %s\n", vs_last_error());
    FZ_ASSERT(n > 0);
    char* t = (char*)malloc((size_t)n + 1);
    FZ_ASSERT(t);
    FZ_ASSERT((json ? vs_plan_print_json(p, t, (size_t)n + 1) : vs_plan_print(p, t, (size_t)n + 1)) == n);
    FZ_ASSERT(strlen(t) == (size_t)n);
    return t;
}

static void parse_back(const char* t, vs_plan* q)
{
    if (vs_plan_parse(t, q) != VS_OK) {
        fprintf(stderr, "a printed plan does not parse: %s\n%s\n", vs_last_error(), t);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    char* text = (char*)malloc(size + 1);
    FZ_ASSERT(text);
    memcpy(text, data, size);
    text[size] = 0;
    vs_plan p, q, j;
    vs_clear_error();
    vs_result r = vs_plan_parse(text, &p);
    free(text);
    if (r != VS_OK) {
        FZ_ASSERT(strstr(vs_last_error(), "vs_plan_parse"));
        return 0;
    }
    char* t1 = print(&p, 0);
    parse_back(t1, &q); // q: p with its defaults written out (pp 1, chunks, schedule, microbatches)
    char* t2 = print(&q, 0);
    if (strcmp(t1, t2)) {
        fprintf(stderr, "text round trip:\n%s\n--\n%s\n", t1, t2);
        abort();
    }
    char* j1 = print(&q, 1);
    FZ_ASSERT(utf8((const unsigned char*)j1, strlen(j1)));
    parse_back(j1, &j);
    if (memcmp(&j, &q, sizeof q)) {
        fprintf(stderr, "JSON round trip changes the plan:\n%s\n%s\n", t1, j1);
        abort();
    }
    char* j2 = print(&j, 1);
    FZ_ASSERT(!strcmp(j1, j2));
    vs_clear_error();
    r = vs_plan_check(&p, &MODEL);
    FZ_ASSERT(r == VS_OK || vs_last_error()[0]);
    for (int l = 0; l < MODEL.nlayers; l++)
        for (int i = 0; i < L[l].nparams; i++) {
            vs_placement pl;
            const char* why = NULL;
            vs_clear_error();
            r = vs_plan_placement(&p, &L[l].params[i], &pl, &why);
            FZ_ASSERT((r == VS_OK && why) || (r != VS_OK && vs_last_error()[0]));
        }
    free(t1);
    free(t2);
    free(j1);
    free(j2);
    return 0;
}
