#!/usr/bin/env bash
# bench/run_redistribute.sh - builds build/bench_redistribute, runs it once per rank
# count and collects the summary lines. See bench/redistribute.c for what it does.
#
#   B=build bash bench/run_redistribute.sh [--ranks 2,4,8] [--max-mib 256] [--min-mib 1]
#       [--cols 1024] [--budget 0.4] [--min-iters 7] [--max-iters 200] [--cases LIST] [--strict]
#
#   --ranks     rank counts N, comma or space separated (default 2,4,8)
#   --max-mib   largest tensor in MiB (default 256); e.g. --max-mib 16 --ranks 2 is quick
#   --min-mib   smallest tensor in MiB (default 1); sizes go up by 4x
#   --cols      columns of the 2-D f32 tensor (default 1024; N must divide it)
#   --budget    seconds of timed iterations per point (default 0.4)
#   --min-iters timed iterations at least (default 7; 10 below 16 MiB); 3 is quicker
#   --cases     which cases, comma separated (default all: S0->R,P->R,P->S0,S0->S1,S1->R,P->S1)
#   --strict    exit 1 when a performance target is missed (default: only printed)
# The output is also written to $B/bench_redistribute.log.
# Exit status: 1 when a run failed or a result was wrong (or, with --strict, a target
# was missed); 2 on bad usage or a failed build.
set -u

cd "$(dirname "$0")/.." || exit 2
B=${B:-build}
BIN=build/bench_redistribute
ranks="2 4 8"
strict=0
args=()

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case $1 in
    --ranks) [ $# -ge 2 ] || { usage; exit 2; }; ranks=${2//,/ }; shift 2 ;;
    --ranks=*) ranks=${1#--ranks=}; ranks=${ranks//,/ }; shift ;;
    --max-mib | --min-mib | --cols | --budget | --min-iters | --max-iters | --cases)
        [ $# -ge 2 ] || { usage; exit 2; }; args+=("$1" "$2"); shift 2 ;;
    --max-mib=* | --min-mib=* | --cols=* | --budget=* | --min-iters=* | --max-iters=* | --cases=*)
        args+=("${1%%=*}" "${1#*=}"); shift ;;
    --strict) strict=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run_redistribute.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done

for n in $ranks; do
    case $n in '' | *[!0-9]*) echo "run_redistribute.sh: bad rank count '$n'" >&2; exit 2 ;; esac
done

mkdir -p build "$B" || exit 2
cc -std=c99 -O2 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -I. -o build/bench_redistribute bench/redistribute.c -lpthread -lm || exit 2

# The whole output is kept next to the binary (not in /tmp, which is shared here).
log=$B/bench_redistribute.log
: >"$log" || exit 2
rc=0
t0=$(date +%s)
for n in $ranks; do
    # one process per N: every N starts with the memory of the one before returned
    echo "### N=$n: $BIN --ranks $n ${args[*]+${args[*]}}"
    "$BIN" --ranks "$n" ${args[@]+"${args[@]}"} 2>&1 | tee -a "$log"
    st=${PIPESTATUS[0]}
    if [ "$st" -ne 0 ]; then
        echo "### N=$n: FAILED (exit $st)"
        rc=1
    fi
done

echo "###"
echo "### all summaries ($(($(date +%s) - t0)) s):"
grep '^summary ' "$log"
if [ $strict -eq 1 ] && grep -q '^summary .* FAIL$' "$log"; then rc=1; fi
if grep -q '^summary .* correctness .*FAIL$' "$log"; then rc=1; fi
exit $rc
