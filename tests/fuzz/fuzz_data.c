/* fuzz_data.c - libFuzzer harness for a token shard: what vs_data_open and
   vs_data_next read (vescale.h >>data).
   Input: 3 bytes of settings (seq_len 1..16, batch 1..4, DP size 1..2 and this
   rank, shuffle, read-ahead thread or none, a vocabulary of 100 or none), then
   the file's bytes, written to a temporary file that the pattern names.
   Properties: never crashes, leaks, hangs or reads past the file; every error
   leaves a message naming the file; an opened loader's batches have B/DP rows
   of T tokens, every target is the next row position's input (a window is
   contiguous) and every token is below the vocabulary when one is given. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
#include <stdlib.h>
#include <unistd.h>

#define FZ_ASSERT(c)                                                            \
    do {                                                                        \
        if (!(c)) {                                                             \
            fprintf(stderr, "fuzz_data: %s:%d: %s\n", __FILE__, __LINE__, #c);  \
            abort();                                                            \
        }                                                                       \
    } while (0)

static char PATH[256];

int LLVMFuzzerTestOneInput(const unsigned char* data, unsigned long n);
int LLVMFuzzerTestOneInput(const unsigned char* data, unsigned long n)
{
    if (n < 3) return 0;
    if (!PATH[0]) snprintf(PATH, sizeof PATH, "/tmp/vs_fuzz_data_%d.bin", (int)getpid()); // (one file, rewritten)
    FILE* f = fopen(PATH, "wb");
    if (!f) return 0;
    fwrite(data + 3, 1, n - 3, f);
    fclose(f);
    vs_data_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.files = PATH;
    dd.seq_len = 1 + data[0] % 16;
    dd.batch = 1 + (data[1] & 3);
    dd.dp_size = 1 + (data[1] >> 2 & 1);
    dd.dp_rank = data[1] >> 3 & 1 ? dd.dp_size - 1 : 0;
    if (dd.batch % dd.dp_size) dd.batch *= dd.dp_size;
    dd.shuffle = data[2] & 1;
    dd.seed = data[2];
    dd.prefetch = data[2] & 2 ? 1 : -1;
    dd.vocab = data[2] & 4 ? 100 : 0;
    vs_data* d = NULL;
    vs_clear_error();
    vs_result r = vs_data_open(&dd, &d);
    if (r) {
        FZ_ASSERT(!d && strstr(vs_last_error(), PATH));
        unlink(PATH);
        return 0;
    }
    int64_t rows = dd.batch / dd.dp_size, T = dd.seq_len;
    for (int b = 0; b < 4; b++) {
        vs_batch x;
        vs_clear_error();
        r = vs_data_next(d, &x);
        if (r) {
            FZ_ASSERT(strstr(vs_last_error(), PATH));
            break;
        }
        FZ_ASSERT(x.n == 2 && x.shape[0][0] == rows && x.shape[0][1] == T);
        const int32_t *in = (const int32_t*)x.data[0], *tg = (const int32_t*)x.data[1];
        for (int64_t i = 0; i < rows * T; i++) {
            FZ_ASSERT(in[i] >= 0 && in[i] < 65536 && (!dd.vocab || (in[i] < dd.vocab && tg[i] < dd.vocab)));
            if (i % T) FZ_ASSERT(in[i] == tg[i - 1]);
        }
    }
    FZ_ASSERT(vs_data_free(d) == VS_OK);
    unlink(PATH);
    return 0;
}
