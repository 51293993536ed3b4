/* test_harness.c - tests/vs_test.h itself: a failed check fails the binary
   wherever it ran. The binary runs itself with a scenario (argv[1]) and checks
   the child's lines and exit status:
   - a failed check before the first case, between cases, after the last one:
     a "not ok checks outside a case (...)" line, counted, exit status 1;
   - a failed check inside a case: that case's "not ok" line, nothing more;
   - checks that pass outside a case: no line, exit status 0. */
#include "vs_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int scenario(const char* s)
{
    if (!strcmp(s, "before")) VT_CHECK(0, "setup failed");
    VT_CHECK(1, "passes outside a case");
    VT_CASE("a", VT_CHECK(1, "a passes"));
    if (!strcmp(s, "between")) VT_CHECK(0, "between the cases");
    VT_CASE("b", VT_CHECK(strcmp(s, "inside") != 0, "b fails"));
    if (!strcmp(s, "after")) {
        VT_CHECK(0, "cleanup failed");
        VT_CHECK(0, "cleanup failed twice");
    }
    return vt_summary();
}

/* Runs this binary on scenario s: its stdout (stderr dropped) and exit status. */
static int child(const char* self, const char* s, char* out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>/dev/null", self, s);
    FILE* f = popen(cmd, "r");
    VT_CHECK(f != NULL, "popen %s", cmd);
    if (!f) return -1;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect(const char* self, const char* s, int want_rc, const char* want1, const char* want2, const char* never)
{
    char out[4096];
    int rc = child(self, s, out, sizeof out);
    VT_CHECK(rc == want_rc, "scenario %s: exit status %d, want %d; its output:\n%s", s, rc, want_rc, out);
    VT_CHECK(strstr(out, want1) != NULL, "scenario %s: no line \"%s\" in:\n%s", s, want1, out);
    VT_CHECK(!want2 || strstr(out, want2) != NULL, "scenario %s: no line \"%s\" in:\n%s", s, want2, out);
    VT_CHECK(!never || strstr(out, never) == NULL, "scenario %s: \"%s\" in:\n%s", s, never, out);
}

int main(int argc, char** argv)
{
    if (argc > 1) return scenario(argv[1]);
    const char* self = argv[0];
    VT_CASE("harness: a failed check before the first case fails the binary",
            expect(self, "before", 1, "not ok checks outside a case (before \"a\"): 1 failed\n",
                   "2 passed, 1 failed, 0 skipped\n", NULL));
    VT_CASE("harness: a failed check between cases fails the binary",
            expect(self, "between", 1, "ok a\nnot ok checks outside a case (before \"b\"): 1 failed\nok b\n",
                   "2 passed, 1 failed, 0 skipped\n", NULL));
    VT_CASE("harness: failed checks after the last case fail the binary",
            expect(self, "after", 1, "not ok checks outside a case (after the last case): 2 failed\n",
                   "2 passed, 1 failed, 0 skipped\n", NULL));
    VT_CASE("harness: a failed check inside a case fails that case only",
            expect(self, "inside", 1, "ok a\nnot ok b\n", "1 passed, 1 failed, 0 skipped\n", "outside"));
    VT_CASE("harness: checks that pass outside a case print nothing",
            expect(self, "clean", 0, "ok a\nok b\n2 passed, 0 failed, 0 skipped\n", NULL, "not ok"));
    return vt_summary();
}
