#!/usr/bin/env bash
# bench/run_ckpt.sh - builds build/bench_ckpt and runs it: 1 GiB of shards saved and
# loaded on 4 thread ranks with fsync, against the raw write and read bandwidth of the
# same disk measured in the same run. See bench/ckpt.c for what it does.
#
#   B=build bash bench/run_ckpt.sh [--mib 1024] [--reps 5] [--dir $B/ckbench] [--strict]
#
#   --dir     where the checkpoints and the raw file go (default $B/ckbench: the disk
#             that holds the build, not a tmpfs); removed afterwards
#   --strict  exit 1 when a performance target is missed (default: only printed)
# The output is also written to $B/bench_ckpt.log.
# Exit status: 1 when the run failed or a loaded byte was wrong (or, with --strict, a
# target was missed); 2 on bad usage or a failed build.
set -u

cd "$(dirname "$0")/.." || exit 2
B=${B:-build}
strict=0
dir=$B/ckbench
args=()
while [ $# -gt 0 ]; do
    case $1 in
    --mib | --reps) [ $# -ge 2 ] || exit 2; args+=("$1" "$2"); shift 2 ;;
    --dir) [ $# -ge 2 ] || exit 2; dir=$2; shift 2 ;;
    --strict) strict=1; shift ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_ckpt.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done

mkdir -p "$B" "$dir" || exit 2
cc -std=c99 -O2 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -I. -o "$B/bench_ckpt" bench/ckpt.c -lpthread -lm || exit 2

log=$B/bench_ckpt.log
: >"$log" || exit 2
{
    echo "# filesystem of $dir: $(stat -f -c %T "$dir") ($(df -P "$dir" | awk 'NR==2 {print $1 " mounted on " $6}'))"
    echo "# /tmp: $(stat -f -c %T /tmp)"
} | tee -a "$log"
t0=$(date +%s)
"$B/bench_ckpt" --dir "$dir" ${args[@]+"${args[@]}"} 2>&1 | tee -a "$log"
st=${PIPESTATUS[0]}
rm -rf "$dir"
rc=0
[ "$st" -ne 0 ] && { echo "### FAILED (exit $st)"; rc=1; }
echo "### all summaries ($(($(date +%s) - t0)) s):"
grep '^summary ' "$log"
if [ $strict -eq 1 ] && grep -q '^summary .* FAIL$' "$log"; then rc=1; fi
if grep -q '^summary .*correctness FAIL' "$log"; then rc=1; fi
exit $rc
