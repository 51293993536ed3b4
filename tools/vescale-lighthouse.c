/* vescale-lighthouse - the store an elastic NCCL job of processes agrees
   through when its ranks share no directory (vescale_mesh.h, >>elastic:
   vs_lighthouse_start). Run one where it outlives every rank (the launcher's
   node), then give every rank its address:

       vescale-lighthouse --port 29400 &
       VESCALE_ELASTIC_DIR=tcp://<this host>:29400 VESCALE_RUN_ID=job42 torchrun ... trainer

   vescale-lighthouse [--addr ADDR] [--port PORT]
       listens on ADDR (default: every address) and PORT (default 29400; 0: any
       free one), prints "vescale-lighthouse: listening on ADDR:PORT" once it
       does, and serves until SIGINT or SIGTERM. What the ranks post lives in
       its memory: a lighthouse that stops takes the job's ability to survive a
       failure with it (the job trains on, and ends on a failure as without one).

   Exit status: 0 stopped by a signal; 1 cannot listen (named); 2 bad usage. */
#define _POSIX_C_SOURCE 200809L
#define VESCALE_IMPLEMENTATION
#include "../vescale_mesh.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(const char* why)
{
    fprintf(stderr, "vescale-lighthouse: %s\nusage: vescale-lighthouse [--addr ADDR] [--port PORT]\n", why);
    return 2;
}

int main(int argc, char** argv)
{
    const char* addr = NULL;
    long port = 29400;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--addr") && i + 1 < argc) {
            addr = argv[++i];
        } else if (!strcmp(argv[i], "--port") && i + 1 < argc) {
            char* end = NULL;
            port = strtol(argv[++i], &end, 10);
            if (!*argv[i] || *end || port < 0 || port > 65535) {
                char why[128];
                snprintf(why, sizeof why, "--port '%.64s' is not a port in [0, 65535]", argv[i]);
                return usage(why);
            }
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage("the store of an elastic NCCL job whose ranks share no directory");
            return 0;
        } else {
            char why[128];
            snprintf(why, sizeof why, "unknown argument '%.64s'", argv[i]);
            return usage(why);
        }
    }
    sigset_t set; // (blocked before the lighthouse's thread starts: it inherits the mask, sigwait takes them here)
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    vs_lighthouse* lh = NULL;
    if (vs_lighthouse_start(addr, (int)port, &lh) != VS_OK) {
        fprintf(stderr, "vescale-lighthouse: %s\n", vs_last_error());
        return 1;
    }
    printf("vescale-lighthouse: listening on %s:%d\n", addr ? addr : "*", vs_lighthouse_port(lh));
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    vs_lighthouse_stop(lh);
    fprintf(stderr, "vescale-lighthouse: stopped (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    return 0;
}
