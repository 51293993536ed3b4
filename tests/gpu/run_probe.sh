#!/usr/bin/env bash
# On a machine with a GPU: make test-gpu, then the probes of tests/gpu/probe.c.
# Finds an NCCL outside the CUDA toolkit (pip's nvidia-nccl) when the toolkit has none.
OUT=${OUT:-/tmp/vs_gpu_out}; mkdir -p "$OUT"
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
mkdir -p build
nvcc -O2 -x cu -DVESCALE_NCCL -I. -Itests -I"$NH" -L"$NL" -Xlinker -rpath="$NL" -o build/probe tests/gpu/probe.c -lnccl -lnvrtc -lpthread || echo "probe build failed"
set -o pipefail
timeout 300 make --no-print-directory test-gpu CUDA="$CUDA" NCCL_INCLUDE="$NH" NCCL_LIB="$NL" 2>&1 | tee "$OUT/test_gpu.log"; echo "test-gpu rc=$?"
for p in ckpt ckpt_async submesh; do
    echo "== probe $p"; timeout 60 ./build/probe $p 2>&1 | tail -5; echo "rc=$?"
    echo "== probe $p NCCL_CHECK_POINTERS=1"; NCCL_CHECK_POINTERS=1 timeout 60 ./build/probe $p 2>&1 | tail -5; echo "rc=$?"
done
if command -v compute-sanitizer >/dev/null; then
    echo "== compute-sanitizer probe ckpt"; timeout 120 compute-sanitizer --tool memcheck ./build/probe ckpt 2>&1 | tail -25
fi
