#!/usr/bin/env bash
# Runs every test binary in $B (threads transport), the MPI builds under mpirun,
# and the compile checks; adds up their "ok / not ok / skip" lines and ends with
# "N passed, N failed, N skipped". A binary that dies without reporting counts
# as one failure.
set -u
B=${B:-build}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
COMPILE_CHECK=${COMPILE_CHECK:-1}
LIMIT=${TEST_TIMEOUT:-300}
FUZZ_SECONDS=${FUZZ_SECONDS:-0}
# Every stage (a test binary, an MPI run, a script, the fuzz harnesses, the compile
# and install checks) runs in one pool, started in the order below (the longest
# first: the suite ends when its longest stage does) and reported in that order,
# each one's output kept apart. A stage has a weight: the cores it keeps busy. TEST_JOBS
# (default: the cores, as nproc says) is how many cores the stages may keep busy
# at once; stages that mostly wait (on timeouts, on processes that were killed, on a
# lighthouse that does not answer) weigh 0 and run beside them, TEST_WAIT_JOBS
# (default 3) of them at most. Stages share no fixed port or path (temporary
# directories are mkdtemp's or carry the pid; ports are ephemeral). TEST_JOBS=1
# TEST_WAIT_JOBS=0 runs everything one by one.
JOBS=${TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
WAIT_JOBS=${TEST_WAIT_JOBS:-3}
pass=0 fail=0 skip=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nbg=0 shown=0
declare -A weight_of # pid -> weight, of the stages started

report() { # label, log, status, seconds, cpu: prints a run and counts its lines
    local label=$1 log=$2 rc=$3
    printf '== %s (%s s) [cpu %s s]\n' "$label" "$4" "$5"
    cat "$log"
    local p f s
    p=$(grep -c '^ok ' "$log"); f=$(grep -c '^not ok ' "$log"); s=$(grep -c '^skip ' "$log")
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
    # the failures again at the end, each with the 3 lines before it and the
    # indented lines after it (up to 24: a script's case prints its output's
    # tail there, tests/ulfm.sh), so a CI that keeps only the log's tail still
    # shows what failed and why
    [ "$f" -gt 0 ] && awk -v L="[$label] " '
        { b[NR % 4] = $0 }
        /^not ok / { for (i = NR - 3; i < NR; i++) if (i > 0 && !(i in seen)) { print L b[i % 4]; seen[i] = 1 }
                     print L $0; seen[NR] = 1; after = 24; next }
        after > 0 && /^[ \t]/ { print L $0; seen[NR] = 1; after--; next }
        { after = 0 }' "$log" | cut -c1-600 >>"$tmp/failures"
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "not ok $label: exited with status $rc"
        echo "[$label] not ok: exited with status $rc" >>"$tmp/failures"
        tail -5 "$log" | sed "s|^|[$label]     |" | cut -c1-600 >>"$tmp/failures"
        fail=$((fail + 1))
    fi
}

timed() { # out-prefix, command...: runs it under the limit; writes .log, .secs, .cpu, then .rc
    local out=$1; shift
    local t0 t1 rc
    t0=$(date +%s.%N)
    timeout "$LIMIT" "$@" >"$out.log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }' >"$out.secs"
    # the CPU time (user + system) of what this subshell waited for: the stage (times
    # into a file: in a pipe it would run in a subshell that waited for nothing)
    times >"$out.times"
    awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); c += t[1] * 60 + t[2] } printf "%.1f", c }' "$out.times" >"$out.cpu"
    echo "$rc" >"$out.rc.tmp" && mv "$out.rc.tmp" "$out.rc"
}

flush() { # reports the runs that ended, in the order they started
    while [ "$shown" -lt "$nbg" ] && [ -f "$tmp/$shown.rc" ]; do
        report "$(cat "$tmp/$shown.label")" "$tmp/$shown.log" "$(cat "$tmp/$shown.rc")" "$(cat "$tmp/$shown.secs")" "$(cat "$tmp/$shown.cpu")"
        shown=$((shown + 1))
    done
}

busy() { # sets nrun and wrun: the stages running and the sum of their weights
    local p
    nrun=0 wrun=0
    for p in $(jobs -pr); do
        nrun=$((nrun + 1)) wrun=$((wrun + ${weight_of[$p]:-1}))
    done
}

stage() { # weight, label, command...: starts it once there is room for it
    local w=$1
    shift
    while :; do
        busy
        [ "$nrun" -eq 0 ] && break
        if [ "$nrun" -lt "$((JOBS + WAIT_JOBS))" ] && { [ "$w" -eq 0 ] || [ "$((wrun + w))" -le "$JOBS" ]; }; then break; fi
        wait -n
        flush
    done
    printf '%s' "$1" >"$tmp/$nbg.label"
    shift
    timed "$tmp/$nbg" "$@" &
    weight_of[$!]=$w
    nbg=$((nbg + 1))
}

drain() { # waits for every run and reports them
    wait
    flush
}

# the stages that take longest, first (seconds on the 2-core CI machine, as measured):
# the fuzz harnesses (~190 s, one at a time here), test_train_nccl (~65), the compile
# checks (2 x ~75), the install check (~50), ulfm.sh (~40), test_pipe_nccl (~40);
# those that wait: test_lighthouse (~40, 1 s of CPU), test_elastic_procs (~28, 4),
# faults_mpi.sh (~30, 3). Then the other test binaries, the MPI runs, the scripts.
has() { [ -x "$B/$1" ]; }
ran=" " # the test binaries started by name below (the loop after them skips them)
bin_stage() { # weight, name: runs $B/<name> when it was built
    if has "$2"; then
        stage "$1" "$2" "$B/$2"
        ran="$ran$2 "
    fi
}
# libFuzzer harnesses (tests/fuzz/), FUZZ_SECONDS each, one at a time (each keeps a
# core busy for its seconds); 0 skips them
if [ "${FUZZ_SECONDS:-0}" != 0 ]; then
    # its own limit: each harness runs FUZZ_SECONDS after its build
    saved=$LIMIT
    LIMIT=$((12 * (FUZZ_SECONDS + 30)))
    stage 1 "fuzz" env B="$B" FUZZ_SECONDS="$FUZZ_SECONDS" FUZZ_JOBS=1 bash tests/fuzz/run.sh
    LIMIT=$saved
fi
bin_stage 0 test_lighthouse
bin_stage 0 test_elastic_procs
# --- MPI fault suite (issue 8): 4 processes, one bounded mpirun per fault (they wait on timeouts) ---
if has test_faults_mpi; then
    stage 0 "faults_mpi.sh" env MPIRUN="$MPIRUN" ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
        bash tests/faults_mpi.sh "$B/test_faults_mpi"
fi
bin_stage 1 test_train_nccl
if [ "$COMPILE_CHECK" = 1 ]; then
    # each one compiler at a time in its own temporary directory: the compile checks
    # in thirds (every third check; in halves the larger took 104 s of CPU, and 252 s
    # of its 300 s limit on a loaded machine), then the install check
    stage 1 "compile_check (1 of 3)" env COMPILE_CHECK_SHARD=0/3 bash tests/compile_check.sh
    stage 1 "compile_check (2 of 3)" env COMPILE_CHECK_SHARD=1/3 bash tests/compile_check.sh
    stage 1 "compile_check (3 of 3)" env COMPILE_CHECK_SHARD=2/3 bash tests/compile_check.sh
    # --- install + pkg-config / CMake consumers (issue 9) ---
    stage 1 "install_check" bash tests/install_check.sh
fi
# --- MPI with ULFM (issue 24): an Open MPI 5 at VESCALE_ULFM_MPI (.ci/run installs one) ---
stage 1 "ulfm.sh" env B="$B" bash tests/ulfm.sh
for t in test_pipe_nccl test_nccl_strict test_layout test_gpt_nccl test_kernels_device test_train_gpt \
         test_ckpt_crash test_rendezvous test_layout_nt; do
    bin_stage 1 "$t"
done
# --- the strict stand-in's negative suite (issue 20): one GPU bug per program, each
# reported by class, and a control that reports nothing (built when HAVE_STRICT)
if has strict_neg_control; then
    stage 1 "strict/neg.sh" env B="$B" bash tests/strict/neg.sh
fi
for t in "$B"/test_*; do
    [ -x "$t" ] || continue
    case "$t" in *_mpi) continue ;; esac
    # `make test-gpu` builds test_nccl (nvcc, a real GPU) into $B: not part of this suite
    case "$(basename "$t")" in test_nccl) continue ;; esac
    case "$ran" in *" $(basename "$t") "*) continue ;; esac
    stage 1 "$(basename "$t")" "$t"
done

# MPI builds: one run per process count (ranks are processes here).
mpi_np() {
    case "$1" in
        test_collectives_mpi) echo "1 2 3 4" ;;
        test_mesh_mpi | test_layout_mpi) echo "1 2 4 8" ;;
        test_ddp_procs_mpi) echo "2 3 4" ;;
        test_ckpt_scale_mpi) echo "4" ;;
        test_faults_mpi) echo "" ;; # one mpirun per fault: tests/faults_mpi.sh, above
        *) echo "2" ;;
    esac
}
# Open MPI leaks from components it dlopens and unloads (their frames show as
# "<unknown module>", which no suppression can name): leak checks of our code are
# done by the threads runs of the same tests.
NOLEAK="ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0"
for t in "$B"/test_*_mpi; do
    [ -x "$t" ] || continue
    if ! command -v mpirun >/dev/null 2>&1; then
        echo "skip $(basename "$t"): mpirun not installed"; skip=$((skip + 1)); continue
    fi
    for np in $(mpi_np "$(basename "$t")"); do
        stage 1 "$(basename "$t") np=$np" env "$NOLEAK" $MPIRUN -np "$np" "$t"
    done
done

# --- examples/mlp_dp_tp.c (issue 9): DP2 x TP2 against one rank, losses within 1e-6 ---
# (its exit status is its verdict: report counts a non-zero one as "not ok")
if has mlp_dp_tp; then
    stage 1 "mlp_dp_tp" bash -c '"$@" && echo "ok example/mlp_dp_tp"' _ "$B/mlp_dp_tp"
fi
# --- examples/train_gpt.c (issue 12): PP2 x DP2 x TP2 beside one rank, save, resume on DP4 x TP2, then
#     make run's third line, HSDP (ZeRO-3 over DPS2 x DPR2 x TP2) beside one rank (issue 34) ---
if has train_gpt; then
    stage 1 "train_gpt" bash -c 'ck=$(mktemp -d) && trap "rm -rf \"\$ck\"" EXIT && "$1" --mesh 2x2x2 --steps 4 --save "$ck/step-000004" && "$1" --mesh 1x4x2 --sp --steps 2 --resume auto --ckpt-dir "$ck" && "$1" --mesh 1x4x2 --zero 3 --dp-shard 2 --steps 2 && echo "ok example/train_gpt (and make run'"'"'s HSDP: --zero 3 --dp-shard 2)"' _ "$B/train_gpt"
    # killed (SIGKILL) on PP2 x DP2 x TP2 mid-run, resumed with --resume auto on 4 ranks (planner) and on 1x1x2
    stage 1 "train_gpt_kill.sh" env B="$B" bash tests/train_gpt_kill.sh
    # --elastic (issue 24): a rank killed mid-step on PP1 x DP4 x TP2 and PP2 x DP4 x TP1, the mesh shrinks
    # by its DP replica and grows back with a replacement; every step equals the uninterrupted run
    stage 1 "train_gpt_elastic.sh" env B="$B" bash tests/train_gpt_elastic.sh
    # --nan-from (issue 33): skipped steps warn at the default level; every step skipped ends with status 1
    stage 1 "train_gpt_nonfinite.sh" env B="$B" bash tests/train_gpt_nonfinite.sh
    # --explain names the plan that then trains (issue 19.7), numbers for people
    stage 1 "train_gpt_explain.sh" env B="$B" bash tests/train_gpt_explain.sh
    # --data (issue 23): shards tools/vescale-shards writes from README.md; the loss falls;
    # saved on 1x2x2, resumed on DP4 and PP2 x TP2 beside one rank that read the same stream
    if has vescale-shards; then
        stage 1 "train_gpt_data.sh" env B="$B" bash tests/train_gpt_data.sh
    fi
fi
# --- examples/train_gpt.c --device cuda over the strict stand-in (8 simulated GPUs): f32 on
# PP2 x DP2 x TP2 beside the host run, bf16 on the GPUs the program picks (no GPU needed) ---
if has train_gpt_strict; then
    stage 1 "train_gpt --device cuda (strict stand-in)" bash -c '"$1" --device cuda --mesh 2x2x2 --steps 3 && "$1" --device cuda --dtype bf16 --steps 2 && echo "ok example/train_gpt --device cuda on 8 simulated GPUs (f32, bf16)"' _ "$B/train_gpt_strict"
    # ZeRO-3 with HSDP on GPUs (DPR2 x DPS2 x TP2), and ZeRO-3 under ZB-V on PP2 x DP2 x TP2 (W gathers too)
    stage 1 "train_gpt --device cuda --zero 3 (strict stand-in)" bash -c '"$1" --device cuda --mesh 1x4x2 --zero 3 --dp-shard 2 --steps 3 && "$1" --device cuda --mesh 2x2x2 --zero 3 --schedule zbv --steps 2 && echo "ok example/train_gpt --device cuda --zero 3: HSDP and ZB-V on 8 simulated GPUs"' _ "$B/train_gpt_strict"
    # the same HSDP run under VESCALE_DEBUG=params: every released ZeRO-3 buffer gets its canary NaN, so a read of one
    # by the high-level path (a view kept past its release) would show in the loss; a write would fail the clip
    stage 1 "train_gpt --device cuda --zero 3, VESCALE_DEBUG=params (strict stand-in)" env VESCALE_DEBUG=params bash -c '"$1" --device cuda --mesh 1x4x2 --zero 3 --dp-shard 2 --steps 3 && echo "ok example/train_gpt --device cuda --zero 3 under VESCALE_DEBUG=params: no released buffer read or written"' _ "$B/train_gpt_strict"
    # --elastic on GPUs: rank 3 dies in step 2, the survivors shrink (ncclCommShrink) and move the state in device
    # memory, a replacement grows the mesh back at step 4; every loss equals the one-rank host run's
    stage 1 "train_gpt --device cuda --elastic (strict stand-in)" bash -c 'out=$("$1" --device cuda --mesh 1x4x2 --elastic --kill 3@2 --replace 4 --steps 6 2>&1) && echo "$out" | grep -q "world rank 3 failed; world rank 2 left with the DP replica" && echo "$out" | grep -q "world ranks 2 3 joined" && echo "$out" | grep -q "equals one rank within" && echo "ok example/train_gpt --device cuda --elastic: a GPU rank dies, shrink, grow back, equal to one rank" || { echo "$out"; echo "not ok example/train_gpt --device cuda --elastic"; }' _ "$B/train_gpt_strict"
fi
# --- examples/flat_trainer.c (issue 22): the single-device trainer, its vescale port on DP2 x TP2
# beside one rank (1e-6), the port on one rank against the trainer's own AdamW, the diff size in README ---
if has flat_trainer && has flat_trainer_dp_tp; then
    stage 1 "flat_trainer" bash tests/flat_trainer_check.sh "$B"
fi
# --- examples/pipe_mlp.c (issue 10): every schedule on 4 stages equals one rank bit for bit ---
if has pipe_mlp; then
    stage 1 "pipe_mlp" bash -c '"$@" && echo "ok example/pipe_mlp"' _ "$B/pipe_mlp"
fi
if has mlp_dp_tp_mpi; then
    if command -v mpirun >/dev/null 2>&1; then
        stage 1 "mlp_dp_tp_mpi np=4" env "$NOLEAK" bash -c '"$@" && echo "ok example/mlp_dp_tp_mpi np=4"' _ $MPIRUN -np 4 "$B/mlp_dp_tp_mpi"
    else
        echo "skip example/mlp_dp_tp_mpi: mpirun not installed"; skip=$((skip + 1))
    fi
fi
# examples/train_gpt.c built with MPI: 8 processes as PP2 x DP2 x TP2, each beside its own one-rank run
if has train_gpt_mpi; then
    if command -v mpirun >/dev/null 2>&1; then
        stage 1 "train_gpt_mpi np=8" env "$NOLEAK" bash -c '"$@" && echo "ok example/train_gpt_mpi np=8"' _ $MPIRUN -np 8 "$B/train_gpt_mpi" --mesh 2x2x2 --steps 3
    else
        echo "skip example/train_gpt_mpi: mpirun not installed"; skip=$((skip + 1))
    fi
    # the high-level ZeRO-3 path (vs_parallelize, vs_train) over MPI processes, issue 34: ZeRO-3 on DP4, HSDP
    # (DPR2 x DPS2) on 4 processes, ZeRO-3 on PP2 x DP2 x TP2: every step's loss within 1e-6 of one rank's
    if command -v mpirun >/dev/null 2>&1; then
        stage 1 "train_gpt_mpi --zero 3" env "$NOLEAK" bash -c 'm=$1; shift; "$@" -np 4 "$m" --mesh 1x4x1 --zero 3 --steps 3 --tol 1e-6 && "$@" -np 4 "$m" --mesh 1x4x1 --zero 3 --dp-shard 2 --steps 3 --tol 1e-6 && "$@" -np 8 "$m" --mesh 2x2x2 --zero 3 --steps 3 --tol 1e-6 && echo "ok example/train_gpt_mpi --zero 3: DP4, DPR2 x DPS2 (np=4), PP2 x DP2 x TP2 (np=8) within 1e-6 of one rank"' _ "$B/train_gpt_mpi" $MPIRUN
    else
        echo "skip example/train_gpt_mpi --zero 3: mpirun not installed"; skip=$((skip + 1))
    fi
fi
# -----------------------------------------------------------------------------------

# --- tools/vescale-ckpt (issue 11) on hand-made checkpoints ---
if has vescale-ckpt && has test_ckpt_format; then
    stage 1 "ckpt_tool.sh" env B="$B" bash tests/ckpt_tool.sh
fi
# --- tools/vescale-lighthouse (issue 24) as a process, the elastic cases over it ---
if has vescale-lighthouse && has test_elastic_procs; then
    stage 1 "lighthouse.sh" env B="$B" bash tests/lighthouse.sh
fi
drain

if [ -s "$tmp/failures" ]; then
    echo "== the failures, again"
    cat "$tmp/failures"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
