/* lighthouse_tool.h - tools/vescale-lighthouse started by a test as a process
   of its own (so that it can be stopped with SIGSTOP, or given its own
   descriptor limit), on a free port of 127.0.0.1. */
#ifndef VS_LIGHTHOUSE_TOOL_H
#define VS_LIGHTHOUSE_TOOL_H
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Starts bin (nofile > 0: with that descriptor limit); *port: the port it
   says it listens on (0: it did not say). Its pid, -1 when it could not run. */
static pid_t vt_lighthouse_spawn(const char* bin, long nofile, int* port)
{
    int pfd[2];
    *port = 0;
    if (pipe(pfd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        if (nofile > 0) {
            struct rlimit rl = {(rlim_t)nofile, (rlim_t)nofile};
            setrlimit(RLIMIT_NOFILE, &rl);
        }
        dup2(pfd[1], 1);
        close(pfd[0]);
        execl(bin, bin, "--addr", "127.0.0.1", "--port", "0", (char*)NULL);
        _exit(127);
    }
    close(pfd[1]);
    char line[256] = "";
    size_t n = 0;
    while (pid > 0 && n < sizeof line - 1 && !strchr(line, '\n')) { /* "vescale-lighthouse: listening on 127.0.0.1:<port>" */
        ssize_t k = read(pfd[0], line + n, sizeof line - 1 - n);
        if (k <= 0) break;
        line[n += (size_t)k] = 0;
    }
    close(pfd[0]);
    const char* c = strrchr(line, ':');
    *port = c ? atoi(c + 1) : 0;
    return pid;
}
#endif
