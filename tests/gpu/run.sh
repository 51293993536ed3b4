#!/usr/bin/env bash
# On a machine with a GPU (one is enough), within BUDGET_S seconds (default 480:
# a lent GPU's 15 minutes leave room for one rerun), these steps in this order
# (STEPS="calib test-gpu run-gpu sanitizer" picks some):
#   calib     bench/gpu_calib on the GPU (measured) and on the strict stand-in with
#             the GPU's spec (modelled: VS_STRICT_SPEC=h100|h200 by nvidia-smi's
#             name), compared per kernel class and per step (measured / modelled),
#             a spec file fitted from the measurement, and the stand-in again with
#             it (tests/gpu/README.md: how to read it, what to do with the file)
#   test-gpu  make test-gpu: the NCCL tests on the GPU(s)
#   run-gpu   make run-gpu's one-GPU runs: examples/train_gpt.c --device cuda, f32 then bf16
#   sanitizer test_nccl again under compute-sanitizer (memcheck) where it works
# Everything is built first, side by side (make -j). Each step gets at most what
# is left of the budget; one that would get under 20 s is skipped and says so.
# Finds an NCCL outside the CUDA toolkit (Debian's libnccl-dev, pip's
# nvidia-nccl) when the toolkit has none. Outputs under OUT (default
# /tmp/vs_gpu_out): calib_*.txt / .md / .spec, the logs.
OUT=${OUT:-/tmp/vs_gpu_out}; mkdir -p "$OUT"
B=${B:-build}
BUDGET_S=${BUDGET_S:-480}
STEPS=${STEPS:-calib test-gpu run-gpu sanitizer}
T0=$(date +%s)
nvidia-smi -L; nvcc --version | tail -1
CUDA=${CUDA:-$(dirname "$(dirname "$(command -v nvcc)")")}
NH=$CUDA/include; NL=$CUDA/lib64
if [ ! -f "$NH/nccl.h" ]; then
    h=$(find / -xdev -name nccl.h -path '*include*' 2>/dev/null | head -1)
    NH=$(dirname "$h"); NL=$(dirname "$(find "$(dirname "$NH")" -name 'libnccl.so*' | head -1)")
fi
if [ ! -e "$NL/libnccl.so" ]; then mkdir -p /tmp/ncl; for f in libnccl.so libnccl.so.2; do ln -sf "$NL"/libnccl.so.2 /tmp/ncl/$f; done; NL=/tmp/ncl; fi
echo "NCCL: $NH $NL"; grep -m3 -E "define NCCL_(MAJOR|MINOR|PATCH)" "$NH/nccl.h"
export LD_LIBRARY_PATH="$NL:${LD_LIBRARY_PATH:-}"
MK=(make --no-print-directory B="$B" CUDA="$CUDA" NCCL_INCLUDE="$NH" NCCL_LIB="$NL")
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
left() { echo $((BUDGET_S - ($(date +%s) - T0))); }
# limit <step's own limit>: the smaller of it and what is left, or 0 (skip)
limit() { local l; l=$(left); [ "$l" -gt "$1" ] && l=$1; [ "$l" -lt 20 ] && l=0; echo "$l"; }
skipped() { echo "== $1: skipped, $(left) s of the budget left"; }

# --- everything built at once (nvcc is one core a file; the stand-in's objects too) ---
bins=()
want calib && bins+=("$B/gpu_calib_gpu" "$B/gpu_calib")
want test-gpu && bins+=("$B/test_nccl" "$B/test_pipe_nccl_gpu" "$B/test_ckpt_nccl_gpu" "$B/test_gpt_kernels_gpu")
want run-gpu && bins+=("$B/train_gpt_gpu")
want sanitizer && bins+=("$B/test_nccl")
echo "== building ${bins[*]}"
t=$(limit 300)
timeout "$t" "${MK[@]}" -k -j"$(nproc)" "${bins[@]}" >"$OUT/build.log" 2>&1
echo "build rc=$? ($(($(date +%s) - T0)) s); what failed:"; grep -E "error|Error" "$OUT/build.log" | head -20

# --- calib: the stand-in's clock against this GPU (issue 35 §4) ---
if want calib; then
    name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | head -1)
    case "$name" in
        *H200*) spec=h200 ;;
        *H100*) spec=h100 ;;
        *) spec=h100; echo "calib: no built-in spec for '$name': compared against the H100's (the fit is what to use)" ;;
    esac
    t=$(limit 240)
    if [ "$t" = 0 ]; then skipped calib; else
        echo "== calib: bench/gpu_calib on $name (measured) and on the stand-in, VS_STRICT_SPEC=$spec (modelled)"
        M=$OUT/calib_measured.txt D=$OUT/calib_modelled.txt
        if [ -x "$B/gpu_calib" ]; then
            (VS_STRICT_SPEC=$spec timeout "$t" "$B/gpu_calib" --out "$D" >"$OUT/calib_modelled.log" 2>&1; echo "stand-in rc=$?" >>"$OUT/calib_modelled.log") &
            standin=$!
        elif [ -n "${CALIB_MODEL:-}" ] && [ -f "$CALIB_MODEL" ]; then
            echo "calib: the stand-in did not build here (its NCCL header?): the modelled side is $CALIB_MODEL"; cp "$CALIB_MODEL" "$D"; standin=
        else
            echo "calib: the stand-in did not build here and no CALIB_MODEL: the measured side only"; standin=
        fi
        timeout "$t" "$B/gpu_calib_gpu" --out "$M" 2>&1 | grep -v "vescale warn" | tee "$OUT/calib_measured.log"
        echo "gpu_calib (GPU) rc=${PIPESTATUS[0]}"
        [ -n "$standin" ] && wait "$standin" && tail -1 "$OUT/calib_modelled.log"
        if [ -f "$D" ] && [ -f "$M" ]; then
            cmp=$B/gpu_calib; [ -x "$cmp" ] || cmp=$B/gpu_calib_gpu # (--compare needs no device)
            "$cmp" --compare "$D" "$M" --spec-out "$OUT/calib_fit.spec" 2>&1 | tee "$OUT/calib_compare.md"
            t=$(limit 120)
            if [ -x "$B/gpu_calib" ] && [ -f "$OUT/calib_fit.spec" ] && [ "$t" != 0 ]; then
                echo "== calib: the stand-in again with the fitted spec ($OUT/calib_fit.spec)"
                VS_STRICT_SPEC=$OUT/calib_fit.spec timeout "$t" "$B/gpu_calib" --out "$OUT/calib_modelled_fit.txt" >"$OUT/calib_modelled_fit.log" 2>&1
                "$B/gpu_calib" --compare "$OUT/calib_modelled_fit.txt" "$M" 2>&1 | tee "$OUT/calib_compare_fit.md" | sed -n '1,16p'
            fi
        fi
    fi
fi

set -o pipefail
if want test-gpu; then
    t=$(limit 300)
    if [ "$t" = 0 ]; then skipped test-gpu; else
        timeout "$t" "${MK[@]}" test-gpu 2>&1 | tee "$OUT/test_gpu.log"
        echo "test-gpu rc=$?"
    fi
fi
if want run-gpu; then # make run-gpu's runs (one rank a visible GPU)
    t=$(limit 150)
    if [ "$t" = 0 ]; then skipped run-gpu; else
        { timeout "$t" "./$B/train_gpt_gpu" --device cuda --steps 20 && timeout "$t" "./$B/train_gpt_gpu" --device cuda --steps 10 --dtype bf16; } 2>&1 | tee "$OUT/run_gpu.log"
        echo "run-gpu rc=$?"
    fi
fi
if want sanitizer && command -v compute-sanitizer >/dev/null; then
    t=$(limit 200)
    if [ "$t" = 0 ]; then skipped sanitizer; else
        echo "== compute-sanitizer --tool memcheck $B/test_nccl"
        timeout "$t" compute-sanitizer --tool memcheck --report-api-errors no "./$B/test_nccl" 2>&1 | tail -15
    fi
fi
echo "== done in $(($(date +%s) - T0)) s (budget $BUDGET_S s)"
