#!/usr/bin/env bash
# bench/run_strict_counts.sh - builds $B/bench_strict_counts and runs it: per
# steady-state step of the NCCL path (DDP ZeRO-0/1/2, the vocab-parallel TP
# functions, vs_redistribute) on 2 and 4 simulated GPUs, the device allocations,
# host syncs, copies, NVRTC libraries, kernels, NCCL operations and events the
# library makes, counted over the strict stand-in (tests/strict/; no GPU needed).
# See bench/strict_counts.c for what each column counts and its target.
#
#   B=build bash bench/run_strict_counts.sh [steps] [warmup]     (default 8 4)
#
# Exit status: 1 when a call failed or the stand-in reported a violation (a
# missed target is printed as MISS, not an error); 2 when it cannot be built
# (the CUDA toolkit's headers, nccl.h and NVRTC are needed).
set -u
cd "$(dirname "$0")/.." || exit 2
B=${B:-build}
make -s B="$B" "$B/bench_strict_counts" || exit 2
"$B/bench_strict_counts" "$@"
