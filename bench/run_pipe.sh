#!/usr/bin/env bash
# bench/run_pipe.sh - builds build/bench_pipe and runs it: every built-in pipeline
# schedule (gpipe, 1f1b, interleaved, zbh1, zbv, dualpipev) on P = 4 stages, 4 thread
# ranks, with modelled device time per layer, against vs_pipe_simulate fed with the
# costs measured in the same run. See bench/pipe.c for what it does.
#
#   B=build bash bench/run_pipe.sh [--unit-ms 2] [--units 16] [--mbs 8,16] [--reps 5]
#       [--kinds gpipe,1f1b,...] [--trace-dir build] [--draw] [--strict]
#
#   --unit-ms   modelled time of one layer's F, B or W in ms (default 2)
#   --units     layers of the model, a multiple of 8 (default 16)
#   --mbs       microbatch counts M (default 8,16)
#   --reps      timed runs per schedule, after one warm-up (default 5; the median)
#   --kinds     schedules to run (default all six)
#   --trace-dir where pipe_<kind>.json and pipe_<kind>_sim.json go (default build; - : none)
#   --draw      print each schedule's simulated text timeline (first M)
#   --strict    exit 1 when a performance target is missed (default: only printed)
# The output is also written to $B/bench_pipe.log.
# Exit status: 1 when the run failed or a result was wrong (or, with --strict, a target
# was missed); 2 on bad usage or a failed build.
set -u

cd "$(dirname "$0")/.." || exit 2
B=${B:-build}
BIN=build/bench_pipe
strict=0
args=()

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case $1 in
    --unit-ms | --units | --mbs | --reps | --kinds | --trace-dir)
        [ $# -ge 2 ] || { usage; exit 2; }; args+=("$1" "$2"); shift 2 ;;
    --unit-ms=* | --units=* | --mbs=* | --reps=* | --kinds=* | --trace-dir=*)
        args+=("${1%%=*}" "${1#*=}"); shift ;;
    --draw) args+=("$1"); shift ;;
    --strict) strict=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run_pipe.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done

mkdir -p build "$B" || exit 2
cc -std=c99 -O2 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -I. -o build/bench_pipe bench/pipe.c -lpthread -lm || exit 2

# The whole output is kept next to the binary (not in /tmp, which is shared here).
log=$B/bench_pipe.log
: >"$log" || exit 2
rc=0
t0=$(date +%s)
echo "### $BIN ${args[*]+${args[*]}}"
"$BIN" ${args[@]+"${args[@]}"} 2>&1 | tee -a "$log"
st=${PIPESTATUS[0]}
if [ "$st" -ne 0 ]; then
    echo "### FAILED (exit $st)"
    rc=1
fi

echo "###"
echo "### all summaries ($(($(date +%s) - t0)) s):"
grep '^summary ' "$log"
if [ $strict -eq 1 ] && grep -q '^summary .* MISS$' "$log"; then rc=1; fi
if grep -q '^summary .*correctness FAIL' "$log"; then rc=1; fi
exit $rc
