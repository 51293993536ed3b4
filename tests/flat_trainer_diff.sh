#!/usr/bin/env bash
# tests/flat_trainer_diff.sh - examples/flat_trainer.c read two ways: the single-device
# trainer (DP_TP undefined) and its vescale port (DP_TP defined). Prints the diff between
# the two forms and its size, "+A/-D lines" (A added by the port, D removed).
#
#   bash tests/flat_trainer_diff.sh [--stat] [--check README.md] [--forms DIR]
#     --stat       only the size line
#     --check F    also fail (exit 1) unless F states that size as "+A/-D lines"
#     --forms DIR  also write the two forms there (single.c, dp_tp.c)
set -u
cd "$(dirname "$0")/.." || exit 2
src=examples/flat_trainer.c
stat=0 check= forms=
while [ $# -gt 0 ]; do
    case $1 in
    --stat) stat=1; shift ;;
    --check) [ $# -ge 2 ] || exit 2; check=$2; shift 2 ;;
    --forms) [ $# -ge 2 ] || exit 2; forms=$2; shift 2 ;;
    *) echo "usage: $0 [--stat] [--check README.md] [--forms DIR]" >&2; exit 2 ;;
    esac
done

# form PAR: the file with DP_TP defined (1) or not (0). Only DP_TP's own #ifdef/#ifndef,
# #else and #endif lines are resolved and dropped; every other directive stays.
form() {
    awk -v par="$1" '
    function keeping(   i) { for (i = 1; i <= n; i++) if (mine[i] && !on[i]) return 0; return 1 }
    /^[ \t]*#[ \t]*if(n?def)?[ \t]/ {
        n++
        if ($0 ~ /^[ \t]*#[ \t]*ifn?def[ \t]+DP_TP([ \t]|$)/) {
            mine[n] = 1; on[n] = ($0 ~ /ifdef/) ? par : !par; next
        }
        mine[n] = 0; on[n] = 1
    }
    /^[ \t]*#[ \t]*else/ && n && mine[n] { on[n] = !on[n]; next }
    /^[ \t]*#[ \t]*endif/ && n { was = mine[n]; n--; if (was) next; if (keeping()) print; next }
    { if (keeping()) print }
    ' "$src"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
form 0 >"$tmp/single.c" && form 1 >"$tmp/dp_tp.c" || exit 2
if grep -q '^[ \t]*#.*DP_TP' "$tmp/single.c" "$tmp/dp_tp.c"; then
    echo "flat_trainer_diff.sh: a DP_TP conditional the script cannot read (nested in another #if?)" >&2
    grep -n '^[ \t]*#.*DP_TP' "$tmp/single.c" "$tmp/dp_tp.c" >&2
    exit 2
fi
[ -n "$forms" ] && { mkdir -p "$forms" && cp "$tmp/single.c" "$tmp/dp_tp.c" "$forms/" || exit 2; }
diff -u --label single.c --label dp_tp.c "$tmp/single.c" "$tmp/dp_tp.c" >"$tmp/diff"
add=$(grep -c '^+[^+]\|^+$' "$tmp/diff")
del=$(grep -c '^-[^-]\|^-$' "$tmp/diff")
size="+$add/-$del lines"
[ $stat -eq 1 ] || cat "$tmp/diff"
echo "flat_trainer.c: single-device -> DP x TP with vescale: $size ($(wc -l <"$tmp/single.c") -> $(wc -l <"$tmp/dp_tp.c") lines)"
if [ -n "$check" ]; then
    if grep -qF -- "$size" "$check"; then
        echo "ok flat_trainer diff size in $check ($size)"
    else
        echo "not ok flat_trainer diff size: $check does not say \"$size\" (update it)"
        exit 1
    fi
fi
