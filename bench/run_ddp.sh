#!/usr/bin/env bash
# bench/run_ddp.sh - builds build/bench_ddp and runs it: DDP gradient sync overlapped
# with a modelled backward on 4 thread ranks, against the lower bounds (compute alone,
# communication alone) measured in the same run, and the ZeRO-0/1/2 optimizer-state
# memory per rank. See bench/ddp.c for what it does.
#
#   B=build bash bench/run_ddp.sh [--layers 16] [--layer-mib 4] [--bucket-layers 1]
#       [--zero 0,1,2] [--layouts ddp,contiguous,strided] [--factors 1,2] [--steps 21]
#       [--warmup 5] [--calib 5] [--no-memory] [--runs 1] [--strict]
#
#   --layers        layers of the model, one f32 parameter each (default 16)
#   --layer-mib     MiB per layer (default 4: 16 x 4 MiB = 64 MiB of gradients)
#   --bucket-layers bucket_bytes in layers, a list runs each (default 1; e.g. 1,2,4)
#   --zero          ZeRO stages to time (default 0,1,2; the 1.15 target: 0 and 1)
#   --layouts       ddp: DDP's buffers, a parameter a layer; contiguous, strided: the
#                   trainer's flat buffers (llm.c's 12 tensors a layer), layer after layer or
#                   each kind across the layers (ZeRO 0 and 1 only; default all three)
#   --factors       compute = factor x comm alone (default 1,2)
#   --steps         timed rounds, every variant once each (default 21)
#   --warmup        untimed rounds before them, which also recalibrate (default 5)
#   --calib         steps of comm alone that set the first compute time (default 5)
#   --runs          runs of the whole bench; with more than one, the median over the runs
#                   of each "summary layouts" ratio and comm time ("summary layouts-median")
#   --strict        exit 1 when a performance target is missed (default: only printed)
# The output is also written to $B/bench_ddp.log.
# Exit status: 1 when the run failed or a result was wrong (or, with --strict, a target
# was missed); 2 on bad usage or a failed build.
set -u

cd "$(dirname "$0")/.." || exit 2
B=${B:-build}
BIN=build/bench_ddp
strict=0
runs=1
args=()

usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case $1 in
    --layers | --layer-mib | --bucket-layers | --zero | --layouts | --factors | --steps | --warmup | --calib)
        [ $# -ge 2 ] || { usage; exit 2; }; args+=("$1" "$2"); shift 2 ;;
    --layers=* | --layer-mib=* | --bucket-layers=* | --zero=* | --layouts=* | --factors=* | --steps=* | --warmup=* | --calib=*)
        args+=("${1%%=*}" "${1#*=}"); shift ;;
    --no-memory) args+=("$1"); shift ;;
    --runs) [ $# -ge 2 ] || { usage; exit 2; }; runs=$2; shift 2 ;;
    --runs=*) runs=${1#*=}; shift ;;
    --strict) strict=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run_ddp.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done

mkdir -p build "$B" || exit 2
cc -std=c99 -O2 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -I. -o build/bench_ddp bench/ddp.c -lpthread -lm || exit 2

# The whole output is kept next to the binary (not in /tmp, which is shared here).
log=$B/bench_ddp.log
: >"$log" || exit 2
rc=0
t0=$(date +%s)
case $runs in '' | *[!0-9]* | 0) echo "run_ddp.sh: --runs wants a positive number" >&2; exit 2 ;; esac
for run in $(seq 1 "$runs"); do
    echo "### $BIN ${args[*]+${args[*]}} (run $run of $runs)"
    "$BIN" ${args[@]+"${args[@]}"} 2>&1 | tee -a "$log"
    st=${PIPESTATUS[0]}
    if [ "$st" -ne 0 ]; then
        echo "### FAILED (exit $st)"
        rc=1
    fi
done
if [ "$runs" -gt 1 ]; then
    # per (zero, bucket, factor) and layout: the median over the runs
    grep '^summary layouts ' "$log" | awk -v runs="$runs" '
        function med(s,   v, n, i, j, t) {
            n = split(s, v, " ")
            for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
            return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        }
        {
            key = $3 " " $4 " " $5
            if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
            what = ""
            for (i = 6; i <= NF; i++) {
                if ($i == "ratio_vs_max_bound:" || $i == "comm_ms:") { what = $i; continue }
                if (split($i, kv, "=") != 2 || what == "" || kv[1] ~ /^target/) continue
                id = key SUBSEP what SUBSEP kv[1]
                if (!(id in vals)) names[key, what] = names[key, what] " " kv[1]
                sub(/;$/, "", kv[2])
                vals[id] = vals[id] " " kv[2]
            }
        }
        END {
            for (k = 1; k <= nk; k++) {
                line = "summary layouts-median runs=" runs " " keys[k]
                split("ratio_vs_max_bound: comm_ms:", ws, " ")
                for (w = 1; w <= 2; w++) {
                    line = line " " ws[w]
                    n = split(names[keys[k], ws[w]], nm, " ")
                    for (i = 1; i <= n; i++)
                        line = line sprintf(w == 1 ? " %s=%.3f" : " %s=%.2f", nm[i], med(vals[keys[k] SUBSEP ws[w] SUBSEP nm[i]]))
                    if (w == 1) line = line " target<=1.15;"
                }
                print line
            }
        }' | tee -a "$log"
fi

echo "###"
echo "### all summaries ($(($(date +%s) - t0)) s):"
grep '^summary ' "$log"
if [ $strict -eq 1 ] && grep -q '^summary .* FAIL$' "$log"; then rc=1; fi
if grep -q '^summary .*correctness FAIL' "$log"; then rc=1; fi
exit $rc
