#!/usr/bin/env bash
# `make run`'s explanation agrees with what runs (issue 19.7): examples/train_gpt.c
# with --explain on make run's mesh (PP2 x DP2 x TP2, its default 1f1b and ZeRO-1,
# which the planner need not choose), on its second half's DP4 x TP2 with sequence
# parallelism (ZeRO-2 given), and on PP2 x TP4 with zbv. The explanation's first
# plan line ("plan: PP2 x DP2 x TP2, 1f1b, 1 chunk per stage, 4 microbatches,
# ZeRO-1, split flops") names the mesh, schedule, chunks per stage, microbatches,
# ZeRO stage and split that the plan printed after it (vs_plan_print, the plan
# that trains) has; the schedule's picture counts the same chunks per stage; and
# no number in the profile or the explanation has more than 6 significant
# digits. Prints "ok/not ok example/train_gpt_explain ..." lines.
set -u
. "$(dirname "$0")/train_gpt_common.sh" train_gpt_explain # (B, bin, tmp, fails, say)

check() { # what, train_gpt's arguments...
    local what=$1
    shift
    if ! "$bin" "$@" --steps 1 --no-reference >"$tmp/out" 2>&1; then
        say 0 "$what: train_gpt $* failed"
        sed 's/^/# /' "$tmp/out"
        return
    fi
    sed -n '1,/^GPT:/p' "$tmp/out" | sed '$d' >"$tmp/expl" # the profile and the explanation
    local first named printed pic
    # the first configuration it names: "plan: PP2 x DP2 x TP2, 1f1b, 1 chunk per stage, 4 microbatches,
    # ZeRO-1[, sequence parallel], split flops"
    first=$(grep -m1 -E "^[a-z' -]+: PP[0-9]" "$tmp/expl")
    named=$(sed -nE <<<"$first" \
        's/^plan: PP([0-9]+) x DP([0-9]+) x TP([0-9]+), ([a-z0-9]+), ([0-9]+) chunks? per stage, ([0-9]+) microbatche?s?, ZeRO-([0-9])(, sequence parallel)?, split ([a-z]+).*/\1 \2 \3 \4 \5 \6 \7 \9/p')
    # the plan that runs, as vs_plan_print prints it
    printed=$(sed -n '/^plan (vs_plan_print):/,/^schedule \|^$/p' "$tmp/out" | awk '
        /^mesh:/ { split($2, a, "="); split($3, b, "="); split($4, c, "="); m = a[2] " " b[2] " " c[2] }
        /^chunks:/ { ch = $2 } /^schedule:/ { s = $2 } /^microbatches:/ { mb = $2 } /^zero:/ { z = $2 } /^split:/ { sp = $2 }
        /^sequence_parallel: 1/ { seq = " sequence-parallel" }
        END { print m, s, ch, mb, z, sp seq }')
    grep -q ', sequence parallel, split ' <<<"$first" && named="$named sequence-parallel"
    if [ -n "$named" ] && [ "$named" = "$printed" ]; then
        say 1 "$what: the explanation names the plan that runs ($named)"
    else
        say 0 "$what: the explanation names '${named:-$first}', the plan that runs is '$printed'"
        sed 's/^/# /' "$tmp/expl"
    fi
    pic=$(grep -m1 -E '^# [0-9]+ stages?, ' "$tmp/out" | sed -nE 's/^# [0-9]+ stages?, ([0-9]+) chunks? per stage, .*/\1/p')
    local chunks=${printed#* * * * }
    chunks=${chunks%% *}
    if grep -q '^schedule .*(vs_pipe_draw' "$tmp/out"; then
        if [ "$pic" = "$chunks" ]; then say 1 "$what: the picture has $pic chunk(s) per stage"
        else say 0 "$what: the picture's chunks per stage '$(grep -m1 -E '^# [0-9]+ stage' "$tmp/out")', the plan's $chunks"; fi
    fi
    local long
    long=$(grep -oE '[0-9]+(\.[0-9]+)?' "$tmp/expl" | tr -d . | sed 's/^0*//' | awk 'length > 6' | head -3 | tr '\n' ' ')
    if [ -z "$long" ]; then say 1 "$what: every number has at most 6 significant digits"
    else say 0 "$what: numbers with more than 6 significant digits: $long"; grep -nE '[0-9.]{8,}' "$tmp/expl" | sed 's/^/# /'; fi
}

check "make run's mesh" --mesh 2x2x2 --explain
check "DP4 x TP2, sequence parallel, ZeRO-2" --mesh 1x4x2 --sp --zero 2 --explain
check "PP2 x TP4, zbv, ZeRO-0" --mesh 2x1x4 --schedule zbv --zero 0 --explain
exit $((fails > 0))
