#!/usr/bin/env bash
# On a machine with a GPU: make test-gpu, then test_nccl again under
# compute-sanitizer (memcheck) where it works. Finds an NCCL outside the CUDA
# toolkit (Debian's libnccl-dev, pip's nvidia-nccl) when the toolkit has none.
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
set -o pipefail
timeout 300 make --no-print-directory test-gpu CUDA="$CUDA" NCCL_INCLUDE="$NH" NCCL_LIB="$NL" 2>&1 | tee "$OUT/test_gpu.log"
echo "test-gpu rc=$?"
if command -v compute-sanitizer >/dev/null; then
    echo "== compute-sanitizer --tool memcheck build/test_nccl"
    timeout 200 compute-sanitizer --tool memcheck --report-api-errors no ./build/test_nccl 2>&1 | tail -15
fi
