#!/usr/bin/env bash
# faults_mpi.sh - the MPI fault suite (issue 8): one mpirun of 4 processes (NP)
# per fault, each bounded by `timeout`. Builds nothing.
#   usage: bash tests/faults_mpi.sh [path/to/test_faults_mpi]   (default build/test_faults_mpi)
#   env:   MPIRUN (default "mpirun --allow-run-as-root --oversubscribe"),
#          FAULTS_LIMIT (seconds per case, default 20)
# The binary prints one "ok/not ok faults_mpi/<case>... rank R: ..." line per rank
# and check, with the time from the fault to the error. This script adds, per
# case: the launcher ended within the limit (no rank hangs), every rank that
# should report did, and a summary of the times. Output: "ok ...", "not ok ...",
# "skip ..." lines, as tests/run.sh counts them; exit status 1 on any failure.
set -u
BIN=${1:-${FAULTS_MPI_BIN:-build/test_faults_mpi}}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
LIMIT=${FAULTS_LIMIT:-20}
export OMPI_MCA_rmaps_base_oversubscribe=1
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$BIN" ]; then
    echo "not ok faults_mpi: no binary at $BIN"
    exit 1
fi
if ! command -v "${MPIRUN%% *}" >/dev/null 2>&1; then
    echo "skip faults_mpi: ${MPIRUN%% *} not installed"
    exit 0
fi
if "$BIN" 2>&1 | grep -q 'without VESCALE_MPI'; then
    echo "skip faults_mpi: $BIN was built without VESCALE_MPI"
    exit 0
fi

ok() { echo "ok faults_mpi/$1"; }
# alive PID: the process exists and is not a zombie (an orphan may wait a while to be reaped)
alive() { local st; st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null); [ -n "$st" ] && [ "$st" != Z ]; }
notok() { echo "not ok faults_mpi/$1"; fail=$((fail + 1)); }

# run_case NAME EXPECTED_RANK_LINES MPIRUN_EXTRA ENV...
#   EXPECTED_RANK_LINES: how many "faults_mpi/NAME rank" lines (the fault's own
#   check, one per rank that must see an error) must come back.
run_case() {
    local name=$1 want=$2 extra=$3
    shift 3
    local log="$tmp/$name.log" t0 t1 rc pid
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086 # MPIRUN and extra are word lists
    env "$@" timeout -k 3 "$LIMIT" $MPIRUN $extra -np "${NP:-4}" "$BIN" "${name%%_*}" >"$log" 2>&1 &
    pid=$!
    # a rank that stopped itself: SIGKILL it (then SIGCONT) if it outlives the others' errors
    local stopped="" waited=0
    while kill -0 "$pid" 2>/dev/null; do
        sleep 0.2
        waited=$((waited + 1))
        if [ -z "$stopped" ]; then
            stopped=$(sed -n 's/.*(pid \([0-9]*\)) stops itself.*/\1/p' "$log" | head -1)
        fi
        if [ -n "$stopped" ] && [ $waited -ge 35 ] && alive "$stopped"; then
            echo "# faults_mpi/$name: the script kills stopped pid $stopped"
            kill -KILL "$stopped" 2>/dev/null
            kill -CONT "$stopped" 2>/dev/null
        fi
    done
    wait "$pid"
    rc=$?
    t1=$(date +%s.%N)
    local wall
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    grep -E '^(ok|not ok|#) |^vescale: ' "$log"
    local nf
    nf=$(grep -c '^not ok ' "$log")
    fail=$((fail + nf))
    # timeout gives 124 (or 137 after -k); mpirun gives 137 too when a rank died of
    # SIGKILL: the wall time tells them apart
    local hung
    hung=$(awk -v a="$t0" -v b="$t1" -v l="$LIMIT" 'BEGIN { print (b - a >= l - 0.5) ? 1 : 0 }')
    if [ "$hung" = 1 ]; then
        notok "$name/no_hang: killed by timeout after $wall s (status $rc)"
        sed 's/^/    /' "$log" | tail -20
    else
        ok "$name/no_hang: the job ended after $wall s (mpirun status $rc)"
    fi
    if [ -n "$stopped" ] && alive "$stopped"; then
        notok "$name/stopped_rank_gone: pid $stopped still exists"
        kill -KILL "$stopped" 2>/dev/null
    fi
    local got
    got=$(grep -c "^ok faults_mpi/${name%%_*} rank " "$log")
    if [ "$got" -ge "$want" ]; then
        ok "$name/every_rank_reported: $got of $want ranks saw the fault's error in time"
    else
        notok "$name/every_rank_reported: $got of $want ranks saw the fault's error in time"
    fi
    local times
    times=$(sed -n "s/^ok faults_mpi\/${name%%_*} rank \([0-9]*\): \([A-Z_]*\) \([0-9.]*\) s after the fault.*/r\1 \2 \3 s/p" "$log" |
        sort | paste -sd ';' -)
    echo "# faults_mpi/$name: time from fault to error: ${times:-none}"
    LAST_RC=$rc
    LAST_HUNG=$hung
}

# (a) count mismatch, desync check on: all 4 ranks get VS_ERR_MISMATCH naming rank 2
run_case mismatch 4 "" VESCALE_DEBUG=desync VESCALE_TIMEOUT=10
# (b) rank 1 calls vs_comm_abort: the 3 others, blocked, get VS_ERR_ABORTED at once
run_case abort 3 "" VESCALE_TIMEOUT=30
# (c) rank 3 stops (SIGSTOP): the 3 others time out after 2 s naming it; vs_world_abort ends the job
run_case sigstop 3 "" VESCALE_DEBUG=desync VESCALE_TIMEOUT=2
if [ "${LAST_RC:-0}" -eq 40 ]; then
    ok "sigstop/world_abort_status: mpirun exited with vs_world_abort's status 40 (-VS_ERR_TIMEOUT)"
else
    notok "sigstop/world_abort_status: mpirun exited with ${LAST_RC:-?}, want 40"
fi
# (d) rank 3 dies (SIGKILL) under --enable-recovery (this Open MPI accepts the flag):
#     the 3 others time out naming it, then vs_world_free returns and they exit
run_case kill 3 "--enable-recovery" VESCALE_DEBUG=desync VESCALE_TIMEOUT=2
# (e) world setup checks: bad VESCALE_DEBUG, explicit/torchrun ranks that are not MPI's,
#     a split that world rank 3 never joins (the 3 others time out after 1 s), init after finalize
run_case init 3 ""
if [ "${LAST_RC:-1}" -eq 0 ]; then ok "init/clean_exit"; else notok "init/clean_exit: mpirun status ${LAST_RC:-?}"; fi
# (d') the same without --enable-recovery: the launcher ends the job by itself
run_case kill_norecovery 0 "" VESCALE_DEBUG=desync VESCALE_TIMEOUT=2
if [ "${LAST_RC:-0}" -ne 0 ] && [ "${LAST_HUNG:-1}" = 0 ]; then
    ok "kill_norecovery/launcher_ends_job: mpirun status $LAST_RC"
else
    notok "kill_norecovery/launcher_ends_job: mpirun status ${LAST_RC:-?}"
fi

# (f) issue 19.2, 8 processes: a layer callback of the example GPT fails on world
#     rank 5 of PP2 x DP2 x TP2; every survivor names world rank 5 and its message
NP=8 run_case layer 8 "" VESCALE_TIMEOUT=30
# (g) a pair's all-reduce that world rank 3 never joins: rank 2's timeout names
#     it; ranks 0, 1, 3 name rank 2's timeout (no desync check)
run_case pair 4 ""

[ "$fail" -eq 0 ]
