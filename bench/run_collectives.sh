#!/usr/bin/env bash
# bench/run_collectives.sh - runs $B/bench_collectives (built by `make bench`) once per
# rank count and collects the summary lines. See bench/collectives.c for what it does.
#
#   B=build MPIRUN="mpirun --allow-run-as-root --oversubscribe" bash bench/run_collectives.sh
#       [--ranks 2,4,8] [--max-mib 256] [--min-kib 1] [--budget 0.25]
#       [--min-iters 5] [--max-iters 200] [--no-mpi] [--no-threads] [--strict]
#
#   --ranks     rank counts N, comma or space separated (default 2,4,8)
#   --max-mib   largest size in MiB (default 256); e.g. --max-mib 16 --ranks 2 is quick
#   --budget    seconds of timed iterations per point (default 0.25)
#   --min-iters timed iterations at least (default 5; 10 below 16 MiB); 3 is quicker
#   --strict    exit 1 when a performance target is missed (default: only printed)
# The output is also written to $B/bench_collectives.log.
# Exit status: 1 when a run failed or a result was wrong (or, with --strict, a target
# was missed); 2 on bad usage or a missing binary.
set -u

B=${B:-build}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
BIN=$B/bench_collectives
ranks="2 4 8"
strict=0
args=()

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case $1 in
    --ranks) [ $# -ge 2 ] || { usage; exit 2; }; ranks=${2//,/ }; shift 2 ;;
    --ranks=*) ranks=${1#--ranks=}; ranks=${ranks//,/ }; shift ;;
    --max-mib | --min-kib | --budget | --min-iters | --max-iters)
        [ $# -ge 2 ] || { usage; exit 2; }; args+=("$1" "$2"); shift 2 ;;
    --max-mib=* | --min-kib=* | --budget=* | --min-iters=* | --max-iters=*)
        args+=("${1%%=*}" "${1#*=}"); shift ;;
    --no-mpi | --no-threads) args+=("$1"); shift ;;
    --strict) strict=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run_collectives.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done

for n in $ranks; do
    case $n in '' | *[!0-9]*) echo "run_collectives.sh: bad rank count '$n'" >&2; exit 2 ;; esac
done
if [ ! -x "$BIN" ]; then
    echo "run_collectives.sh: $BIN is not built (make $BIN, or make bench)" >&2
    exit 2
fi

# mpirun refuses more processes than cores without this (the Makefile exports it too).
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}

# The whole output is kept next to the binary (not in /tmp, which is shared here).
log=$B/bench_collectives.log
: >"$log" || exit 2
rc=0
t0=$(date +%s)
for n in $ranks; do
    echo "### N=$n: $MPIRUN -np $n $BIN ${args[*]+${args[*]}}"
    # shellcheck disable=SC2086 # MPIRUN is a command line: split it
    $MPIRUN -np "$n" "$BIN" ${args[@]+"${args[@]}"} 2>&1 | tee -a "$log"
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
if grep -q '^summary .* correctness FAIL$' "$log"; then rc=1; fi
exit $rc
