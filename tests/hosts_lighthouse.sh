#!/usr/bin/env bash
# The lighthouse on a host of its own (issue 33): two network namespaces joined
# by a bridge are two hosts; tools/vescale-lighthouse runs on one, a job of 4
# ranks (test_lighthouse's, thread ranks over the strict stand-in) on the
# other, and the lighthouse's host is cut off mid-job (its link down: a real
# black hole, TCP retransmitting into nothing). Every step completes within
# the job's 6 s timeout and every rank warns once. Root only (skipped, with
# the reason, otherwise). make test-hosts runs it.
set -u
B=${B:-build}
if [ "$(id -u)" != 0 ]; then echo "skip hosts/lighthouse: needs root (network namespaces)"; exit 0; fi
if ! command -v ip >/dev/null 2>&1; then echo "skip hosts/lighthouse: no ip (iproute2)"; exit 0; fi
t=$$
lh=vslh$t job=vsjob$t br=vsbr$t
out=$(mktemp)
pid=
cleanup() {
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    ip netns del "$lh" 2>/dev/null
    ip netns del "$job" 2>/dev/null
    ip link del "$br" 2>/dev/null
    rm -f "$out"
}
trap cleanup EXIT
fail() { echo "not ok hosts/lighthouse: $1"; exit 1; }
ip link add "$br" type bridge && ip link set "$br" up || { echo "skip hosts/lighthouse: cannot make a bridge here"; exit 0; }
i=1
for ns in "$lh" "$job"; do
    ip netns add "$ns" || fail "ip netns add $ns"
    ip link add "v$ns" type veth peer name "p$ns" || fail "veth for $ns"
    ip link set "v$ns" netns "$ns" && ip link set "p$ns" master "$br" up &&
        ip -n "$ns" addr add "10.77.$((t % 250)).$i/24" dev "v$ns" || fail "address for $ns"
    ip -n "$ns" link set "v$ns" up && ip -n "$ns" link set lo up || fail "links up in $ns"
    i=$((i + 1))
done
addr=$(ip -n "$lh" -4 -o addr show dev "v$lh" | sed -n 's/.* inet \([0-9.]*\)\/.*/\1/p')
ip netns exec "$lh" "$B/vescale-lighthouse" --addr "$addr" --port 0 >"$out" 2>&1 &
pid=$!
port=
for _ in $(seq 100); do
    port=$(sed -n 's/^vescale-lighthouse: listening on .*:\([0-9][0-9]*\)$/\1/p' "$out")
    [ -n "$port" ] && break
    sleep 0.05
done
[ -n "$port" ] || fail "the lighthouse did not start: $(cat "$out")"
# the cut: the lighthouse host's link goes down (from the job's host: ip netns exec enters the other one)
ip netns exec "$job" env VS_TEST_LIGHTHOUSE="$addr:$port" VS_TEST_PARTITION="ip netns exec $lh ip link set v$lh down" \
    "$B/test_lighthouse"
