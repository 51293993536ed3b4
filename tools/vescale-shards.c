/* vescale-shards - write token shards (the format vescale.h's data loader
   reads, vs_data_open: llm.c's) from any text files, so a trainer can be tried
   without downloads.

   vescale-shards [--bytes] [--shard-tokens N] OUT_PREFIX FILE...
       writes OUT_PREFIX_000000.bin, OUT_PREFIX_000001.bin, ... of at most N
       tokens each (default 1048576), the files' texts one after another, and
       prints one line per shard (its name and tokens). Folders of OUT_PREFIX
       that do not exist are created (as mkdir -p would).

   A shard: a header of 256 little-endian int32 (magic 20240520, version 1, the
   token count, the rest zero), then the tokens as little-endian uint16.

   Tokens. By default characters, in a vocabulary of 64 that the example GPT
   (examples/gpt.h, vocab 64) takes:
       0            end of text: each FILE's text starts with it (as llm.c's
                    shards start every document with <|endoftext|>)
       1 2          newline, space (a tab is a space; a carriage return is dropped)
       3 .. 28      a .. z (capitals folded to small letters)
       29 .. 38     0 .. 9
       39 .. 62     . , ; : ! ? ' " ( ) [ ] { } < > - + * / = _ # `
       63           anything else (other punctuation, bytes of UTF-8 beyond ASCII)
   --bytes: each byte is its token (a vocabulary of 256), no end-of-text token.

   Exit status: 0 written; 1 a file that cannot be read or written, or a folder
   that cannot be created (named); 2 bad usage. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { HEADER_INTS = 256, MAGIC = 20240520, VERSION = 1, EOT = 0, UNKNOWN = 63 };
static const char PUNCT[] = ".,;:!?'\"()[]{}<>-+*/=_#`"; // tokens 39 .. 62

/* The character token of byte c, or -1 to drop it. */
static int char_token(int c)
{
    if (c == '\r') return -1;
    if (c == '\n') return 1;
    if (c == ' ' || c == '\t') return 2;
    if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
    if (c >= 'a' && c <= 'z') return 3 + (c - 'a');
    if (c >= '0' && c <= '9') return 29 + (c - '0');
    const char* p = c ? strchr(PUNCT, c) : NULL;
    return p ? 39 + (int)(p - PUNCT) : UNKNOWN;
}

typedef struct shards {
    const char* prefix;
    long max;        // tokens a shard
    uint16_t* tok;   // the shard being filled
    long n;
    int index;
    long total;
} shards;

static void put_le32(unsigned char* p, uint32_t v)
{
    p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8), p[2] = (unsigned char)(v >> 16), p[3] = (unsigned char)(v >> 24);
}

/* Writes the tokens gathered so far as the next shard. */
static int flush_shard(shards* s)
{
    if (s->n == 0) return 0;
    char name[4200];
    snprintf(name, sizeof name, "%s_%06d.bin", s->prefix, s->index);
    FILE* f = fopen(name, "wb");
    if (!f) return fprintf(stderr, "vescale-shards: cannot write %s\n", name), 1;
    unsigned char h[HEADER_INTS * 4];
    memset(h, 0, sizeof h);
    put_le32(h, MAGIC), put_le32(h + 4, VERSION), put_le32(h + 8, (uint32_t)s->n);
    int ok = fwrite(h, 1, sizeof h, f) == sizeof h;
    for (long i = 0; ok && i < s->n; i++) {
        unsigned char b[2] = {(unsigned char)(s->tok[i] & 0xff), (unsigned char)(s->tok[i] >> 8)};
        ok = fwrite(b, 1, 2, f) == 2;
    }
    if (fclose(f) != 0) ok = 0;
    if (!ok) return fprintf(stderr, "vescale-shards: cannot write %s\n", name), 1;
    printf("%s: %ld tokens\n", name, s->n);
    s->total += s->n;
    s->index++, s->n = 0;
    return 0;
}

/* Creates the folders of prefix (everything before its last '/') that do not
   exist yet, so `vescale-shards build/shards/readme ...` works in a fresh tree. */
static int make_folders(const char* prefix)
{
    char dir[4096];
    const char* slash = strrchr(prefix, '/');
    if (!slash || slash == prefix) return 0;
    if ((size_t)(slash - prefix) >= sizeof dir) return fprintf(stderr, "vescale-shards: %s: path too long\n", prefix), 1;
    memcpy(dir, prefix, (size_t)(slash - prefix));
    dir[slash - prefix] = 0;
    for (char* p = dir + 1;; p++) { // each level in turn, the whole path last
        int last = *p == 0;
        if (*p != '/' && !last) continue;
        *p = 0;
        struct stat st;
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            return fprintf(stderr, "vescale-shards: cannot create the folder %s: %s\n", dir, strerror(errno)), 1;
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            return fprintf(stderr, "vescale-shards: cannot create the folder %s: a file of that name is in the way\n", dir), 1;
        if (last) return 0;
        *p = '/';
    }
}

static int put(shards* s, int t)
{
    s->tok[s->n++] = (uint16_t)t;
    return s->n == s->max ? flush_shard(s) : 0;
}

int main(int argc, char** argv)
{
    shards s;
    memset(&s, 0, sizeof s);
    s.max = 1L << 20;
    int bytes = 0, i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
        if (!strcmp(argv[i], "--bytes")) bytes = 1;
        else if (!strcmp(argv[i], "--shard-tokens") && i + 1 < argc) s.max = atol(argv[++i]);
        else break;
    }
    if (argc - i < 2 || s.max < 1 || s.max > INT32_MAX) {
        fprintf(stderr, "usage: vescale-shards [--bytes] [--shard-tokens N (1..2^31-1)] OUT_PREFIX FILE...\n");
        return 2;
    }
    s.prefix = argv[i++];
    s.tok = (uint16_t*)malloc((size_t)s.max * sizeof(uint16_t));
    if (!s.tok) return fprintf(stderr, "vescale-shards: out of memory\n"), 1;
    int rc = make_folders(s.prefix);
    for (; i < argc && !rc; i++) {
        FILE* f = fopen(argv[i], "rb");
        if (!f) {
            fprintf(stderr, "vescale-shards: cannot read %s\n", argv[i]);
            rc = 1;
            break;
        }
        if (!bytes) rc = put(&s, EOT);
        for (int c; !rc && (c = fgetc(f)) != EOF;) {
            int t = bytes ? c : char_token(c);
            if (t >= 0) rc = put(&s, t);
        }
        if (ferror(f)) {
            fprintf(stderr, "vescale-shards: cannot read %s\n", argv[i]);
            rc = 1;
        }
        fclose(f);
    }
    if (!rc) rc = flush_shard(&s);
    if (!rc) printf("%ld tokens in %d shards (vocabulary %d)\n", s.total, s.index, bytes ? 256 : 64);
    free(s.tok);
    return rc;
}
