/* fuzz_sched.c - libFuzzer harness for vescale_pipe.h's schedules as text.
   Input: a schedule's text for vs_pipe_sched_parse (world NULL).
   Properties: never crashes, leaks or hangs; an error leaves a message naming
   vs_pipe_sched_parse; an accepted schedule prints to text that parses back and
   prints the same, its getters agree with the text, and vs_pipe_sched_check
   either passes or is VS_ERR_INVALID with a message. A schedule that passes the
   check simulates without a deadlock (finite makespan, 0 <= bubble < 1) under
   costs drawn from the input, and draws with the snprintf length contract; one
   with sends and receives is left as it is by vs_pipe_sched_add_comm, one
   without gets them (a list that then passes the check simulates too). */
#define VESCALE_IMPLEMENTATION
#include "vescale_pipe.h"
#include <stdlib.h>

#define FZ_ASSERT(c)                                                                 \
    do {                                                                             \
        if (!(c)) {                                                                  \
            fprintf(stderr, "fuzz_sched: %s:%d: %s\n", __FILE__, __LINE__, #c);      \
            abort();                                                                 \
        }                                                                            \
    } while (0)

static char* print_all(const vs_pipe_sched* s)
{
    int n = vs_pipe_sched_print(s, NULL, 0);
    FZ_ASSERT(n > 0);
    char* t = (char*)malloc((size_t)n + 1);
    FZ_ASSERT(t && vs_pipe_sched_print(s, t, (size_t)n + 1) == n && strlen(t) == (size_t)n);
    return t;
}

static int has_comm(const vs_pipe_sched* s)
{
    for (int p = 0; p < vs_pipe_sched_stages(s); p++)
        for (int i = 0; i < vs_pipe_sched_len(s, p); i++) {
            vs_pipe_instr in;
            FZ_ASSERT(vs_pipe_sched_at(s, p, i, &in) == VS_OK);
            if (in.op >= VS_PIPE_SEND_F && in.op <= VS_PIPE_RECV_B) return 1;
        }
    return 0;
}

/* A schedule that passed the check: it plays to the end under any costs. */
static void play(const vs_pipe_sched* s, const vs_pipe_costs* c)
{
    vs_pipe_sim sim;
    vs_result r = vs_pipe_simulate(s, c, &sim);
    if (r != VS_OK) fprintf(stderr, "simulate after a passed check: %s\n", vs_last_error());
    FZ_ASSERT(r == VS_OK);
    FZ_ASSERT(sim.makespan >= 0 && sim.makespan < HUGE_VAL && sim.bubble > -1e-9 && sim.bubble < 1);
    int n = vs_pipe_draw(s, c, 0, NULL, 0);
    FZ_ASSERT(n > 0);
    char small[16];
    FZ_ASSERT(vs_pipe_draw(s, c, 0, small, sizeof small) == n && strlen(small) == (size_t)(n < 15 ? n : 15));
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    char* text = (char*)malloc(size + 1);
    FZ_ASSERT(text);
    memcpy(text, data, size);
    text[size] = 0;
    vs_pipe_sched* s = NULL;
    vs_clear_error();
    vs_result r = vs_pipe_sched_parse(NULL, text, &s);
    if (r != VS_OK) {
        FZ_ASSERT(s == NULL && strstr(vs_last_error(), "vs_pipe_sched_parse"));
        free(text);
        return 0;
    }
    FZ_ASSERT(s != NULL);
    const int P = vs_pipe_sched_stages(s), K = vs_pipe_sched_nchunks(s), M = vs_pipe_sched_mbs(s);
    FZ_ASSERT(P >= 1 && K >= P && K <= VS_PIPE_MAX_CHUNKS && M >= 1 && M <= VS_PIPE_MAX_MBS);
    for (int k = 0; k < K; k++) FZ_ASSERT(vs_pipe_sched_chunk_stage(s, k) >= 0 && vs_pipe_sched_chunk_stage(s, k) < P);
    FZ_ASSERT(vs_pipe_sched_chunk_stage(s, K) < 0 && vs_pipe_sched_len(s, P) < 0);
    // text -> schedule -> text -> schedule -> the same text
    char* t1 = print_all(s);
    vs_pipe_sched* s2 = NULL;
    if (vs_pipe_sched_parse(NULL, t1, &s2) != VS_OK) {
        fprintf(stderr, "printed schedule does not parse: %s\n%s", vs_last_error(), t1);
        abort();
    }
    char* t2 = print_all(s2);
    FZ_ASSERT(!strcmp(t1, t2));
    /* The validator and the simulator allocate per (chunk, microbatch): keep the
       runs small (the parser already bounds every count). */
    if ((int64_t)K * M <= 4096) {
        vs_pipe_costs c;
        memset(&c, 0, sizeof c);
        c.f = 1 + size % 5, c.b = 2 + size % 3, c.w = size % 2, c.p2p = (double)(size % 4) / 2;
        vs_clear_error();
        r = vs_pipe_sched_check(s, NULL);
        FZ_ASSERT(r == VS_OK || (r == VS_ERR_INVALID && vs_last_error()[0]));
        if (r == VS_OK) {
            play(s, NULL);
            play(s, &c);
        }
        int comm = has_comm(s2);
        r = vs_pipe_sched_add_comm(s2);
        FZ_ASSERT(r == VS_OK || vs_last_error()[0]);
        if (r == VS_OK) {
            char* t3 = print_all(s2);
            if (comm) FZ_ASSERT(!strcmp(t1, t3)); // (left as it is)
            if (vs_pipe_sched_check(s2, NULL) == VS_OK) play(s2, &c);
            free(t3);
        }
    }
    free(t1);
    free(t2);
    vs_pipe_sched_free(s2);
    vs_pipe_sched_free(s);
    free(text);
    return 0;
}
