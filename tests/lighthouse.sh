#!/usr/bin/env bash
# tools/vescale-lighthouse as a process of its own (issue 24): test_elastic_procs'
# lighthouse cases over it (a rank that fails and says so, one whose connection
# closes, a DP2 x TP2 mesh), its token read from --token-file (issue 33: the ranks
# sign with VESCALE_LIGHTHOUSE_TOKEN), then its stop on SIGTERM and its bad usage.
set -u
B=${B:-build}
lh=$B/vescale-lighthouse
out=$(mktemp)
tok=$(mktemp)
pid=
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -f "$out" "$tok"' EXIT
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tok"
chmod 600 "$tok"
fails=0
say() { # ok|not, label
    if [ "$1" = ok ]; then echo "ok lighthouse/$2"; else echo "not ok lighthouse/$2"; fails=$((fails + 1)); fi
}

"$lh" --addr 127.0.0.1 --port 0 --token-file "$tok" >"$out" 2>&1 &
pid=$!
port=
for _ in $(seq 100); do
    port=$(sed -n 's/^vescale-lighthouse: listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$out")
    [ -n "$port" ] && break
    sleep 0.05
done
if [ -z "$port" ]; then
    say not "start: no 'listening on' line: $(cat "$out")"
    exit 1
fi
say ok "start: listening on 127.0.0.1:$port"
VESCALE_LIGHTHOUSE_TOKEN=$(cat "$tok") VS_TEST_LIGHTHOUSE=127.0.0.1:$port "$B/test_elastic_procs"
if grep -q 'has no token' "$out"; then say not "a lighthouse with --token-file warned it has none: $(cat "$out")"
else say ok "with --token-file: no warning"; fi
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
if [ $rc -eq 0 ] && grep -q 'stopped (SIGTERM)' "$out"; then say ok "stops on SIGTERM (status 0)"
else say not "SIGTERM: status $rc: $(cat "$out")"; fi
"$lh" --token-file /nonexistent/token >"$out" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q "/nonexistent/token" "$out"; then say ok "an unreadable token file: status 1, named"
else say not "unreadable token file: status $rc: $(cat "$out")"; fi
"$lh" --addr 127.0.0.1 --port 0 >"$out" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q 'listening on' "$out" && break; sleep 0.05; done
kill -TERM "$pid"; wait "$pid"; pid=
if grep -q 'warning: the lighthouse on port [0-9]* has no token' "$out"; then say ok "without a token: said once"
else say not "without a token, no warning: $(cat "$out")"; fi
"$lh" --max-conns -3 >"$out" 2>&1; rc=$?
if [ $rc -eq 2 ] && grep -q "max-conns '-3'" "$out"; then say ok "a bad limit: status 2, named"
else say not "bad limit: status $rc: $(cat "$out")"; fi
"$lh" --port 70000 >"$out" 2>&1; rc=$?
if [ $rc -eq 2 ] && grep -q "'70000' is not a port" "$out"; then say ok "bad port: status 2, named"
else say not "bad port: status $rc: $(cat "$out")"; fi
"$lh" --addr no.such.host.invalid --port 0 >"$out" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q "no.such.host.invalid" "$out"; then say ok "an address that does not resolve: status 1, named"
else say not "bad address: status $rc: $(cat "$out")"; fi
[ $fails -eq 0 ]
