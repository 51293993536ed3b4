/* test_ckpt_format.c - vescale_ckpt.h's on-disk format: CRC32C, the JSON parser,
   safetensors headers (built, parsed, and read by Python's `safetensors` +
   numpy when installed), the index (write -> parse round trip) and a table of
   broken inputs each refused with the right message.
   `test_ckpt_format --make DIR VARIANT` writes the sample checkpoint of
   tests/ckpt_handmade.h (for tests/ckpt_tool.sh) and exits. */
#define VESCALE_IMPLEMENTATION
#include "vescale_ckpt.h"
#include "vs_test.h"
#include "ckpt_handmade.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CRC32C by the definition, a bit at a time: the reference. */
static uint32_t ref_crc(uint32_t crc, const unsigned char* p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
    }
    return ~crc;
}

static void t_crc_known(void)
{
    unsigned char b[32];
    VT_CHECK(_vs_crc32c(0, "123456789", 9) == 0xE3069283u, "check value %08x", _vs_crc32c(0, "123456789", 9));
    memset(b, 0, 32);
    VT_CHECK(_vs_crc32c(0, b, 32) == 0x8A9136AAu, "32 zeros %08x", _vs_crc32c(0, b, 32));
    memset(b, 0xff, 32);
    VT_CHECK(_vs_crc32c(0, b, 32) == 0x62A8AB43u, "32 0xff %08x", _vs_crc32c(0, b, 32));
    for (int i = 0; i < 32; i++) b[i] = (unsigned char)i;
    VT_CHECK(_vs_crc32c(0, b, 32) == 0x46DD794Eu, "0..31 %08x", _vs_crc32c(0, b, 32));
    VT_CHECK(_vs_crc32c(0x1234, NULL, 0) == 0x1234u, "empty input keeps crc");
    VT_CHECK(~_vs_crc32c_sw(~0u, (const unsigned char*)"123456789", 9) == 0xE3069283u, "table path");
}

/* Long inputs take the three-stream path (12 KiB and up): it must equal the
   bit-by-bit reference at every alignment and at lengths around the split. */
static void t_crc_long(void)
{
    enum { N = (1 << 20) + 4099 };
    unsigned char* buf = (unsigned char*)malloc(N + 16);
    for (int i = 0; i < N + 16; i++) buf[i] = (unsigned char)((unsigned)i * 2654435761u >> 13);
    static const size_t lens[] = {12287, 12288, 12289, 12296, 24583, 65536, 196607, 196608, 196615, 208903, 1 << 20, N};
    for (int a = 0; a < 8; a++)
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
            uint32_t want = ref_crc(7, buf + a, lens[k]);
            uint32_t got = _vs_crc32c(7, buf + a, lens[k]);
            VT_CHECK(got == want, "align %d len %zu: %08x, want %08x", a, lens[k], got, want);
        }
    free(buf);
#ifdef _VS_CRC32C_HW
    uint32_t op[32]; // the three-stream path's constant operators are what the squaring gives
    _vs_crc32c_shift_op(65536, op);
    VT_CHECK(!memcmp(op, _vs_crc32c_op64k, sizeof op), "the 64 KiB shift operator");
    _vs_crc32c_shift_op(4096, op);
    VT_CHECK(!memcmp(op, _vs_crc32c_op4k, sizeof op), "the 4 KiB shift operator");
#endif
}

static void t_crc_split(void)
{
    enum { N = 1031 };
    unsigned char* buf = (unsigned char*)malloc(N + 16);
    for (int i = 0; i < N + 16; i++) buf[i] = (unsigned char)(i * 131 + 17);
    for (int a = 0; a < 8; a++) { // every alignment, every length, the table path too
        for (int n = 0; n <= 300; n++) {
            uint32_t want = ref_crc(0, buf + a, (size_t)n);
            uint32_t got = _vs_crc32c(0, buf + a, (size_t)n);
            uint32_t sw = ~_vs_crc32c_sw(~0u, buf + a, (size_t)n);
            if (got != want || sw != want) {
                VT_CHECK(0, "align %d len %d: %08x / table %08x, want %08x", a, n, got, sw, want);
                a = 8;
                break;
            }
        }
    }
    uint32_t whole = ref_crc(0, buf, N);
    for (int s = 0; s <= N; s++) { // split-call continuation at every point
        uint32_t c = _vs_crc32c(_vs_crc32c(0, buf, (size_t)s), buf + s, (size_t)(N - s));
        if (c != whole) {
            VT_CHECK(0, "split at %d: %08x, want %08x", s, c, whole);
            break;
        }
    }
    uint32_t c3 = _vs_crc32c(_vs_crc32c(_vs_crc32c(0, buf, 5), buf + 5, 500), buf + 505, N - 505);
    VT_CHECK(c3 == whole, "three calls %08x vs %08x", c3, whole);
    free(buf);
}

static void t_crc_speed(void)
{
    size_t n = (size_t)64 << 20;
    unsigned char* b = (unsigned char*)malloc(n);
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 7 + (i >> 12));
    uint32_t c = _vs_crc32c(0, b, n); // warm
    double best = 1e9, bsw = 1e9;
    for (int r = 0; r < 3; r++) {
        double t0 = now_s();
        c ^= _vs_crc32c(0, b, n);
        double t1 = now_s();
        c ^= _vs_crc32c_sw(0, b, n);
        double t2 = now_s();
        if (t1 - t0 < best) best = t1 - t0;
        if (t2 - t1 < bsw) bsw = t2 - t1;
    }
    printf("    crc32c: %.2f GB/s (table fallback %.2f GB/s) [%08x]\n", (double)n / best / 1e9, (double)n / bsw / 1e9,
           c);
    VT_CHECK((double)n / best / 1e9 > 0.3, "crc32c at %.2f GB/s", (double)n / best / 1e9);
    free(b);
}

static void t_json(void)
{
    _vs_json J;
    const char* ok[] = {"{}", "[]", " [1, -2, 0, -0, 9223372036854775807, -9223372036854775808] ",
                        "{\"a\": {\"b\": [true, false, null]}, \"\\u00e9\\ud83d\\ude00\": \"x\\n\"}", "\"\xc3\xa9\xf0\x9f\x98\x80\"",
                        "1.5e3"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        vs_result r = _vs_json_parse(&J, NULL, "t", ok[i], strlen(ok[i]));
        VT_CHECK(r == VS_OK, "%s: %s", ok[i], vs_last_error());
        if (r == VS_OK) _vs_json_free(&J);
    }
    const char* s = "[9223372036854775807, -9223372036854775808, 9223372036854775808, 1e2, 0.5]";
    VT_OK(_vs_json_parse(&J, NULL, "t", s, strlen(s)));
    VT_CHECK(J.nd[1].isint && J.nd[1].i == INT64_MAX, "max");
    VT_CHECK(J.nd[2].isint && J.nd[2].i == INT64_MIN, "min");
    VT_CHECK(!J.nd[3].isint && !J.nd[4].isint && !J.nd[5].isint, "out of range / fractions are not integers");
    _vs_json_free(&J);
    s = "{\"k\\u00e9\": \"a\\\"b\\\\c\\/d\\u0001\"}";
    VT_OK(_vs_json_parse(&J, NULL, "t", s, strlen(s)));
    VT_CHECK(!strcmp(J.nd[1].key, "k\xc3\xa9") && !strcmp(J.nd[1].s, "a\"b\\c/d\x01"), "escapes decoded");
    _vs_json_free(&J);
    // nesting: 64 levels parse, 65 do not
    char deep[300];
    memset(deep, '[', 64), memset(deep + 64, ']', 64), deep[128] = 0;
    VT_OK(_vs_json_parse(&J, NULL, "t", deep, 128));
    _vs_json_free(&J);
    memset(deep, '[', 65), memset(deep + 65, ']', 65), deep[130] = 0;
    VT_ERR(_vs_json_parse(&J, NULL, "deep.json", deep, 130), VS_ERR_INVALID, "deeper than 64");
    static const struct { const char* text; const char* msg; } bad[] = {
        {"", "unexpected end"},
        {"{\"a\": 1", "unterminated object"},
        {"[1, 2", "unterminated array"},
        {"[1, 2,]", "not a JSON value"},
        {"{\"a\": 1,}", "expected a key"},
        {"{\"a\" 1}", "expected ':'"},
        {"{\"a\": 1, \"a\": 2}", "the key \"a\" twice"},
        {"[NaN]", "not a JSON value"},
        {"[Infinity]", "not a JSON value"},
        {"[01]", "leading zero"},
        {"[1.]", "bad fraction"},
        {"[1e]", "bad exponent"},
        {"[-]", "bad number"},
        {"\"abc", "unterminated string"},
        {"\"a\\qb\"", "bad escape"},
        {"\"\\u12g4\"", "bad \\u escape"},
        {"\"\\ud800\"", "unpaired high surrogate"},
        {"\"\\udc00\"", "lone low surrogate"},
        {"\"\\u0000\"", "\\u0000"},
        {"\"\xff\"", "invalid UTF-8"},
        {"\"\xc0\xaf\"", "invalid UTF-8"},
        {"\"\xed\xa0\x80\"", "invalid UTF-8"},
        {"\"\xf4\x90\x80\x80\"", "invalid UTF-8"},
        {"\"a\tb\"", "control character"},
        {"[1] [2]", "text after"},
        {"tru", "not a JSON value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        vs_clear_error();
        vs_result r = _vs_json_parse(&J, NULL, "bad.json", bad[i].text, strlen(bad[i].text));
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), bad[i].msg) && strstr(vs_last_error(), "bad.json"),
                 "%s -> %d %s (want '%s')", bad[i].text, r, vs_last_error(), bad[i].msg);
        if (r == VS_OK) _vs_json_free(&J);
    }
    // a NUL byte inside the text is not whitespace
    VT_ERR(_vs_json_parse(&J, NULL, "nul.json", "[1]\0", 4), VS_ERR_INVALID, "text after");
}

static void t_sbuf(void)
{
    _vs_sbuf b;
    memset(&b, 0, sizeof b);
    for (int i = 0; i < 1000; i++) _vs_sb_printf(&b, "%d,", i);
    VT_CHECK(!b.oom && b.len == strlen(b.p) && !strncmp(b.p, "0,1,2,", 6) && strstr(b.p, ",999,"), "growth");
    char big[700];
    memset(big, 'x', sizeof big - 1), big[sizeof big - 1] = 0;
    size_t before = b.len;
    _vs_sb_printf(&b, "<%s>", big);
    VT_CHECK(b.len == before + 701 && b.p[b.len - 1] == '>', "long printf");
    _vs_sb_free(&b);
    // strings: escaped, parse back to the same bytes (invalid UTF-8 as \u00XX)
    const char* in[] = {"plain", "q\"uo\\te", "tab\tnl\ncr\r\x01\x1f", "\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80", "/slash/"};
    for (size_t i = 0; i < sizeof in / sizeof *in; i++) {
        memset(&b, 0, sizeof b);
        _vs_sb_json_str(&b, in[i]);
        _vs_json J;
        VT_OK(_vs_json_parse(&J, NULL, "s", b.p, b.len));
        VT_CHECK(J.nd && J.nd[0].type == _VS_J_STR && !strcmp(J.nd[0].s, in[i]), "round trip of %s: %s", in[i], b.p);
        _vs_json_free(&J);
        _vs_sb_free(&b);
    }
    memset(&b, 0, sizeof b);
    _vs_sb_json_str(&b, "a\xff" "b");
    VT_CHECK(!strcmp(b.p, "\"a\\u00ffb\""), "invalid UTF-8 escaped: %s", b.p);
    _vs_sb_free(&b);
}

/* ---- safetensors ---------------------------------------------------------- */

static int have_python(void)
{
    static int have = -1;
    if (have < 0)
        have = system("python3 -c 'import numpy, safetensors' >/dev/null 2>&1") == 0 &&
               system("test -f tests/check_safetensors.py") == 0;
    return have;
}

static void t_st_roundtrip(void)
{
    _vs_st_tensor t[5];
    memset(t, 0, sizeof t);
    t[0].key = "a#0", t[0].dtype = VS_F32, t[0].ndim = 2, t[0].shape[0] = 3, t[0].shape[1] = 4, t[0].end = 48;
    t[1].key = "empty", t[1].dtype = VS_F16, t[1].ndim = 2, t[1].shape[0] = 0, t[1].shape[1] = 5, t[1].begin = t[1].end = 48;
    t[2].key = "z \"q\" \xc3\xa9", t[2].dtype = VS_BF16, t[2].ndim = 1, t[2].shape[0] = 3, t[2].begin = 48, t[2].end = 54;
    t[3].key = "scalar", t[3].dtype = VS_I64, t[3].ndim = 0, t[3].begin = 54, t[3].end = 62;
    t[4].key = "u", t[4].dtype = VS_U8, t[4].ndim = 8, t[4].begin = 62, t[4].end = 62 + 256;
    for (int d = 0; d < 8; d++) t[4].shape[d] = 2;
    char* h = NULL;
    size_t hl = 0;
    VT_OK(_vs_st_header(NULL, t, 5, "{\"format\":\"vescale\",\"rank\":\"3\"}", &h, &hl));
    if (!h) return;
    uint64_t n = 0;
    for (int k = 0; k < 8; k++) n |= (uint64_t)(unsigned char)h[k] << (8 * k);
    VT_CHECK(n == hl - 8 && hl % 8 == 0 && h[hl - 1] != 0, "length prefix %llu of %zu", (unsigned long long)n, hl);
    _vs_st_tensor* out = NULL;
    int no = 0;
    char* arena = NULL;
    VT_OK(_vs_st_parse(NULL, "rt.safetensors", h + 8, hl - 8, hl + 318, &out, &no, &arena));
    VT_CHECK(no == 5, "%d tensors", no);
    for (int i = 0; i < no && i < 5; i++) {
        VT_CHECK(!strcmp(out[i].key, t[i].key) && out[i].dtype == t[i].dtype && out[i].ndim == t[i].ndim &&
                     !memcmp(out[i].shape, t[i].shape, sizeof t[i].shape) && out[i].begin == t[i].begin &&
                     out[i].end == t[i].end,
                 "tensor %d (%s) differs", i, out[i].key);
    }
    vs_free(NULL, out);
    vs_free(NULL, arena);
    vs_free(NULL, h);
    h = NULL;
    // refused when built: holes, bad sizes, duplicate keys, metadata not string -> string
    t[1].begin = t[1].end = 50;
    VT_ERR(_vs_st_header(NULL, t, 2, NULL, &h, &hl), VS_ERR_INVALID, "contiguous");
    t[1].begin = t[1].end = 48;
    t[1].key = "a#0";
    VT_ERR(_vs_st_header(NULL, t, 2, NULL, &h, &hl), VS_ERR_INVALID, "twice");
    t[1].key = "empty";
    t[0].end = 44;
    VT_ERR(_vs_st_header(NULL, t, 1, NULL, &h, &hl), VS_ERR_INVALID, "a#0");
    t[0].end = 48;
    VT_ERR(_vs_st_header(NULL, t, 1, "{\"a\": 1}", &h, &hl), VS_ERR_INVALID, "not a string");
    VT_ERR(_vs_st_header(NULL, t, 1, "[1]", &h, &hl), VS_ERR_INVALID, "__metadata__");
    t[0].key = "__metadata__";
    VT_ERR(_vs_st_header(NULL, t, 1, NULL, &h, &hl), VS_ERR_INVALID, "__metadata__");
    vs_free(NULL, h);
}

/* A safetensors file of every dtype, read by the real package. */
static void t_st_python(void)
{
    if (!have_python()) {
        if (!getenv("VESCALE_TEST_REQUIRE_PYTHON")) {
            vt_skip("st_python", "python3 lacks numpy or safetensors (.ci/run installs them)");
            return;
        }
        vt_begin("st_python"); // CI: .ci/run installed them, so their absence is a failure
        VT_CHECK(0, "python3 lacks numpy or safetensors, and VESCALE_TEST_REQUIRE_PYTHON is set");
        vt_end("st_python");
        return;
    }
    vt_begin("st_python");
    char dir[] = "/tmp/vs_ckfmt_XXXXXX";
    VT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    const vs_dtype dts[] = {VS_F32, VS_F16, VS_BF16, VS_F64, VS_I32, VS_I64, VS_U8};
    const int64_t shapes[7][3] = {{3, 4, 1}, {5, 1, 1}, {2, 3, 1}, {1, 1, 7}, {4, 4, 1}, {6, 1, 1}, {2, 2, 2}};
    const int nds[7] = {2, 1, 2, 3, 2, 1, 3};
    _vs_st_tensor t[7];
    void* data[7];
    size_t len[7], at = 0;
    char cmd[4096];
    int o = snprintf(cmd, sizeof cmd, "python3 tests/check_safetensors.py %s/all.safetensors --keys=", dir);
    for (int i = 0; i < 7; i++) {
        memset(&t[i], 0, sizeof t[i]);
        char* key = (char*)malloc(16);
        snprintf(key, 16, "t%d", i);
        t[i].key = key, t[i].dtype = dts[i], t[i].ndim = nds[i];
        memcpy(t[i].shape, shapes[i], 3 * sizeof(int64_t));
        data[i] = hm_full(dts[i], nds[i], shapes[i], i);
        len[i] = (size_t)hm_numel(nds[i], shapes[i]) * vs_dtype_size(dts[i]);
        t[i].begin = at, t[i].end = at + len[i], at += len[i];
        o += snprintf(cmd + o, sizeof cmd - (size_t)o, "%s%s", i ? "," : "", key);
    }
    char* h = NULL;
    size_t hl = 0;
    VT_OK(_vs_st_header(NULL, t, 7, "{\"format\":\"vescale\",\"rank\":\"0\"}", &h, &hl));
    char path[256];
    snprintf(path, sizeof path, "%s/all.safetensors", dir);
    FILE* f = fopen(path, "wb");
    fwrite(h, 1, hl, f);
    for (int i = 0; i < 7; i++) {
        fwrite(data[i], 1, len[i], f);
        char bin[256];
        snprintf(bin, sizeof bin, "%s/t%d.bin", dir, i);
        hm_write_file(bin, data[i], len[i], NULL, 0);
        o += snprintf(cmd + o, sizeof cmd - (size_t)o, " t%d=%s", i, bin);
        free(data[i]);
        free((void*)t[i].key);
    }
    fclose(f);
    vs_free(NULL, h);
    o += snprintf(cmd + o, sizeof cmd - (size_t)o, " >%s/py.log 2>&1", dir);
    int rc = system(cmd);
    VT_CHECK(rc == 0, "check_safetensors.py said %d (see %s/py.log)", rc, dir);
    if (rc == 0) {
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        VT_CHECK(system(cmd) == 0, "rm");
    }
    vt_end("st_python");
}

static void st_expect(const char* json, uint64_t data_bytes, const char* frag)
{
    char* h = (char*)malloc(strlen(json) + 1); // exactly the bytes, no NUL after them for ASan to miss
    memcpy(h, json, strlen(json));
    _vs_st_tensor* out = NULL;
    int n = 0;
    char* arena = NULL;
    vs_clear_error();
    vs_result r = _vs_st_parse(NULL, "bad.safetensors", h, strlen(json), 8 + strlen(json) + data_bytes, &out, &n, &arena);
    if (frag) {
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), frag) && strstr(vs_last_error(), "bad.safetensors"),
                 "%s -> %d '%s' (want '%s')", json, r, vs_last_error(), frag);
    } else {
        VT_CHECK(r == VS_OK, "%s: %s", json, vs_last_error());
    }
    VT_CHECK(r == VS_OK || (!out && !arena && !n), "outputs cleared on error");
    vs_free(NULL, out);
    vs_free(NULL, arena);
    free(h);
}

static void t_st_reject(void)
{
    st_expect("{}", 0, NULL);
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"__metadata__\":{\"x\":\"y\"}}  ", 8, NULL);
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, "unterminated");
    st_expect("[]", 0, "not an object");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "past the end of the file");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, "4 bytes after the last tensor");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "hole of 4 bytes before tensor \"a\"");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
              8, "overlaps");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "hold 8 bytes, but F32 x shape is 12");
    st_expect("{\"a\":{\"dtype\":\"F8\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype \"F8\"");
    st_expect("{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype");
    st_expect("{\"a\":{\"dtype\":5,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype is an integer");
    st_expect("{\"a\":{\"dtype\":\"U8\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "non-negative");
    st_expect("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1, "9 dims");
    st_expect("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0]}}", 2, "data_offsets");
    st_expect("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,0]}}", 2, "data_offsets");
    st_expect("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,99999999999999999999999]}}", 2, "data_offsets");
    st_expect("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,0]}}", 0,
              "shape too large");
    st_expect("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2],\"extra\":1}}", 2, "unknown field \"extra\"");
    st_expect("{\"a\":[1]}", 0, "not an object");
    st_expect("{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ \"k\" is an integer");
    st_expect("{\"__metadata__\":[]}", 0, "__metadata__ is an array");
    st_expect("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]}}",
              4, "twice");
    // header length bounds
    _vs_st_tensor* out = NULL;
    int n = 0;
    char* arena = NULL;
    VT_ERR(_vs_st_parse(NULL, "big.safetensors", "{}", (size_t)100000001, (uint64_t)1 << 40, &out, &n, &arena),
           VS_ERR_INVALID, "100 MB");
    VT_ERR(_vs_st_parse(NULL, "short.safetensors", "{}", 2, 9, &out, &n, &arena), VS_ERR_INVALID, "shorter than its header");
}

/* ---- index ---------------------------------------------------------------- */

static void t_index_roundtrip(void)
{
    char dir[] = "/tmp/vs_ckfmt_XXXXXX";
    VT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    VT_CHECK(hm_sample(dir, 0) == 0, "hm_sample: %s", vs_last_error());
    char path[256];
    snprintf(path, sizeof path, "%s/index.json", dir);
    FILE* f = fopen(path, "rb");
    char* text = (char*)malloc(1 << 20);
    size_t len = f ? fread(text, 1, 1 << 20, f) : 0;
    if (f) fclose(f);
    _vs_ckpt_index ix;
    VT_OK(_vs_ckpt_index_parse(NULL, path, text, len, &ix));
    hm_entry e[HM_NSAMPLE];
    int n = hm_sample_entries(e, 0);
    VT_CHECK(ix.ne == n && ix.nfiles == 3 && ix.block == 64 && ix.mesh_ndims == 2 && !strcmp(ix.mesh_dims[1], "TP"),
             "index header: %d entries %d files", ix.ne, ix.nfiles);
    for (int i = 0; i < n && i < ix.ne; i++) {
        const _vs_ckpt_ientry* ie = &ix.e[i];
        VT_CHECK(!strcmp(ie->name, e[i].name) && ie->kind == e[i].kind && ie->npieces == e[i].np, "entry %s", e[i].name);
        if (e[i].kind != VS_CKPT_BLOB)
            VT_CHECK(ie->dtype == e[i].dt && ie->ndim == e[i].ndim && !memcmp(ie->shape, e[i].shape, sizeof ie->shape) &&
                         (e[i].layout ? ie->layout && !strcmp(ie->layout, e[i].layout) : !ie->layout),
                     "entry %s meta", e[i].name);
        else
            VT_CHECK(ie->blob_bytes == e[i].blob_bytes && ie->dtype == VS_U8, "blob %s", e[i].name);
        for (int k = 0; k < ie->npieces && k < e[i].np; k++) {
            const _vs_ckpt_piece* p = &ie->pieces[k];
            VT_CHECK(p->file == e[i].p[k].file, "%s#%d file", e[i].name, k);
            if (e[i].kind != VS_CKPT_BLOB)
                VT_CHECK(!memcmp(p->off, e[i].p[k].off, sizeof p->off) && !memcmp(p->box, e[i].p[k].box, sizeof p->box),
                         "%s#%d box", e[i].name, k);
            if (e[i].kind == VS_CKPT_RANGE)
                VT_CHECK(p->range_begin == e[i].p[k].rb && p->range_end == e[i].p[k].re, "%s#%d range", e[i].name, k);
            // the piece's bytes in its file: CRCs by the reference
            snprintf(path, sizeof path, "%s/%s", dir, ix.files[p->file]);
            FILE* g = fopen(path, "rb");
            size_t bytes = (size_t)(p->data_end - p->data_begin);
            unsigned char* buf = (unsigned char*)malloc(bytes + 1);
            VT_CHECK(g && fseek(g, (long)p->data_begin, SEEK_SET) == 0 && fread(buf, 1, bytes, g) == bytes, "read");
            if (g) fclose(g);
            VT_CHECK(p->ncrc == (int)((bytes + 63) / 64), "%s#%d: %d crcs", e[i].name, k, p->ncrc);
            for (int c = 0; c < p->ncrc; c++) {
                size_t b0 = (size_t)c * 64, b1 = b0 + 64 < bytes ? b0 + 64 : bytes;
                VT_CHECK(p->crc[c] == ref_crc(0, buf + b0, b1 - b0), "%s#%d crc %d", e[i].name, k, c);
            }
            free(buf);
        }
    }
    // every shard parses as safetensors, and its pieces are where the index says
    for (int fi = 0; fi < ix.nfiles; fi++) {
        snprintf(path, sizeof path, "%s/%s", dir, ix.files[fi]);
        FILE* g = fopen(path, "rb");
        unsigned char* buf = (unsigned char*)malloc(1 << 16);
        size_t got = g ? fread(buf, 1, 1 << 16, g) : 0;
        if (g) fclose(g);
        uint64_t hn = 0;
        for (int k = 0; k < 8; k++) hn |= (uint64_t)buf[k] << (8 * k);
        VT_CHECK(got == ix.file_bytes[fi] && hn + 8 <= got, "%s: %zu bytes", path, got);
        _vs_st_tensor* st = NULL;
        int ns = 0;
        char* arena = NULL;
        VT_OK(_vs_st_parse(NULL, path, (const char*)buf + 8, (size_t)hn, got, &st, &ns, &arena));
        for (int s = 0; s < ns; s++) {
            int found = 0;
            for (int i = 0; i < ix.ne; i++)
                for (int k = 0; k < ix.e[i].npieces; k++)
                    if (ix.e[i].pieces[k].file == fi && !strcmp(ix.e[i].pieces[k].key, st[s].key))
                        found = ix.e[i].pieces[k].data_begin == 8 + hn + st[s].begin &&
                                ix.e[i].pieces[k].data_end == 8 + hn + st[s].end;
            VT_CHECK(found, "%s: %s matches the index", path, st[s].key);
        }
        vs_free(NULL, st);
        vs_free(NULL, arena);
        free(buf);
    }
    // write -> parse -> write gives the same text
    _vs_sbuf b;
    memset(&b, 0, sizeof b);
    VT_OK(_vs_ckpt_index_write(&ix, &b));
    VT_CHECK(b.len == len && !memcmp(b.p, text, len), "rewrite differs");
    _vs_ckpt_index ix2;
    VT_OK(_vs_ckpt_index_parse(NULL, "again", b.p, b.len, &ix2));
    _vs_sbuf b2;
    memset(&b2, 0, sizeof b2);
    VT_OK(_vs_ckpt_index_write(&ix2, &b2));
    VT_CHECK(b2.len == b.len && !memcmp(b.p, b2.p, b.len), "second rewrite differs");
    _vs_sb_free(&b);
    _vs_sb_free(&b2);
    _vs_ckpt_index_free(NULL, &ix2);
    // without checksums
    ix.block = 0;
    memset(&b, 0, sizeof b);
    VT_OK(_vs_ckpt_index_write(&ix, &b));
    VT_OK(_vs_ckpt_index_parse(NULL, "nocrc", b.p, b.len, &ix2));
    VT_CHECK(ix2.block == 0 && ix2.e[0].pieces[0].crc == NULL && strstr(b.p, "\"checksum\": null"), "no checksums");
    _vs_ckpt_index_free(NULL, &ix2);
    _vs_sb_free(&b);
    // the shards through Python's safetensors
    if (have_python()) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "for f in %s/shard-*.safetensors; do python3 tests/check_safetensors.py $f >/dev/null || exit 1; done",
                 dir);
        VT_CHECK(system(cmd) == 0, "a shard does not open in python");
    }
    _vs_ckpt_index_free(NULL, &ix);
    hm_free(e, n);
    free(text);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    VT_CHECK(system(cmd) == 0, "rm");
}

/* A valid index; each broken case replaces one substring of it. */
static const char good_index[] =
    "{\"format\": \"vescale-ckpt\", \"version\": 1,\n"
    " \"mesh\": {\"shape\": [2, 2], \"dims\": [\"DP\", \"TP\"]},\n"
    " \"checksum\": {\"kind\": \"crc32c\", \"block\": 16},\n"
    " \"files\": [{\"name\": \"shard-00000.safetensors\", \"bytes\": 200}, {\"name\": \"shard-00001.safetensors\", \"bytes\": 100}],\n"
    " \"entries\": [\n"
    "  {\"name\": \"w\", \"kind\": \"tensor\", \"dtype\": \"f32\", \"shape\": [4, 2], \"layout\": \"[Shard(0)]\",\n"
    "   \"pieces\": [{\"file\": 0, \"key\": \"w#0\", \"offset\": [0, 0], \"box\": [2, 2], \"data\": [64, 80], \"crc32c\": [\"e3069283\"]},\n"
    "              {\"file\": 1, \"key\": \"w#1\", \"offset\": [2, 0], \"box\": [2, 2], \"data\": [64, 80], \"crc32c\": [\"00000000\"]}]},\n"
    "  {\"name\": \"m\", \"kind\": \"range\", \"dtype\": \"f32\", \"shape\": [3, 3], \"layout\": null,\n"
    "   \"pieces\": [{\"file\": 0, \"key\": \"m#0\", \"offset\": [0, 0], \"box\": [3, 3], \"range\": [0, 5], \"data\": [80, 100], \"crc32c\": [\"00000001\", \"00000002\"]},\n"
    "              {\"file\": 0, \"key\": \"m#1\", \"offset\": [0, 0], \"box\": [3, 3], \"range\": [5, 9], \"data\": [100, 116], \"crc32c\": [\"00000003\"]}]},\n"
    "  {\"name\": \"step\", \"kind\": \"blob\", \"bytes\": 8,\n"
    "   \"pieces\": [{\"file\": 1, \"key\": \"step#0\", \"data\": [80, 88], \"crc32c\": [\"0000000a\"]}]}]}\n";

static void index_expect(const char* from, const char* to, const char* frag)
{
    const char* at = strstr(good_index, from);
    VT_CHECK(at, "case text '%s' not in the index", from);
    if (!at) return;
    size_t a = (size_t)(at - good_index), nf = strlen(from), nt = strlen(to), n = sizeof good_index - 1 - nf + nt;
    char* t = (char*)malloc(n); // no NUL after: the parser must keep to len
    memcpy(t, good_index, a);
    memcpy(t + a, to, nt);
    memcpy(t + a + nt, at + nf, sizeof good_index - 1 - a - nf);
    _vs_ckpt_index ix;
    vs_clear_error();
    vs_result r = _vs_ckpt_index_parse(NULL, "ck/index.json", t, n, &ix);
    if (frag) {
        VT_CHECK(r == VS_ERR_INVALID && strstr(vs_last_error(), frag) && strstr(vs_last_error(), "ck/index.json"),
                 "'%s' -> '%s': %d '%s' (want '%s')", from, to, r, vs_last_error(), frag);
        VT_CHECK(r == VS_OK || (ix.ne == 0 && ix.e == NULL && ix.files == NULL), "index cleared on error");
    } else {
        VT_CHECK(r == VS_OK, "'%s' -> '%s': %s", from, to, vs_last_error());
    }
    if (r == VS_OK) _vs_ckpt_index_free(NULL, &ix);
    free(t);
}

static void t_index_reject(void)
{
    index_expect("\"version\": 1", "\"version\": 1", NULL); // the base case parses
    index_expect("}]}]}\n", "}]}]", "unterminated");
    index_expect("\"entries\": [\n", "\"entries\": [[", "expected ',' or ']'");
    index_expect("\"format\": \"vescale-ckpt\"", "\"format\": \"other\"", "\"format\"");
    index_expect("\"version\": 1", "\"version\": 2", "\"version\" is not 1");
    index_expect("\"version\": 1", "\"version\": \"1\"", "\"version\"");
    index_expect("\"shape\": [2, 2], \"dims\"", "\"shape\": [2, 0], \"dims\"", "mesh shape[1] = 0");
    index_expect("\"dims\": [\"DP\", \"TP\"]", "\"dims\": [\"DP\"]", "mesh \"dims\"");
    index_expect("\"block\": 16", "\"block\": 0", "\"block\"");
    index_expect("\"kind\": \"crc32c\"", "\"kind\": \"md5\"", "\"checksum\"");
    index_expect("\"name\": \"shard-00001.safetensors\"", "\"name\": \"../x\"", "plain file name");
    index_expect("\"name\": \"shard-00001.safetensors\"", "\"name\": \"shard-00000.safetensors\"", "listed twice");
    index_expect("\"bytes\": 100}", "\"bytes\": -1}", "\"bytes\"");
    index_expect("\"bytes\": 100}", "\"bytes\": 84}", "past the end of shard-00001.safetensors");
    index_expect("\"name\": \"m\"", "\"name\": \"w\"", "entry \"w\": two entries have this name");
    index_expect("\"name\": \"m\"", "\"name\": 5", "entry 1: \"name\"");
    index_expect("\"kind\": \"range\"", "\"kind\": \"ranges\"", "entry \"m\": unknown kind");
    index_expect("\"dtype\": \"f32\", \"shape\": [4, 2]", "\"dtype\": \"f8\", \"shape\": [4, 2]", "entry \"w\": unknown dtype \"f8\"");
    index_expect("\"shape\": [4, 2]", "\"shape\": [4, -2]", "entry \"w\": \"shape\" is not an array of non-negative");
    index_expect("\"shape\": [4, 2]", "\"shape\": [1, 1, 1, 1, 1, 1, 1, 1, 1]", "9 dims");
    index_expect("\"shape\": [4, 2]", "\"shape\": [4, 99999999999999999999]", "non-negative integers");
    index_expect("\"shape\": [4, 2]", "\"shape\": [4, 2.5]", "non-negative integers");
    index_expect("\"shape\": [4, 2]", "\"shape\": [4294967296, 4294967296]", "shape too large");
    index_expect("\"layout\": \"[Shard(0)]\"", "\"layout\": 3", "\"layout\" is not a string");
    index_expect("\"file\": 1, \"key\": \"w#1\"", "\"file\": 2, \"key\": \"w#1\"", "entry \"w\": piece 1: \"file\"");
    index_expect("\"key\": \"w#1\"", "\"key\": \"\"", "piece 1: \"key\"");
    index_expect("\"offset\": [2, 0]", "\"offset\": [3, 0]", "entry \"w\": piece 1: box [3, 5) of dim 0 is outside");
    index_expect("\"offset\": [2, 0]", "\"offset\": [2]", "\"offset\" and \"box\"");
    index_expect("\"offset\": [2, 0]", "\"offset\": [1, 0]", "entry \"w\": piece 1: overlaps piece 0");
    index_expect("\"box\": [2, 2], \"data\": [64, 80], \"crc32c\": [\"00000000\"]", "\"box\": [2, 1], \"data\": [64, 80], \"crc32c\": [\"00000000\"]",
                 "entry \"w\": piece 1: data [64, 80) holds 16 bytes, but the piece has 8");
    index_expect("\"data\": [64, 80], \"crc32c\": [\"e3069283\"]", "\"data\": [64, 300], \"crc32c\": [\"e3069283\"]",
                 "entry \"w\": piece 0: data [64, 300) is past the end of shard-00000.safetensors (200 bytes)");
    index_expect("\"data\": [64, 80], \"crc32c\": [\"e3069283\"]", "\"data\": [80, 64], \"crc32c\": [\"e3069283\"]", "\"data\"");
    index_expect("\"crc32c\": [\"e3069283\"]", "\"crc32c\": [\"E3069283\"]", "piece 0: \"crc32c\"[0] is not 8 lower-case hex");
    index_expect("\"crc32c\": [\"e3069283\"]", "\"crc32c\": [\"e306928\"]", "\"crc32c\"[0]");
    index_expect("\"crc32c\": [\"e3069283\"]", "\"crc32c\": [\"e3069283x\"]", "\"crc32c\"[0]");
    index_expect("\"crc32c\": [\"e3069283\"]", "\"crc32c\": [\"e3069283\", \"00000000\"]",
                 "\"crc32c\" has 2 CRCs, but 16 bytes in blocks of 16 need 1");
    index_expect("\"crc32c\": [\"e3069283\"]", "\"crc32c\": null", "\"crc32c\" is null");
    index_expect("\"checksum\": {\"kind\": \"crc32c\", \"block\": 16}", "\"checksum\": null", "without checksums");
    index_expect("\"range\": [5, 9]", "\"range\": [4, 8]", "entry \"m\": piece 1: overlaps piece 0");
    index_expect("\"range\": [5, 9]", "\"range\": [5, 10]", "\"range\" is not [begin, end]");
    index_expect("\"range\": [0, 5]", "\"range\": [5, 0]", "\"range\" is not [begin, end]");
    index_expect("\"offset\": [0, 0], \"box\": [3, 3], \"range\": [0, 5]", "\"offset\": [0, 0], \"box\": [3, 3]", "\"range\"");
    index_expect("\"offset\": [0, 0], \"box\": [2, 2], \"data\"", "\"offset\": [0, 0], \"box\": [2, 2], \"range\": [0, 1], \"data\"",
                 "a tensor piece has a \"range\"");
    index_expect("\"data\": [100, 116]", "\"data\": [96, 112]", "overlaps entry \"m\" piece 0");
    index_expect("\"bytes\": 8", "\"bytes\": 9", "entry \"step\": piece 0: data [80, 88) holds 8 bytes, but the piece has 9");
    index_expect("\"pieces\": [{\"file\": 1, \"key\": \"step#0\", \"data\": [80, 88], \"crc32c\": [\"0000000a\"]}]",
                 "\"pieces\": []", "a blob without pieces");
    index_expect("\"pieces\": [{\"file\": 1, \"key\": \"step#0\"", "\"pieces\": {\"file\": 1, \"key\": \"step#0\"", "");
    index_expect("\"entries\": [", "\"entries\": {", "");
    index_expect("\"files\": [", "\"files\": 7, \"x\": [", "\"files\" is an integer");
    index_expect("\"mesh\": {", "\"mesh\": {\"shape\": 1, ", "twice");
    index_expect("{\"format\"", "[{\"format\"", "");
    // deep nesting, huge numbers, NaN
    char* deep = (char*)malloc(2000);
    memset(deep, '[', 1000);
    memcpy(deep + 1000, "1", 1);
    memset(deep + 1001, ']', 999);
    _vs_ckpt_index ix;
    VT_ERR(_vs_ckpt_index_parse(NULL, "deep/index.json", deep, 1001 + 999, &ix), VS_ERR_INVALID, "deeper than 64");
    free(deep);
    index_expect("\"version\": 1", "\"version\": NaN", "not a JSON value");
    index_expect("\"version\": 1", "\"version\": 1e400", "\"version\"");
    index_expect("\"bytes\": 200}", "\"bytes\": 18446744073709551616}", "\"bytes\"");
}

int main(int argc, char** argv)
{
    if (argc == 4 && !strcmp(argv[1], "--make")) {
        int rc = hm_sample(argv[2], atoi(argv[3]));
        if (rc) fprintf(stderr, "test_ckpt_format --make %s: failed (%s)\n", argv[2], vs_last_error());
        return rc ? 1 : 0;
    }
    VT_CASE("crc_known", t_crc_known());
    VT_CASE("crc_split", t_crc_split());
    VT_CASE("crc_long", t_crc_long());
    VT_CASE("crc_speed", t_crc_speed());
    VT_CASE("json", t_json());
    VT_CASE("sbuf", t_sbuf());
    VT_CASE("st_roundtrip", t_st_roundtrip());
    t_st_python();
    VT_CASE("st_reject", t_st_reject());
    VT_CASE("index_roundtrip", t_index_roundtrip());
    VT_CASE("index_reject", t_index_reject());
    return vt_summary();
}
