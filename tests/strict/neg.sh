#!/usr/bin/env bash
# The strict stand-in's negative suite: runs each program of tests/strict/neg/
# (built by make into $B/strict_neg_<name>; this script builds nothing) and checks
# that the stand-in reported its bug by class ("vs_strict: VIOLATION <class>"),
# that the program ended as expected (status 0, 86 for the host-access fault, 87
# for a hang), and that the control reported nothing (nor did a sanitizer). Prints
# "ok strict-neg/<class>" or "not ok ..." per program.
set -u
B=${B:-build}
LIMIT=${NEG_TIMEOUT:-60}
export VS_STRICT_HANG_S=${VS_STRICT_HANG_S:-20} VS_STRICT_DELAY_US=${VS_STRICT_DELAY_US:-50}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# program  class  expected exit status  label
cases="host_pointer host-pointer 0 host-pointer
host_access host-access 86 host-access
missing_wait missing-wait 0 missing-wait/copy
missing_wait_kernel missing-wait 0 missing-wait/kernel
cross_device cross-device 0 cross-device/stream
cross_device_mem cross-device 0 cross-device/memory
free_during_collective free-during-collective 0 free-during-collective
malloc_during_collective malloc-during-collective 0 malloc-during-collective
device_sync_during_collective device-sync-during-collective 0 device-sync-during-collective
nccl_threads nccl-threads 0 nccl-threads
use_after_revoke use-after-revoke 0 use-after-revoke
revoke_one_rank hang 87 hang/revoke-is-local"

if ! [ -x "$B/strict_neg_control" ]; then
    echo "skip strict-neg: not built (no CUDA toolkit with NVRTC and nccl.h)"
    exit 0
fi

while read -r prog cls want label; do
    bin="$B/strict_neg_$prog"
    if ! [ -x "$bin" ]; then
        echo "not ok strict-neg/$label: $bin not built"
        continue
    fi
    # a missing wait is a data race of the stand-in's stream workers too: TSan may
    # report it (the control below keeps TSan's verdict)
    TSAN_OPTIONS="${TSAN_OPTIONS:-} exitcode=0" timeout "$LIMIT" "$bin" >"$log" 2>&1
    rc=$?
    line=$(grep -m1 "^vs_strict: VIOLATION $cls: " "$log")
    other=$(grep "^vs_strict: VIOLATION " "$log" | grep -v "^vs_strict: VIOLATION $cls: " | head -1)
    if [ -n "$line" ] && [ "$rc" -eq "$want" ] && [ -z "$other" ]; then
        echo "ok strict-neg/$label"
        echo "    $line"
    else
        echo "not ok strict-neg/$label: exit status $rc (want $want), ${line:-no $cls report}${other:+, also: $other}"
        sed 's/^/    /' "$log" | tail -20
    fi
done <<<"$cases"

timeout "$LIMIT" "$B/strict_neg_control" >"$log" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && ! grep -q "VIOLATION" "$log" && grep -q "^control: 0 violations" "$log"; then
    echo "ok strict-neg/control"
else
    echo "not ok strict-neg/control: exit status $rc"
    sed 's/^/    /' "$log" | tail -20
fi
