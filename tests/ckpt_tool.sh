#!/usr/bin/env bash
# tests/ckpt_tool.sh - tools/vescale-ckpt on checkpoints written by hand
# ($B/test_ckpt_format --make, tests/ckpt_handmade.h: tensor, range and blob
# entries over three shard files): ls, verify (good, bit flip, truncated,
# missing file, broken index), export (read back by Python's safetensors + numpy
# against the original full tensors, when installed), export --weights-only (the
# Hugging Face layout, also of a checkpoint vs_ckpt_save_ddp wrote on DP2 x TP2:
# $B/test_ckpt_ddp --make; read through model.safetensors.index.json by
# tests/check_hf_export.py), diff; verify and diff of ZeRO-3 and HSDP checkpoints ($B/test_ckpt_zero3 --make).
# One "ok / not ok / skip" line per check.
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
[ ! -e "$T/flip.safetensors" ] && [ -z "$(ls -d "$T"/flip.safetensors.tmp-* 2>/dev/null)" ] && ok export-bitflip-no-output ||
    bad export-bitflip-no-output "a partial output was left"

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

# --- export --weights-only: the Hugging Face layout (issue 19.8) ---
# the sample's weights: w1 120, emb 320, ids 56, bias 6, scale 4, empty 0 bytes (506); adam.m/.v are
# range entries, step/plan blobs. Under 100 bytes a file: w1 and emb alone, the rest in a third.
W=w1,emb,ids,bias,scale,empty
hf_args() { # DIR NAME...: NAME=DIR/expect/NAME.bin for the Python check
    local d=$1; shift
    for n in "$@"; do printf '%s\n' "$n=$d/expect/$n.bin"; done
}
check hf-export 0 "^$T/hf: 6 tensors, 506 bytes in 3 files and model.safetensors.index.json$" \
    "$TOOL" export --weights-only --max-shard-size 100 "$T/a" "$T/hf"
grep -q '^left out 4 entries: 2 range, 2 blob$' "$T/out" && ok hf-export-left-out || bad hf-export-left-out "$(cat "$T/out")"
[ "$(LC_ALL=C ls -A "$T/hf" | tr '\n' ' ')" = "model-00001-of-00003.safetensors model-00002-of-00003.safetensors model-00003-of-00003.safetensors model.safetensors.index.json " ] &&
    [ -z "$(ls -d "$T"/hf.tmp-* 2>/dev/null)" ] && ok hf-export-files || bad hf-export-files "$(ls -A "$T/hf" "$T")"
# sizes: decimal units as huggingface_hub reads them (200B: 2 files; 1KB, 1kB, 1KiB and the 5GB default: one)
check hf-size-bytes 0 'in 2 files and model' "$TOOL" export --weights-only --max-shard-size=200B "$T/a" "$T/hf200"
check hf-size-kb 0 '6 tensors, 506 bytes in model.safetensors$' "$TOOL" export --weights-only --max-shard-size 1kB "$T/a" "$T/hf1k"
check hf-size-kib 0 'in model.safetensors$' "$TOOL" export --max-shard-size 1KiB --weights-only "$T/a" "$T/hf1ki"
check hf-single 0 '6 tensors, 506 bytes in model.safetensors$' "$TOOL" export --weights-only "$T/a" "$T/hf1/"
[ "$(ls -A "$T/hf1")" = model.safetensors ] && ok hf-single-no-index || bad hf-single-no-index "$(ls -A "$T/hf1")"
# the whole checkpoint into a directory: every entry (blobs as U8), in the same layout
mkdir "$T/hfall"
check hf-all-entries 0 "^$T/hfall: 10 tensors, 715 bytes in model.safetensors$" "$TOOL" export "$T/a" "$T/hfall"
# an existing directory (say, with the model's config.json) takes the files, nothing else changes
mkdir "$T/hfcfg" && echo '{}' >"$T/hfcfg/config.json"
check hf-existing-dir 0 'in 3 files' "$TOOL" export --weights-only --max-shard-size 100 "$T/a" "$T/hfcfg"
[ "$(LC_ALL=C ls -A "$T/hfcfg" | tr '\n' ' ')" = "config.json model-00001-of-00003.safetensors model-00002-of-00003.safetensors model-00003-of-00003.safetensors model.safetensors.index.json " ] &&
    ok hf-existing-dir-files || bad hf-existing-dir-files "$(ls -A "$T/hfcfg")"
# --include picks by name instead of the rule (range entries too)
check hf-include 0 '2 tensors, 176 bytes in model.safetensors' "$TOOL" export --include adam. "$T/a" "$T/hfadam"
check hf-include-none 1 '--include opt\.: no tensor or range entry' "$TOOL" export --include adam. --include opt. "$T/a" "$T/hfx"
# --strip-prefix and the optimizer-state names, on a copy whose entries are renamed
cp -r "$T/a" "$T/pre"
python3 - "$T/pre/index.json" <<'PY'
import json, sys
p = sys.argv[1]; ix = json.load(open(p))
for e in ix["entries"]:
    e["name"] = {"w1": "model.w1", "emb": "model.emb", "scale": "scale.exp_avg"}.get(e["name"], e["name"])
open(p, "w").write(json.dumps(ix))
PY
check hf-strip 0 '5 tensors, 502 bytes in model.safetensors' "$TOOL" export --weights-only --strip-prefix model. "$T/pre" "$T/hfstrip"
grep -q '^left out 5 entries: 2 range, 2 blob, 1 optimizer-state tensor$' "$T/out" && ok hf-optim-name || bad hf-optim-name "$(cat "$T/out")"
cp -r "$T/a" "$T/clash"
python3 - "$T/clash/index.json" <<'PY'
import json, sys
p = sys.argv[1]; ix = json.load(open(p))
for e in ix["entries"]:
    e["name"] = {"ids": "model.w1"}.get(e["name"], e["name"])
open(p, "w").write(json.dumps(ix))
PY
check hf-strip-clash 1 'entries "w1" and "model.w1" are both "w1" after --strip-prefix model\.' \
    "$TOOL" export --weights-only --strip-prefix model. "$T/clash" "$T/hfclash"
cp -r "$T/a" "$T/noweights"
python3 - "$T/noweights/index.json" <<'PY'
import json, sys
p = sys.argv[1]; ix = json.load(open(p))
for e in ix["entries"]:
    e["name"] += ".momentum" if e["kind"] == "tensor" else ""
open(p, "w").write(json.dumps(ix))
PY
check hf-no-weights 1 'noweights: no weights among its 10 entries' "$TOOL" export --weights-only "$T/noweights" "$T/hfnone"
[ ! -e "$T/hfnone" ] && ok hf-no-weights-no-output || bad hf-no-weights-no-output "an output was left"
check hf-strip-empty 1 'entry "model\.w1" is all prefix' "$TOOL" export --weights-only --strip-prefix model.w1 "$T/clash" "$T/hfclash"
[ ! -e "$T/hfclash" ] && ok hf-strip-no-output || bad hf-strip-no-output "an output was left"
# a corrupt weight: exit 1 naming it, nothing left (no directory, no temporary, no file in an existing directory)
cp -r "$T/a" "$T/bad"
python3 - "$T/bad" <<'PY'
import json, sys
d = sys.argv[1]; ix = json.load(open(d + "/index.json"))
p = next(e for e in ix["entries"] if e["name"] == "emb")["pieces"][1]
f = open(d + "/" + ix["files"][p["file"]]["name"], "r+b"); f.seek(p["data"][0]); b = f.read(1)
f.seek(p["data"][0]); f.write(bytes([b[0] ^ 1])); f.close()
PY
check hf-corrupt 1 'entry "emb" piece 1 block 0: crc32c' "$TOOL" export --weights-only --max-shard-size 100 "$T/bad" "$T/hfbad"
[ ! -e "$T/hfbad" ] && [ -z "$(ls -d "$T"/hfbad.tmp-* 2>/dev/null)" ] && ok hf-corrupt-no-output ||
    bad hf-corrupt-no-output "$(ls -d "$T"/hfbad*)"
mkdir "$T/hfbadcfg" && echo '{}' >"$T/hfbadcfg/config.json"
check hf-corrupt-existing-dir 1 'entry "emb" piece 1' "$TOOL" export --weights-only --max-shard-size 100 "$T/bad" "$T/hfbadcfg"
[ "$(ls -A "$T/hfbadcfg")" = config.json ] && ok hf-corrupt-existing-dir-clean || bad hf-corrupt-existing-dir-clean "$(ls -A "$T/hfbadcfg")"
# bad input: usage (2) or a refused output (1), with the reason
check hf-unknown-flag 2 'unknown option --weights-onyl' "$TOOL" export --weights-onyl "$T/a" "$T/hfu"
for sz in 5XB 0 -1 1.5GB 5Gb 99999999TB ''; do
    check "hf-bad-size-${sz:-empty}" 2 "--max-shard-size: not a size above 0: $sz\$" \
        "$TOOL" export --weights-only --max-shard-size "$sz" "$T/a" "$T/hfu"
done
check hf-size-missing 2 'a value is missing after --max-shard-size' "$TOOL" export --weights-only "$T/a" "$T/hfu" --max-shard-size
check hf-size-twice 2 'given twice' "$TOOL" export --max-shard-size 1GB --max-shard-size 2GB "$T/a" "$T/hfu"
check hf-strip-twice 2 'one non-empty prefix, once' "$TOOL" export --strip-prefix a --strip-prefix b "$T/a" "$T/hfu"
check hf-three-args 2 'and then extra' "$TOOL" export --weights-only "$T/a" "$T/hfu" extra
check hf-file-name 2 'hfu.safetensors: --weights-only, --include and --max-shard-size write a directory' \
    "$TOOL" export --weights-only "$T/a" "$T/hfu.safetensors"
[ ! -e "$T/hfu" ] && [ ! -e "$T/hfu.safetensors" ] && ok hf-usage-no-output || bad hf-usage-no-output "$(ls "$T")"
check hf-exists 1 'hf holds model-0000[0-9]-of-00003.safetensors of an earlier export' \
    "$TOOL" export --weights-only "$T/a" "$T/hf"
check hf-exists-file 1 'full.safetensors exists and is not a directory' "$TOOL" export --weights-only "$T/a" "$T/full.safetensors"
check export-exists 1 'full.safetensors exists \(export never replaces a file\)' "$TOOL" export "$T/a" "$T/full.safetensors"

# a checkpoint the library saved from a sharded mesh: DP2 x TP2, ZeRO-1, prefix "model." (test_ckpt_ddp --make)
if [ -x "$B/test_ckpt_ddp" ] && "$B/test_ckpt_ddp" --make "$T/ddp" >"$T/out" 2>&1; then
    check hf-ddp 0 "^$T/hfd: 5 tensors, 532 bytes in 3 files and model.safetensors.index.json$" \
        "$TOOL" export --weights-only --strip-prefix model. --max-shard-size 200 "$T/ddp" "$T/hfd"
    grep -q '^left out 11 entries: 9 range, 2 blob$' "$T/out" && ok hf-ddp-left-out || bad hf-ddp-left-out "$(cat "$T/out")"
elif [ -x "$B/test_ckpt_ddp" ]; then
    bad hf-ddp "test_ckpt_ddp --make: $(head -c 600 "$T/out")"
else
    echo "skip ckpt_tool/hf-ddp: $B/test_ckpt_ddp not built"
fi

if python3 -c 'import numpy, safetensors' >/dev/null 2>&1; then
    mapfile -t args < <(hf_args "$T/a" w1 emb ids bias scale empty)
    check hf-python 0 "ok $T/hf: 6 tensors in model-00001-of-00003.safetensors, .*, 506 bytes" \
        python3 tests/check_hf_export.py "$T/hf" --keys=$W --files=3 --max-shard-size=100 "${args[@]}"
    check hf-python-single 0 "ok $T/hf1: 6 tensors in model.safetensors, 506 bytes" \
        python3 tests/check_hf_export.py "$T/hf1" --keys=$W --files=1 "${args[@]}"
    check hf-python-existing-dir 0 'ok .*hfcfg: 6 tensors' python3 tests/check_hf_export.py "$T/hfcfg" --keys=$W --files=3 "${args[@]}"
    check hf-python-include 0 'ok .*adam\.v F64 \[4, 3\] equals' python3 tests/check_hf_export.py "$T/hfadam" \
        --keys=adam.m,adam.v --files=1 "adam.m=$T/a/expect/adam.m.bin" "adam.v=$T/a/expect/adam.v.bin"
    check hf-python-strip 0 'ok .*hfstrip: 5 tensors' python3 tests/check_hf_export.py "$T/hfstrip" \
        --keys=w1,emb,ids,bias,empty --files=1 "w1=$T/a/expect/w1.bin" "emb=$T/a/expect/emb.bin" "ids=$T/a/expect/ids.bin"
    if [ -d "$T/hfd" ]; then
        mapfile -t args < <(hf_args "$T/ddp" head.w model.b model.h model.w0 model.w1 | sed 's/^model\.//')
        check hf-python-ddp 0 "ok $T/hfd: 5 tensors in .*, 532 bytes" python3 tests/check_hf_export.py "$T/hfd" \
            --keys=head.w,b,h,w0,w1 --files=3 --max-shard-size=200 "${args[@]}"
    fi
elif [ -n "${VESCALE_TEST_REQUIRE_PYTHON:-}" ]; then
    echo "not ok ckpt_tool/hf-python: python3 lacks numpy or safetensors, and VESCALE_TEST_REQUIRE_PYTHON is set"
    fails=$((fails + 1))
else
    echo "skip ckpt_tool/hf-python: python3 lacks numpy or safetensors (.ci/run installs them)"
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

# ZeRO-3 and HSDP checkpoints (issue 34): test_ckpt_zero3 --make writes z3 (ZeRO-3 DP2: every entry a range
# entry, the parameters too), hsdp (ZeRO-1 DPR2 x DPS2 x TP2 loaded from z3), z3b (ZeRO-3 loaded back from hsdp),
# and z3t, hsdpt (z3 and hsdp trained on, alike). verify each; diff finds them the same across the meshes, and
# names what training on changed; a flipped byte of a ZeRO-3 shard is named by verify and diff
if [ -x "$B/test_ckpt_zero3" ] && "$B/test_ckpt_zero3" --make "$T/z3" >"$T/out" 2>&1; then
    check z3-verify 0 'z3: ok: 2 files, [0-9]+ pieces' "$TOOL" verify "$T/z3/z3"
    # (HSDP's replica-1 ranks of a TP column hold nothing to save: no file, 0 bytes in the index)
    check hsdp-verify 0 'hsdp: ok: [0-9]+ files, [0-9]+ pieces' "$TOOL" verify "$T/z3/hsdp"
    check z3-ls 0 '^a\.w +range +bf16 +\[16, 24\]' "$TOOL" ls "$T/z3/z3"
    check z3-hsdp-diff 0 '^16 entries the same, 0 different$' "$TOOL" diff "$T/z3/z3" "$T/z3/hsdp"
    check z3-back-diff 0 '^16 entries the same, 0 different$' "$TOOL" diff "$T/z3/z3" "$T/z3/z3b"
    check z3-trained-diff 1 '^a\.w\.exp_avg: [0-9]+ of 384 elements differ' "$TOOL" diff "$T/z3/z3" "$T/z3/z3t"
    check z3-hsdp-trained-diff 0 '^16 entries the same, 0 different$' "$TOOL" diff "$T/z3/z3t" "$T/z3/hsdpt"
    cp -r "$T/z3/z3" "$T/z3flip"
    flip_last_byte "$T/z3flip/shard-00001.safetensors"
    check z3-verify-bitflip 1 'shard-00001.safetensors: entry ".*" piece [0-9]+ block 0 .*crc32c' "$TOOL" verify "$T/z3flip"
    check z3-diff-bitflip 1 'crc32c' "$TOOL" diff "$T/z3/z3" "$T/z3flip"
elif [ -x "$B/test_ckpt_zero3" ]; then
    bad z3-make "test_ckpt_zero3 --make: $(head -c 600 "$T/out")"
else
    echo "skip ckpt_tool/z3: $B/test_ckpt_zero3 not built"
fi

# diff of two meshes' checkpoints (issue 33): examples/train_gpt.c saves 2 steps on one rank and on PP2 (bit for
# bit one rank's): the same, status 0, the plan ("__plan") only a note; DP2's rounding differs: status 1, and
# __plan is still no difference
if [ -x "$B/train_gpt" ]; then
    for m in 1x1x1 2x1x1 1x2x1; do
        "$B/train_gpt" --mesh $m --steps 2 --no-reference --save "$T/gpt/$m" >"$T/gpt_$m.log" 2>&1 ||
            bad "diff-meshes" "train_gpt --mesh $m: $(tail -3 "$T/gpt_$m.log")"
    done
    check diff-meshes-same 0 '^note: __plan: saved on another plan \("mesh: PP=1 DP=1 TP=1" vs "mesh: PP=2 DP=1 TP=1"\)' \
        "$TOOL" diff "$T/gpt/1x1x1" "$T/gpt/2x1x1"
    grep -q ' 0 different$' "$T/out" || bad diff-meshes-same-count "$(tail -2 "$T/out")"
    check diff-meshes-dp 1 '^note: __plan: ' "$TOOL" diff "$T/gpt/1x1x1" "$T/gpt/1x2x1"
    grep -q '^__plan:' "$T/out" && bad diff-meshes-dp-plan "__plan counted as a difference: $(grep '^__plan' "$T/out")"
else
    echo "skip ckpt_tool/diff-meshes: $B/train_gpt not built"
fi

[ "$fails" -eq 0 ]
