#!/usr/bin/env bash
# The elastic restart of examples/train_gpt.c (issue 12): a job on PP2 x DP2 x TP2
# that saves every 2 steps is killed (SIGKILL) once two complete checkpoints exist, then
# restarted on fewer ranks with --resume auto, which must take the newest complete
# checkpoint (the kill may land in the middle of the next save):
# once on 4 ranks with the planner's mesh, once on an explicit 1x1x2. Each
# restart must resume from the killed job's checkpoint and equal one rank's
# losses within 1e-5. Prints "ok/not ok example/train_gpt_kill ..." lines.
# (--steps 400 for the killed job: it is to die mid-run, not finish first.)
set -u
. "$(dirname "$0")/train_gpt_common.sh" train_gpt_kill # (B, bin, tmp, fails, say)

"$bin" --mesh 2x2x2 --save-every 2 --ckpt-dir "$tmp/ck" --steps 400 --no-reference >"$tmp/killed.log" 2>&1 &
pid=$!
for _ in $(seq 1000); do # up to ~10 s
    [ "$(ls -d "$tmp"/ck/step-?????? 2>/dev/null | wc -l)" -ge 2 ] && break # complete ones (a save writes step-N.tmp-*, then renames it)
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
done
kill -KILL "$pid" 2>/dev/null
{ wait "$pid"; } 2>/dev/null
rc=$?
say $([ $rc = 137 ] && echo 1) "killed mid-run on 2x2x2 (status $rc; $(ls "$tmp/ck" | tr '\n' ' '))"
newest=$(ls -d "$tmp"/ck/step-?????? 2>/dev/null | sort | tail -1) # what --resume auto must take

for args in "--world 4 --auto" "--mesh 1x1x2"; do
    # shellcheck disable=SC2086
    "$bin" $args --resume auto --ckpt-dir "$tmp/ck" --steps 6 >"$tmp/out.log" 2>&1
    rc=$?
    ok=$([ $rc = 0 ] && grep -q "resuming $newest (saved on PP2 x DP2 x TP2)" "$tmp/out.log" && grep -q "equals one rank within 1e-5" "$tmp/out.log" && echo 1)
    say "$ok" "resume auto $args: $(grep -o 'resuming [^ ]*' "$tmp/out.log" | sed 's|.*/||'), $(grep '^loss' "$tmp/out.log" | sed 's/.*over //')"
    [ "$ok" = 1 ] || { echo "--- exit status $rc; output:"; cat "$tmp/out.log"; }
done
[ $fails = 0 ]
