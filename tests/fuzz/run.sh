#!/usr/bin/env bash
# tests/fuzz/run.sh - builds the libFuzzer harnesses (tests/fuzz/fuzz_<name>.c) with
# clang into $B/fuzz/ and runs each for FUZZ_SECONDS (default 30) from its seed
# corpus (tests/fuzz/corpus/<name>/; new inputs go to $B/fuzz/corpus/<name>/).
# Prints per harness "ok fuzz/<name> (N execs)" or "not ok fuzz/<name>" (a finding,
# a build failure or a hang; the crashing input is kept as $B/fuzz/<name>-crash-*),
# or "skip fuzz/<name>: ..." when clang or libFuzzer is missing. Exit status 1 when
# any harness is not ok. Harnesses run FUZZ_JOBS at a time (default 2: each fuzzes on
# one core), their lines printed in order. The library is compiled once, instrumented
# as the harnesses are ($B/fuzz/impl.o from tests/vs_impl.c), and every harness links
# it, as the Makefile's tests do: one that uses only the public API with
# tests/vs_linked.h, one that names private parts (_vs_*, _VS_*) with
# tests/vs_private.h (the private helpers it calls compiled into it, instrumented
# the same); one that fails to build that way compiles the library in.
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

# the library alone, instrumented for the fuzzer but without its main (fuzzer-no-link);
# .rc says it is done
IMPL_FLAGS=${FLAGS/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,}
rm -f "$OUT/impl.rc"
# the implementation with the public functions' bodies removed (tests/vs_private.h)
mkdir -p "$OUT/priv"
for h in vescale*.h; do awk -f tests/vs_private.awk "$h" >"$OUT/priv/$h" || rm -rf "$OUT/priv"; done
own=$(cd tests/fuzz && grep -lE '\b_(vs|VS)_[A-Za-z]' $(printf 'fuzz_%s.c ' $NAMES) | sed 's/^fuzz_//; s/\.c$//')
linked() { ! printf '%s\n' $own | grep -qx "$1"; }
impl_ok() { # waits for the object's build: whether it built
    while ! [ -f "$OUT/impl.rc" ]; do sleep 0.2; done
    [ "$(cat "$OUT/impl.rc")" = 0 ]
}

one() { # name: builds and runs one harness; its lines go to $OUT/<name>.out, its status to .rc
    local n=$1 src="tests/fuzz/fuzz_$1.c" bin="$OUT/fuzz_$1" log="$OUT/$1.log" how
    if linked "$n"; then how="-include tests/vs_linked.h"; else how="-iquote $OUT/priv -include tests/vs_private.h"; fi
    if impl_ok && { linked "$n" || [ -d "$OUT/priv" ]; } &&
        "$CLANG" $FLAGS $how -o "$bin" "$src" "$OUT/impl.o" -lpthread -lm >"$log" 2>&1; then
        :
    elif ! "$CLANG" $FLAGS -o "$bin" "$src" -lpthread -lm >"$log" 2>&1; then
        cat "$log"
        echo "not ok fuzz/$n (build failed)"
        return 1
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
        return 1
    fi
}

JOBS=${FUZZ_JOBS:-2}
{
    "$CLANG" $IMPL_FLAGS -c -o "$OUT/impl.o" tests/vs_impl.c >"$OUT/impl.log" 2>&1
    echo $? >"$OUT/impl.rc.tmp" && mv "$OUT/impl.rc.tmp" "$OUT/impl.rc"
} &
for n in $NAMES; do
    while [ "$(jobs -pr | wc -l)" -ge "$JOBS" ]; do wait -n; done
    rm -f "$OUT/$n.rc"
    { one "$n" >"$OUT/$n.out" 2>&1; echo $? >"$OUT/$n.rc"; } &
done
wait
if [ "$(cat "$OUT/impl.rc")" != 0 ]; then
    cat "$OUT/impl.log"
    echo "    fuzz: tests/vs_impl.c did not build: every harness compiled the library in"
fi
fail=0
for n in $NAMES; do
    cat "$OUT/$n.out"
    [ "$(cat "$OUT/$n.rc" 2>/dev/null)" = 0 ] || fail=1
done
exit $fail
