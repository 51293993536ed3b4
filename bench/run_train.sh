#!/usr/bin/env bash
# bench/run_train.sh - builds build/bench_train and runs it: the example GPT through
# vs_train_step (tokens/s and the library's overhead on 1, 2 and 4 thread ranks), then
# the planner's predicted step time against the measured one for every mesh of 8
# ranks with modelled device time. See bench/train.c for what it measures and how.
#
#   B=build bash bench/run_train.sh [--reps 7] [--steps-model-ms 400] [--profile-rows 16]
#       [--skip-real] [--skip-plan] [--strict]
#
#   --reps            timed steps per configuration, after one warm-up (the median)
#   --steps-model-ms  (c): one modelled device's time for the whole step (default 400)
#   --profile-rows    (c): rows of the microbatch vs_profile_measure times (default 16)
#   --skip-real       skip (a) and (b)
#   --skip-plan       skip (c)
#   --strict          exit 1 when a target is missed (default: only printed)
# The output is also written to $B/bench_train.log.
# Exit status: 1 when a run failed or a loss was not finite (or, with --strict, a
# target was missed); 2 on bad usage or a failed build.
set -u

cd "$(dirname "$0")/.." || exit 2
B=${B:-build}
BIN=build/bench_train
args=()

usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case $1 in
    --reps | --steps-model-ms | --profile-rows)
        [ $# -ge 2 ] || { usage; exit 2; }; args+=("$1" "$2"); shift 2 ;;
    --reps=* | --steps-model-ms=* | --profile-rows=*) args+=("${1%%=*}" "${1#*=}"); shift ;;
    --skip-real | --skip-plan | --strict) args+=("$1"); shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run_train.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done

mkdir -p build "$B" || exit 2
cc -std=c99 -O2 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -I. -o "$BIN" bench/train.c -lpthread -lm || exit 2

log=$B/bench_train.log
: >"$log" || exit 2
t0=$(date +%s)
echo "### $BIN ${args[*]+${args[*]}}"
"$BIN" ${args[@]+"${args[@]}"} 2>&1 | tee -a "$log"
st=${PIPESTATUS[0]}
[ "$st" -ne 0 ] && echo "### FAILED (exit $st)"
# the same model's steady step on GPUs, counted over the strict stand-in (no GPU needed;
# skipped without the CUDA toolkit's headers and NVRTC)
if make -s B="$B" "$B/bench_train_counts" >/dev/null 2>&1; then
    echo "### $B/bench_train_counts"
    "$B/bench_train_counts" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -ne 0 ] && { echo "### bench_train_counts: FAILED or a target missed"; st=1; }
else
    echo "### bench_train_counts: not built (needs the CUDA toolkit's headers, nccl.h and NVRTC)"
fi
echo "###"
echo "### all summaries ($(($(date +%s) - t0)) s):"
grep '^summary ' "$log"
[ "$st" -ne 0 ] && exit 1
exit 0
