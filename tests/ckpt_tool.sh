#!/usr/bin/env bash
# tests/ckpt_tool.sh - tools/vescale-ckpt on checkpoints written by hand
# ($B/test_ckpt_format --make, tests/ckpt_handmade.h: tensor, range and blob
# entries over three shard files): ls, verify (good, bit flip, truncated,
# missing file, broken index), export (read back by Python's safetensors + numpy
# against the original full tensors, when installed), diff. One "ok / not ok /
# skip" line per check.
set -u
B=${B:-build}
TOOL="$B/vescale-ckpt"
MAKE_CK="$B/test_ckpt_format"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0

ok() { echo "ok ckpt_tool/$1"; }
bad() { echo "not ok ckpt_tool/$1: $2"; fails=$((fails + 1)); }
# check NAME WANT_RC GREP_PATTERN CMD...: the command exits WANT_RC and its output has the pattern
check() {
    local name=$1 want=$2 pat=$3; shift 3
    "$@" >"$T/out" 2>&1
    local rc=$?
    if [ "$rc" -ne "$want" ]; then bad "$name" "exit $rc, want $want: $(head -c 600 "$T/out")"; return; fi
    if [ -n "$pat" ] && ! grep -qE -- "$pat" "$T/out"; then bad "$name" "no /$pat/ in: $(head -c 600 "$T/out")"; return; fi
    ok "$name"
}
flip_last_byte() { # file: xor its last byte with 1
    local f=$1 n v
    n=$(stat -c %s "$f")
    v=$(dd if="$f" bs=1 skip=$((n - 1)) count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
    printf "\\$(printf %03o $((v ^ 1)))" | dd of="$f" bs=1 seek=$((n - 1)) conv=notrunc 2>/dev/null
}

for x in "$TOOL" "$MAKE_CK"; do
    [ -x "$x" ] || { echo "not ok ckpt_tool: $x not built"; exit 1; }
done
"$MAKE_CK" --make "$T/a" 0 && "$MAKE_CK" --make "$T/b" 1 && "$MAKE_CK" --make "$T/gap" 2 ||
    { echo "not ok ckpt_tool: cannot write the sample checkpoints"; exit 1; }

check ls 0 '^adam\.v +range +f64 +\[4, 3\] +\[Shard\(0\), Replicate\] +96 +4$' "$TOOL" ls "$T/a"
grep -qE '^w1 +tensor +f32 +\[6, 5\] +\[Shard\(0\), Shard\(1\)\] +120 +4$' "$T/out" &&
    grep -qE '^plan +blob +u8 +\[25\] .* 25 +1$' "$T/out" && grep -q '^10 entries, 715 bytes$' "$T/out" &&
    ok ls-rows || bad ls-rows "$(cat "$T/out")"
check verify 0 'ok: 3 files, 18 pieces, 715 bytes in 22 blocks verified \(4 threads\)' "$TOOL" verify "$T/a" -j 4
check verify-j1 0 'verified \(1 threads\)' "$TOOL" verify "$T/a" -j 1

cp -r "$T/a" "$T/flip"
flip_last_byte "$T/flip/shard-00001.safetensors"
check verify-bitflip 1 'shard-00001.safetensors: entry "step" piece 0 block 0 .*crc32c [0-9a-f]{8}, the index says' \
    "$TOOL" verify "$T/flip" -j 2
check export-bitflip 1 'entry "step" piece 0 block 0: crc32c' "$TOOL" export "$T/flip" "$T/flip.safetensors"
[ ! -e "$T/flip.safetensors" ] && ok export-bitflip-no-output || bad export-bitflip-no-output "a partial output was left"

cp -r "$T/a" "$T/trunc"
truncate -s -3 "$T/trunc/shard-00002.safetensors"
check verify-truncated 1 'shard-00002.safetensors: [0-9]+ bytes, the index says [0-9]+ \(truncated\)' "$TOOL" verify "$T/trunc"

cp -r "$T/a" "$T/missing"
rm "$T/missing/shard-00000.safetensors"
check verify-missing 1 'shard-00000.safetensors: missing' "$TOOL" verify "$T/missing"
# a FIFO in place of a shard, then of the index: refused at once, never a blocking open
cp -r "$T/a" "$T/fifo"
rm "$T/fifo/shard-00000.safetensors" && mkfifo "$T/fifo/shard-00000.safetensors"
check verify-fifo-shard 1 'shard-00000.safetensors is not a regular file' timeout 30 "$TOOL" verify "$T/fifo"
rm "$T/fifo/index.json" && mkfifo "$T/fifo/index.json"
check verify-fifo-index 1 'index.json is not a regular file' timeout 30 "$TOOL" verify "$T/fifo"

cp -r "$T/a" "$T/badindex"
head -c 500 "$T/a/index.json" >"$T/badindex/index.json"
check verify-bad-index 1 'index.json: JSON syntax error' "$TOOL" verify "$T/badindex"
check ls-no-index 1 'index.json: No such file' "$TOOL" ls "$T/nowhere"

check export-gap 1 'entry "w1": the pieces hold 24 of its 30 elements' "$TOOL" export "$T/gap" "$T/gap.safetensors"
# verify sees what the loader sees: a piece missing, a shape no pieces can fill
check verify-gap 1 'index.json: entry "w1": its pieces hold 24 of its 30 elements' "$TOOL" verify "$T/gap"
cp -r "$T/a" "$T/huge"
python3 - "$T/huge/index.json" <<'PY'
import json, sys
p = sys.argv[1]; ix = json.load(open(p))
e = next(e for e in ix["entries"] if e["kind"] == "tensor")
e["shape"][0] = 10**17  # (under the parser's 2^62 bytes)
open(p, "w").write(json.dumps(ix))
PY
check verify-huge-shape 1 'its pieces hold [0-9]+ of its [0-9]{18,} elements' "$TOOL" verify "$T/huge"

check export 0 '10 entries, 715 bytes' "$TOOL" export "$T/a" "$T/full.safetensors"
if python3 -c 'import numpy, safetensors' >/dev/null 2>&1; then
    args=()
    for n in w1 emb adam.m adam.v ids bias scale empty step plan; do args+=("$n=$T/a/expect/$n.bin"); done
    check export-python 0 'ok .*adam\.v F64 \[4, 3\] equals' python3 tests/check_safetensors.py "$T/full.safetensors" \
        --keys=w1,emb,adam.m,adam.v,ids,bias,scale,empty,step,plan "${args[@]}"
    for f in "$T"/a/shard-*.safetensors; do
        check "shard-python-$(basename "$f" .safetensors)" 0 '' python3 tests/check_safetensors.py "$f"
    done
elif [ -n "${VESCALE_TEST_REQUIRE_PYTHON:-}" ]; then # CI: .ci/run installed them
    echo "not ok ckpt_tool/export-python: python3 lacks numpy or safetensors, and VESCALE_TEST_REQUIRE_PYTHON is set"
else
    echo "skip ckpt_tool/export-python: python3 lacks numpy or safetensors (.ci/run installs them)"
fi

check diff-same 0 '^10 entries the same, 0 different$' "$TOOL" diff "$T/a" "$T/a"
check diff 1 '^w1: 1 of 30 elements differ; largest at \(2, 3\): -2.5 vs -1.5 \(\|a-b\| 1\)$' "$TOOL" diff "$T/a" "$T/b"
grep -q '^ids: i64 \[7\] vs i64 \[8\]$' "$T/out" && grep -q '^bias: f16 \[3\] vs i32 \[3\]$' "$T/out" &&
    grep -q "^only in $T/a: plan$" "$T/out" && grep -q '^6 entries the same, 4 different$' "$T/out" &&
    ok diff-lines || bad diff-lines "$(cat "$T/out")"
check diff-reversed 1 "^only in $T/a: plan$" "$TOOL" diff "$T/b" "$T/a"
check diff-unreadable 1 'crc32c' "$TOOL" diff "$T/a" "$T/flip"
# tolerances: w1's one difference is 1.0 (-2.5 vs -1.5): within atol 1, and within rtol 0.7 of |b| = 1.5
check diff-atol 1 '^7 entries the same, 3 different$' "$TOOL" diff "$T/a" "$T/b" --atol 1
check diff-rtol 1 '^7 entries the same, 3 different$' "$TOOL" diff "$T/a" "$T/b" --rtol 0.7
check diff-rtol-tight 1 '^w1: 1 of 30 elements differ' "$TOOL" diff "$T/a" "$T/b" --rtol 0.6 --atol 0.05
check diff-bad-tol 2 'usage' "$TOOL" diff "$T/a" "$T/b" --atol -1
check usage 2 'usage' "$TOOL" verify "$T/a" -j 0

[ "$fails" -eq 0 ]
