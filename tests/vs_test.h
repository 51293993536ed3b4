/* vs_test.h - the tiny harness shared by vescale's tests.

   A test binary runs named cases. A case passes when no VT_CHECK failed while it
   ran (checks may run on any rank thread). Each case prints one line:
       ok <name> | not ok <name> | skip <name>: <why>
   and main ends with vt_summary(), which prints "N passed, N failed, N skipped".
   tests/run.sh adds up those lines over all binaries. A check that fails outside
   a case (setup, cleanup, a check between cases) fails the binary too: it is
   reported as "not ok checks outside a case (...)" at the next vt_begin or at
   vt_summary, counted as a failure, and vt_summary then returns 1. */
#ifndef VS_TEST_H
#define VS_TEST_H
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define VT_UNUSED __attribute__((unused))
#else
#define VT_UNUSED
#endif

static int vt_failures; /* touched with __atomic builtins: checks run on rank threads */
static int vt_npass, vt_nfail, vt_nskip;
static int vt_case_start;
static int vt_counted; /* failures reported by a line so far (a case's, or an outside one's) */

VT_UNUSED static void vt_fail_msg(const char* file, int line, const char* cond, const char* fmt, ...)
{
    int n = __atomic_add_fetch(&vt_failures, 1, __ATOMIC_SEQ_CST);
    if (n > 40) return; /* enough to diagnose; keep logs readable */
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "    check failed %s:%d: %s: %s\n", file, line, cond, buf);
}

#define VT_CHECK(cond, ...)                                                   \
    do {                                                                      \
        if (!(cond)) vt_fail_msg(__FILE__, __LINE__, #cond, __VA_ARGS__);     \
    } while (0)

/* Checks a vs_result is VS_OK, printing vs_last_error() otherwise. */
#define VT_OK(expr)                                                           \
    do {                                                                      \
        vs_result vt_r_ = (expr);                                             \
        if (vt_r_ != VS_OK)                                                   \
            vt_fail_msg(__FILE__, __LINE__, #expr, "%s: %s",                  \
                        vs_result_string(vt_r_), vs_last_error());            \
    } while (0)

/* Failures since the last line that reported some: checks outside a case. */
VT_UNUSED static void vt_outside(const char* where, const char* name)
{
    int now = __atomic_load_n(&vt_failures, __ATOMIC_SEQ_CST);
    if (now == vt_counted) return;
    vt_nfail++;
    printf("not ok checks outside a case (%s%s%s): %d failed\n", where, name ? name : "", name ? "\"" : "",
           now - vt_counted);
    fflush(stdout);
    vt_counted = now;
}

VT_UNUSED static void vt_begin(const char* name)
{
    vt_outside("before \"", name);
    vt_case_start = __atomic_load_n(&vt_failures, __ATOMIC_SEQ_CST);
}

VT_UNUSED static int vt_end(const char* name)
{
    int now = __atomic_load_n(&vt_failures, __ATOMIC_SEQ_CST), failed = now != vt_case_start;
    vt_counted = now;
    if (failed) vt_nfail++; else vt_npass++;
    printf("%s %s\n", failed ? "not ok" : "ok", name);
    fflush(stdout);
    return !failed;
}

VT_UNUSED static void vt_skip(const char* name, const char* why)
{
    vt_nskip++;
    printf("skip %s: %s\n", name, why);
    fflush(stdout);
}

/* VT_ONLY=text runs only the cases whose name holds it (debugging). */
VT_UNUSED static int vt_selected(const char* name)
{
    const char* only = getenv("VT_ONLY");
    return !only || !*only || strstr(name, only) != NULL;
}

/* Runs one case: VT_CASE("name", fn(args)); */
#define VT_CASE(name, call)                                                   \
    do {                                                                      \
        if (!vt_selected(name)) break;                                        \
        vt_begin(name);                                                       \
        call;                                                                 \
        vt_end(name);                                                         \
    } while (0)

/* Error-path checks (tests that include vescale_mesh.h first): the call (a
   vs_result or an int) gives `want`, an error leaves a message, and vs_last_error()
   holds each non-NULL needle. */
#ifdef VESCALE_MESH_INCLUDED
VT_UNUSED static int vt_contains(const char* hay, const char* needle)
{
    return hay && needle && strstr(hay, needle) != NULL;
}

VT_UNUSED static void vt_expect_err(const char* file, int line, const char* what, int got, int want,
                                    const char* n1, const char* n2)
{
    const char* msg = vs_last_error();
    if (got != want)
        vt_fail_msg(file, line, what, "gave %d %s (%s), want %s", got, vs_result_string(got), msg,
                    vs_result_string(want));
    else if (got < 0 && !msg[0])
        vt_fail_msg(file, line, what, "vs_last_error() is empty after an error");
    else if ((n1 && !vt_contains(msg, n1)) || (n2 && !vt_contains(msg, n2)))
        vt_fail_msg(file, line, what, "message \"%s\" does not name '%s'%s%s", msg, n1 ? n1 : "", n2 ? " and " : "",
                    n2 ? n2 : "");
}

#define VT_EXPECT_ERR(expr, want, n1, n2)                                               \
    do {                                                                                \
        vs_clear_error();                                                               \
        int vt_e_ = (int)(expr);                                                        \
        vt_expect_err(__FILE__, __LINE__, #expr, vt_e_, (want), (n1), (n2));            \
    } while (0)
#define VT_ERR(expr, want, needle) VT_EXPECT_ERR(expr, want, needle, NULL)
#endif

VT_UNUSED static int vt_summary(void)
{
    vt_outside("after the last case", NULL);
    printf("%d passed, %d failed, %d skipped\n", vt_npass, vt_nfail, vt_nskip);
    fflush(stdout);
    return vt_nfail ? 1 : 0;
}
#endif
