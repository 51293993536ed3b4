/* fuzz_env.c - libFuzzer harness for the launcher-environment readers.
   The input is split at '\n' into values for the variables below, in order; a
   value starting with '!' leaves its variable unset. Then vs_bootstrap_from_env
   runs, and the rendezvous job key (_vs_rdv_key). With VS_FUZZ_ENV_PARSERS (set
   by run.sh when vescale_mesh.h has them), the strict parsers of VESCALE_TIMEOUT,
   VESCALE_LOG and VESCALE_TRANSPORT run on the same values.
   Properties: never crashes; accepted values are in range. */
#define VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include <stdlib.h>

#define FZ_ASSERT(c)                      \
    do {                                  \
        if (!(c)) __builtin_trap();       \
    } while (0)

static const char* const vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS",
    "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "VESCALE_RUN_ID", "TORCHELASTIC_RUN_ID", "VESCALE_TIMEOUT", "VESCALE_LOG", "VESCALE_TRANSPORT"};
#define NVARS ((int)(sizeof vars / sizeof vars[0]))

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    char* buf = (char*)malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    const char* val[NVARS];
    char* p = buf;
    for (int i = 0; i < NVARS; i++) {
        val[i] = NULL;
        if (!p) continue;
        char* nl = strchr(p, '\n');
        if (nl) *nl = 0;
        if (*p != '!') val[i] = p; /* a NUL inside cuts the value short, as in a real environment */
        p = nl ? nl + 1 : NULL;
    }
    for (int i = 0; i < NVARS; i++) {
        if (val[i])
            setenv(vars[i], val[i], 1);
        else
            unsetenv(vars[i]);
    }

    vs_bootstrap_info bi;
    memset(&bi, 0x5a, sizeof bi);
    if (vs_bootstrap_from_env(&bi) == VS_OK) {
        FZ_ASSERT(bi.world_size >= 1 && bi.rank >= 0 && bi.rank < bi.world_size && bi.local_rank >= 0);
        FZ_ASSERT(bi.master_port >= 1 && bi.master_port <= 65535);
        /* terminated; may be empty: MASTER_ADDR="" is taken as is (the rendezvous then
           reports "no master address") */
        FZ_ASSERT(memchr(bi.master_addr, 0, sizeof bi.master_addr) != NULL);
        FZ_ASSERT(bi.source != NULL);
        const char* from = NULL;
        uint64_t k1 = _vs_rdv_key(bi.master_port, bi.world_size, &from);
        FZ_ASSERT(from != NULL && k1 == _vs_rdv_key(bi.master_port, bi.world_size, NULL));
    } else {
        FZ_ASSERT(vs_last_error()[0] != 0);
    }

#ifdef VS_FUZZ_ENV_PARSERS
    for (int i = 0; i < NVARS; i++) {
        const char* t = val[i] ? val[i] : "";
        double sec = -1;
        if (_vs_parse_timeout(t, &sec) == VS_OK) FZ_ASSERT(sec > 0); /* seconds or INFINITY, never NaN */
        vs_log_level lv = (vs_log_level)-1;
        if (_vs_parse_log_level(t, &lv) == VS_OK) FZ_ASSERT(lv >= VS_LOG_OFF && lv <= VS_LOG_DEBUG);
        vs_transport tr = (vs_transport)-1;
        if (_vs_parse_transport(t, &tr) == VS_OK)
            FZ_ASSERT(tr == VS_TRANSPORT_THREADS || tr == VS_TRANSPORT_MPI || tr == VS_TRANSPORT_NCCL);
    }
#endif
    free(buf);
    return 0;
}
