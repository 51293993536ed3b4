#!/usr/bin/env bash
# hosts.sh - ranks on several hosts (issue 33.2), `make test-hosts`. Four network
# namespaces joined by a bridge (in a fifth) are four hosts, each with its own
# address (10.77.0.1-4) and hostname; Open MPI starts one rank per host through an
# rsh agent that enters the host's namespace (no ssh), and the ranks talk over TCP
# only. Cases, each one mpirun of tests/test_faults_mpi.c:
#   init       a split one rank joins late, then vs_world_free (it crashed in MPI_Testall)
#   partition  host 2's link goes down during all-reduces
#   sigstop    world rank 3's process stops (SIGSTOP) during all-reduces
#   slow       host 1's link is rate-limited (tc) during large all-reduces
#   slow_desync  the same with VESCALE_DEBUG=desync
# For the faults: every rank (bar a stopped one) ends within the timeout (+ a
# margin) after the fault, and every other rank's error names the lost rank.
#   usage: bash tests/hosts.sh [path/to/test_faults_mpi]   (root only; else a skip line)
#   env:   HOSTS_TIMEOUT (the ranks' VESCALE_TIMEOUT, default 3),
#          HOSTS_CASES (default "init partition sigstop slow slow_desync"), HOSTS_LOGS (a folder: the
#          fault cases' logs are copied there)
# Output: "ok ...", "not ok ...", "skip ..." lines; exit status 1 on any failure.
set -u
BIN=${1:-build/test_faults_mpi}
TMO=${HOSTS_TIMEOUT:-3}
MARGIN=2.5 # the time past the timeout an error may take: the probe of who is missing, the notice
fail=0
skip() { echo "skip hosts: $*"; exit 0; }
ok() { echo "ok hosts/$1"; }
notok() { echo "not ok hosts/$1"; fail=$((fail + 1)); }

[ -x "$BIN" ] || { echo "not ok hosts: no binary at $BIN"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, veth, a bridge)"
for t in ip tc unshare mpirun; do command -v $t >/dev/null 2>&1 || skip "$t is not installed"; done
"$BIN" 2>&1 | grep -q 'without VESCALE_MPI' && skip "$BIN was built without VESCALE_MPI"

P=vsh$$ # this run's namespaces: ${P}sw (the bridge), ${P}h0..3 (the hosts)
tmp=$(mktemp -d)
cleanup() {
    for ns in ${P}h0 ${P}h1 ${P}h2 ${P}h3 ${P}sw; do
        ip netns pids "$ns" 2>/dev/null | while read -r p; do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ip netns add ${P}sw 2>"$tmp/err" || skip "cannot make a network namespace: $(cat "$tmp/err")"
{ ip -n ${P}sw link add br0 type bridge && ip -n ${P}sw link set br0 up; } || skip "cannot make a bridge"
for i in 0 1 2 3; do
    { ip netns add ${P}h$i &&
      ip link add ${P}e$i type veth peer name eth0 netns ${P}h$i &&
      ip link set ${P}e$i netns ${P}sw &&
      ip -n ${P}sw link set ${P}e$i master br0 up &&
      ip -n ${P}h$i addr add 10.77.0.$((i + 1))/24 dev eth0 &&
      ip -n ${P}h$i link set eth0 up &&
      ip -n ${P}h$i link set lo up; } 2>"$tmp/err" || skip "cannot make host $i: $(cat "$tmp/err")"
    echo "10.77.0.$((i + 1)) slots=1" >>"$tmp/hostfile"
done
# the launcher's rsh agent: host 10.77.0.<i+1> is namespace h<i>, hostname host<i>
cat >"$tmp/agent" <<EOF
#!/bin/sh
h=\$1; shift
i=\$((\${h##*.} - 1))
exec ip netns exec ${P}h\$i unshare --uts /bin/sh -c "hostname host\$i; \$*"
EOF
chmod +x "$tmp/agent"
# mpirun itself on host 0
mpirun_hosts() {
    ip netns exec ${P}h0 unshare --uts /bin/sh -c 'hostname host0; exec "$@"' sh \
        mpirun --allow-run-as-root --hostfile "$tmp/hostfile" --mca plm_rsh_agent "$tmp/agent" \
        --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self --mca btl_tcp_if_include eth0 \
        --mca oob_tcp_if_include eth0 "$@"
}
# what is left of a job on the hosts (a partitioned host's daemon, a stopped rank)
sweep() {
    for i in 0 1 2 3; do
        ip netns pids ${P}h$i 2>/dev/null | while read -r p; do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
    done
}
now() { date +%s.%N; }
cases=" ${HOSTS_CASES:-init partition sigstop slow slow_desync} "
want() { case "$cases" in *" $1 "*) return 0 ;; esac; return 1; }
later() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(b > a) }'; } # later A B: B after A

# (1) vs_world_free after a timed-out vs_comm_split whose late rank's message
#     arrives afterwards: crashed (SIGSEGV in MPI_Testall) across hosts
for round in 1 2; do
    want init || break
    log="$tmp/init$round.log"
    timeout -k 3 40 bash -c "$(declare -f mpirun_hosts); P=$P tmp=$tmp mpirun_hosts -np 4 '$BIN' init" >"$log" 2>&1
    rc=$?
    sweep
    got=$(grep -c '^ok faults_mpi/init/world_free_after_late_rank rank' "$log")
    if [ "$rc" -eq 0 ] && [ "$got" -eq 4 ] && ! grep -q '^not ok' "$log"; then
        ok "init/world_free_after_late_split/$round: 4 hosts, every rank's vs_world_free returned VS_OK"
    else
        notok "init/world_free_after_late_split/$round: mpirun status $rc, $got of 4 ranks freed their world"
        grep -E '^not ok|signal|Segmentation' "$log" | head -8 | sed 's/^/    /'
    fi
done

# run_fault NAME LOST FAULT HEAL COUNT [DEBUG [BOUND]]: one job of all-reduces of COUNT
# floats (VESCALE_DEBUG=DEBUG); once every
# rank runs, FAULT (a shell command) at a time noted; then every rank but a stopped
# one must end within BOUND s of it (default: the timeout + MARGIN), every rank other
# than LOST naming it. (Behind a slow link the ops go on, slowly, until one outlasts the
# timeout: the bound is larger there.)
run_fault() {
    local name=$1 lost=$2 fault=$3 heal=$4 count=$5 log="$tmp/$1.log" pid t0 tf
    VESCALE_DEBUG=${6:-} VESCALE_TIMEOUT=$TMO VS_LOOP_COUNT=$count VS_LOOP_SECONDS=60 \
        timeout -k 3 90 bash -c "$(declare -f mpirun_hosts); P=$P tmp=$tmp mpirun_hosts \
        -x VESCALE_DEBUG -x VESCALE_TIMEOUT -x VS_LOOP_COUNT -x VS_LOOP_SECONDS -np 4 '$BIN' loop" >"$log" 2>&1 &
    pid=$!
    t0=$(awk -v t="$(now)" 'BEGIN { printf "%.3f", t + 30 }')
    while [ "$(grep -c '^# loop rank [0-9]* runs' "$log")" -lt 4 ] && kill -0 $pid 2>/dev/null && later "$(now)" "$t0"; do
        sleep 0.1
    done
    sleep 0.5
    tf=$(now)
    eval "$fault"
    local want=4 bound=${7:-$(awk -v l="$TMO" -v m="$MARGIN" 'BEGIN { print l + m }')}
    case $name in sigstop*) want=3 ;; esac
    local end
    end=$(awk -v t="$tf" -v d="$bound" 'BEGIN { printf "%.3f", t + d + 3 }')
    while [ "$(grep -c '^# loop rank [0-9]* ended' "$log")" -lt $want ] && later "$(now)" "$end"; do sleep 0.1; done
    eval "$heal"
    # (a cut-off rank's lines reach the launcher once its link is back: they carry their own time)
    end=$(awk -v t="$(now)" 'BEGIN { printf "%.3f", t + 4 }')
    while [ "$(grep -c '^# loop rank [0-9]* ended' "$log")" -lt $want ] && later "$(now)" "$end"; do sleep 0.1; done
    sleep 0.5
    sweep
    wait $pid 2>/dev/null
    [ -n "${HOSTS_LOGS:-}" ] && cp "$log" "$HOSTS_LOGS/"
    grep -E "^# loop rank [0-9]* ended|^not ok" "$log" | sed "s|^|    |"
    local r line at msg dt named
    for r in 0 1 2 3; do
        case $name in sigstop*) [ "$r" = "$lost" ] && continue ;; esac
        line=$(grep "^# loop rank $r ended" "$log" | head -1)
        if [ -z "$line" ]; then
            notok "$name/rank_$r: no end within $bound s + 3 s of the fault"
            continue
        fi
        at=$(echo "$line" | sed -n 's/^# loop rank [0-9]* ended at \([0-9.]*\) .*/\1/p')
        msg=${line#*: }
        dt=$(awk -v a="$tf" -v b="$at" 'BEGIN { printf "%.1f", b - a }')
        if ! awk -v d="$dt" -v b="$bound" 'BEGIN { exit !(d <= b) }'; then
            notok "$name/rank_$r/in_time: ended $dt s after the fault (bound $bound s, timeout $TMO s): $msg"
            continue
        fi
        case "$line" in *"no fault came"*) notok "$name/rank_$r: no error: $msg"; continue ;; esac
        if [ "$r" = "$lost" ]; then
            ok "$name/rank_$r/in_time: the lost rank itself ended $dt s after the fault"
            continue
        fi
        named=0
        echo "$msg" | grep -Eq "rank $lost \(world $lost\)|missing world rank ([0-9]+, )*$lost([^0-9]|$)" && named=1
        if [ $named = 1 ]; then
            ok "$name/rank_$r/names_rank_$lost: ended $dt s after the fault"
        else
            notok "$name/rank_$r/names_rank_$lost: ended $dt s after the fault, naming someone else: $msg"
        fi
    done
}

t_start=$(now)
want partition && run_fault partition 2 "ip -n ${P}sw link set ${P}e2 down" "ip -n ${P}sw link set ${P}e2 up" 1024
# shellcheck disable=SC2016 # run_fault evaluates it, once the log names the pid
want sigstop && run_fault sigstop 3 'kill -STOP $(sed -n "s/^# loop rank 3 pid \([0-9]*\).*/\1/p" "$log")' ":" 1024
# host 1's link at 512 kbit/s, queueing up to 0.2 s: a 256 KiB all-reduce outlasts the timeout
want slow && run_fault slow 1 "tc -n ${P}h1 qdisc add dev eth0 root tbf rate 512kbit burst 16kb latency 200ms" \
    "tc -n ${P}h1 qdisc del dev eth0 root" 65536 "" $((3 * TMO + 3))
# the same with VESCALE_DEBUG=desync: a rank that did not arrive may be alive, still in
# the op before and waiting on the slow one (it blamed a healthy rank)
want slow_desync && run_fault slow_desync 1 "tc -n ${P}h1 qdisc add dev eth0 root tbf rate 512kbit burst 16kb latency 200ms" \
    "tc -n ${P}h1 qdisc del dev eth0 root" 65536 desync $((3 * TMO + 3))
echo "# hosts: the fault cases took $(awk -v a="$t_start" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s"
[ "$fail" -eq 0 ]
