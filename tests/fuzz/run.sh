#!/usr/bin/env bash
# tests/fuzz/run.sh - builds the libFuzzer harnesses (tests/fuzz/fuzz_<name>.c) with
# clang into $B/fuzz/ and runs each for FUZZ_SECONDS (default 30) from its seed
# corpus (tests/fuzz/corpus/<name>/; new inputs go to $B/fuzz/corpus/<name>/).
# Prints per harness "ok fuzz/<name> (N execs)" or "not ok fuzz/<name>" (a finding,
# a build failure or a hang; the crashing input is kept as $B/fuzz/<name>-crash-*),
# or "skip fuzz/<name>: ..." when clang or libFuzzer is missing. Exit status 1 when
# any harness is not ok. Harnesses run one after another.
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
CLANG=${CLANG:-clang}
NAMES=${FUZZ_NAMES:-"layout_parse layout_local dims env ckpt_index safetensors sched plan profile ckpt_dir data"}
OUT="$B/fuzz"
mkdir -p "$OUT"

skip_all() {
    for n in $NAMES; do echo "skip fuzz/$n: $1"; done
    exit 0
}
command -v "$CLANG" >/dev/null 2>&1 || skip_all "$CLANG not installed"
probe="$OUT/probe.c"
echo 'int LLVMFuzzerTestOneInput(const unsigned char* d, unsigned long n) { (void)d; (void)n; return 0; }' >"$probe"
"$CLANG" -fsanitize=fuzzer,address,undefined "$probe" -o "$OUT/probe" >/dev/null 2>&1 ||
    skip_all "$CLANG cannot link -fsanitize=fuzzer (libFuzzer runtime missing: libclang-rt-dev)"

FLAGS="-std=c99 -D_POSIX_C_SOURCE=200809L -g -O1 -Wall -Wextra -Werror -I. -Itests/fuzz"
FLAGS="$FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# the strict VESCALE_TIMEOUT/LOG/TRANSPORT parsers, where this header has them
grep -q '_vs_parse_timeout' vescale_mesh.h && FLAGS="$FLAGS -DVS_FUZZ_ENV_PARSERS"
# ASan's quarantine would otherwise grow to 256 MB per harness
export ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=32:malloc_context_size=20}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

fail=0
for n in $NAMES; do
    src="tests/fuzz/fuzz_$n.c"
    bin="$OUT/fuzz_$n"
    log="$OUT/$n.log"
    if ! "$CLANG" $FLAGS -o "$bin" "$src" -lpthread -lm >"$log" 2>&1; then
        cat "$log"
        echo "not ok fuzz/$n (build failed)"
        fail=1
        continue
    fi
    work="$OUT/corpus/$n"
    mkdir -p "$work"
    seeds="tests/fuzz/corpus/$n"
    [ -d "$seeds" ] || seeds=
    timeout $((FUZZ_SECONDS + 120)) "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
        -use_value_profile=1 -print_final_stats=1 -artifact_prefix="$OUT/$n-" "$work" $seeds >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
    secs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$log" | tail -1)
    if [ "$rc" -eq 0 ] && [ -n "$runs" ]; then
        echo "    fuzz/$n: Done $runs runs in $secs second(s), corpus $(ls "$work" | wc -l) inputs"
        echo "ok fuzz/$n ($runs execs)"
    else
        tail -n 60 "$log"
        [ "$rc" -eq 124 ] && echo "    fuzz/$n: hung past $((FUZZ_SECONDS + 120)) s"
        ls "$OUT/$n"-* 2>/dev/null | sed 's/^/    finding: /'
        echo "not ok fuzz/$n"
        fail=1
    fi
done
exit $fail
