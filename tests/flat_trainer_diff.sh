#!/usr/bin/env bash
# tests/flat_trainer_diff.sh - examples/flat_trainer.c read four ways: the single-device
# trainer (no macro), its data-parallel vescale port (DP defined), the DP x TP port
# (DP_TP defined, which defines DP: the DP form and TP's lines) and the FSDP port (FSDP
# defined, which defines DP: the DP form and ZeRO-3's lines). Prints the diff from the
# single-device form to each port and its size, "+A/-D lines" (A added by the port, D removed).
#
#   bash tests/flat_trainer_diff.sh [--port dp|dp_tp|fsdp] [--stat] [--check README.md] [--forms DIR]
#     --port P     only that port (default: all three, DP first)
#     --stat       only the size lines
#     --check F    also fail (exit 1) unless F states each size as "<port>: +A/-D lines"
#                  (<port>: "DP", "DP x TP" or "FSDP")
#     --forms DIR  also write the forms there (single.c, dp.c, dp_tp.c, fsdp.c)
set -u
cd "$(dirname "$0")/.." || exit 2
src=examples/flat_trainer.c
stat=0 check= forms= ports="dp dp_tp fsdp"
while [ $# -gt 0 ]; do
    case $1 in
    --stat) stat=1; shift ;;
    --port) [ $# -ge 2 ] && [ "$2" = dp -o "$2" = dp_tp -o "$2" = fsdp ] || exit 2; ports=$2; shift 2 ;;
    --check) [ $# -ge 2 ] || exit 2; check=$2; shift 2 ;;
    --forms) [ $# -ge 2 ] || exit 2; forms=$2; shift 2 ;;
    *) echo "usage: $0 [--port dp|dp_tp|fsdp] [--stat] [--check README.md] [--forms DIR]" >&2; exit 2 ;;
    esac
done

# form DP DP_TP FSDP: the file with each macro defined (1) or not (0). Only their own
# #ifdef/#ifndef, #else and #endif lines are resolved and dropped (nested in each other
# too); every other directive stays. The switch "#define DP" (DP_TP's, FSDP's) is in no form.
form() {
    awk -v dp="$1" -v dptp="$2" -v fsdp="$3" '
    function keeping(   i) { for (i = 1; i <= n; i++) if (mine[i] && !on[i]) return 0; return 1 }
    /^[ \t]*#[ \t]*if(n?def)?[ \t]/ {
        n++
        if ($0 ~ /^[ \t]*#[ \t]*ifn?def[ \t]+(DP|DP_TP|FSDP)([ \t]|$)/) {
            v = ($0 ~ /DP_TP/) ? dptp : ($0 ~ /FSDP/) ? fsdp : dp
            mine[n] = 1; on[n] = ($0 ~ /ifdef/) ? v : !v; next
        }
        mine[n] = 0; on[n] = 1
    }
    /^[ \t]*#[ \t]*else/ && n && mine[n] { on[n] = !on[n]; next }
    /^[ \t]*#[ \t]*endif/ && n { was = mine[n]; n--; if (was) next; if (keeping()) print; next }
    /^[ \t]*#[ \t]*define[ \t]+DP([ \t]|$)/ { next }
    { if (keeping()) print }
    ' "$src"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
form 0 0 0 >"$tmp/single.c" && form 1 0 0 >"$tmp/dp.c" && form 1 1 0 >"$tmp/dp_tp.c" && form 1 0 1 >"$tmp/fsdp.c" || exit 2
if grep -qw 'DP\|DP_TP\|FSDP' <(grep -h '^[ \t]*#' "$tmp/single.c" "$tmp/dp.c" "$tmp/dp_tp.c" "$tmp/fsdp.c"); then
    echo "flat_trainer_diff.sh: a DP, DP_TP or FSDP conditional the script cannot read (#if defined, #elif?)" >&2
    grep -Hnw 'DP\|DP_TP\|FSDP' "$tmp/single.c" "$tmp/dp.c" "$tmp/dp_tp.c" "$tmp/fsdp.c" | grep ':[ \t]*#' >&2
    exit 2
fi
[ -n "$forms" ] && { mkdir -p "$forms" && cp "$tmp/single.c" "$tmp/dp.c" "$tmp/dp_tp.c" "$tmp/fsdp.c" "$forms/" || exit 2; }
rc=0
for p in $ports; do
    case $p in dp) label="DP" ;; fsdp) label="FSDP" ;; *) label="DP x TP" ;; esac
    diff -u --label single.c --label "$p.c" "$tmp/single.c" "$tmp/$p.c" >"$tmp/diff"
    add=$(grep -c '^+[^+]\|^+$' "$tmp/diff")
    del=$(grep -c '^-[^-]\|^-$' "$tmp/diff")
    size="$label: +$add/-$del lines"
    [ $stat -eq 1 ] || cat "$tmp/diff"
    echo "flat_trainer.c: single-device -> $size with vescale ($(wc -l <"$tmp/single.c") -> $(wc -l <"$tmp/$p.c") lines)"
    if [ -n "$check" ]; then
        if grep -qF -- "$size" "$check"; then
            echo "ok flat_trainer diff size in $check ($size)"
        else
            echo "not ok flat_trainer diff size: $check does not say \"$size\" (update it)"
            rc=1
        fi
    fi
done
exit $rc
