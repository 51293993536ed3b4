/* vescale-lighthouse - the store an elastic NCCL job of processes agrees
   through when its ranks share no directory (vescale_mesh.h, >>elastic:
   vs_lighthouse_start_desc). Run one where it outlives every rank (the
   launcher's node), then give every rank its address and the token:

       head -c 32 /dev/urandom | base64 > token; chmod 600 token
       vescale-lighthouse --port 29400 --token-file token &
       VESCALE_ELASTIC_DIR=tcp://<this host>:29400 VESCALE_LIGHTHOUSE_TOKEN=$(cat token) \
           VESCALE_RUN_ID=job42 torchrun ... trainer

   vescale-lighthouse [--addr ADDR] [--port PORT] [--token-file FILE]
                      [--max-conns N] [--idle S] [--stall S] [--max-value BYTES]
                      [--max-keys N] [--max-bytes BYTES] [--expire S]
       listens on ADDR (default: every address) and PORT (default 29400; 0: any
       free one), prints "vescale-lighthouse: listening on ADDR:PORT" once it
       does, and serves until SIGINT or SIGTERM. --token-file: the jobs' shared
       secret (its first line; else VESCALE_LIGHTHOUSE_TOKEN; neither: none, and
       it warns that anyone who reaches the port can end its jobs). The limits
       and their defaults are vs_lighthouse_desc's (0: the default). What the
       ranks post lives in its memory: a lighthouse that stops takes the job's
       ability to survive a failure with it (the job trains on, and ends on a
       failure as without one).

   Exit status: 0 stopped by a signal; 1 cannot listen or read the token
   (named); 2 bad usage. */
#define _POSIX_C_SOURCE 200809L
#define VESCALE_IMPLEMENTATION
#include "../vescale_mesh.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(const char* why)
{
    fprintf(stderr, "vescale-lighthouse: %s\nusage: vescale-lighthouse [--addr ADDR] [--port PORT] [--token-file FILE]\n"
            "       [--max-conns N] [--idle S] [--stall S] [--max-value BYTES] [--max-keys N] [--max-bytes BYTES]\n"
            "       [--expire S]\n", why);
    return 2;
}

/* The number in text, within [lo, hi]: 1, else 0 (bad usage). */
static int number(const char* flag, const char* text, double lo, double hi, double* out)
{
    char* end = NULL;
    *out = strtod(text, &end);
    if (*text && !*end && *out >= lo && *out <= hi) return 1;
    char why[160];
    snprintf(why, sizeof why, "%s '%.64s' is not a number in [%g, %g]", flag, text, lo, hi);
    usage(why);
    return 0;
}

static void say(vs_log_level level, const char* msg, void* user)
{
    (void)user;
    fprintf(stderr, "vescale-lighthouse: %s%s\n", level == VS_LOG_WARN ? "warning: " : "", msg);
}

int main(int argc, char** argv)
{
    vs_lighthouse_desc d;
    memset(&d, 0, sizeof d);
    d.port = 29400;
    d.logger.fn = say;
    d.log_level = VS_LOG_WARN;
    const char* token_file = NULL;
    static char token[300];
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        double v = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage("the store of an elastic NCCL job whose ranks share no directory");
            return 0;
        }
        if (i + 1 >= argc || strncmp(a, "--", 2)) {
            char why[128];
            snprintf(why, sizeof why, "unknown argument '%.64s'", a);
            return usage(why);
        }
        const char* x = argv[++i];
        if (!strcmp(a, "--addr")) d.addr = x;
        else if (!strcmp(a, "--token-file")) token_file = x;
        else if (!strcmp(a, "--port")) {
            char* end = NULL;
            long port = strtol(x, &end, 10);
            if (!*x || *end || port < 0 || port > 65535) {
                char why[128];
                snprintf(why, sizeof why, "--port '%.64s' is not a port in [0, 65535]", x);
                return usage(why);
            }
            d.port = (int)port;
        } else if (!strcmp(a, "--max-conns")) { if (!number(a, x, 0, 1 << 20, &v)) return 2; d.max_conns = (int)v; }
        else if (!strcmp(a, "--idle")) { if (!number(a, x, 0, 1e9, &d.idle_s)) return 2; }
        else if (!strcmp(a, "--stall")) { if (!number(a, x, 0, 1e9, &d.stall_s)) return 2; }
        else if (!strcmp(a, "--expire")) { if (!number(a, x, 0, 1e9, &d.expire_s)) return 2; }
        else if (!strcmp(a, "--max-value")) { if (!number(a, x, 0, 2147483647.0, &v)) return 2; d.max_value = (size_t)v; }
        else if (!strcmp(a, "--max-keys")) { if (!number(a, x, 0, 1 << 30, &v)) return 2; d.max_keys = (int)v; }
        else if (!strcmp(a, "--max-bytes")) { if (!number(a, x, 0, 1e15, &v)) return 2; d.max_bytes = (size_t)v; }
        else {
            char why[128];
            snprintf(why, sizeof why, "unknown argument '%.64s'", a);
            return usage(why);
        }
    }
    if (token_file) {
        FILE* f = fopen(token_file, "r");
        if (!f || !fgets(token, sizeof token, f)) {
            fprintf(stderr, "vescale-lighthouse: cannot read the token from '%s': %s\n", token_file,
                    f ? "it is empty" : strerror(errno));
            if (f) fclose(f);
            return 1;
        }
        fclose(f);
        token[strcspn(token, "\r\n")] = 0;
        if (!token[0] || strlen(token) > 256) {
            fprintf(stderr, "vescale-lighthouse: the token in '%s' is %s\n", token_file,
                    token[0] ? "longer than 256 bytes" : "an empty line");
            return 1;
        }
        d.token = token;
    }
    sigset_t set; // (blocked before the lighthouse's thread starts: it inherits the mask, sigwait takes them here)
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    vs_lighthouse* lh = NULL;
    if (vs_lighthouse_start_desc(&d, &lh) != VS_OK) {
        fprintf(stderr, "vescale-lighthouse: %s\n", vs_last_error());
        return 1;
    }
    printf("vescale-lighthouse: listening on %s:%d\n", d.addr ? d.addr : "*", vs_lighthouse_port(lh));
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    vs_lighthouse_stop(lh);
    fprintf(stderr, "vescale-lighthouse: stopped (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    return 0;
}
