#!/usr/bin/env bash
# Every header alone as C99, C11 and C++17 with -Wall -Wextra -Werror (declarations
# only and with its implementation), all implementations in one TU, the static
# mode in two TUs linked together, the MPI and NCCL transports (compile + link),
# and nvcc. Prints one "ok/not ok/skip" line per check.
set -u
cd "$(dirname "$0")/.."
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
W="-Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -I."
# C only (g++ has no -Wmissing-prototypes): every public function is declared before its definition
MP="-Wmissing-prototypes"
CUDA=${CUDA:-/usr/local/cuda}
n=0

# COMPILE_CHECK_SHARD=i/k (tests/run.sh runs k of these side by side): this run makes
# every k-th check from the i-th on (and only shard 0 the others' lines), so the k runs
# together make each check once; unset, all of them.
SHARD=${COMPILE_CHECK_SHARD:-0/1}
shard_i=${SHARD%/*} shard_k=${SHARD#*/}
mine() { [ $(((n - 1) % shard_k)) -eq "$shard_i" ]; }

check() { # name, command...
    local name=$1; shift
    n=$((n + 1))
    mine || return 0
    if "$@" >"$T/out" 2>&1; then echo "ok compile/$name"; else echo "not ok compile/$name"; sed 's/^/    /' "$T/out" | head -20; fi
}
say() { if [ "$shard_i" = 0 ]; then echo "$@"; fi; } # a line outside the checks: printed once

for h in vescale.h vescale_mesh.h vescale_ddp.h vescale_pipe.h vescale_ckpt.h; do
    b=${h%.h}
    printf '#include "%s"\nint vs_check_decl(void);\nint vs_check_decl(void) { return 0; }\n' "$h" >"$T/$b.decl.c"
    printf '#define VESCALE_IMPLEMENTATION\n#include "%s"\n#include "%s"\nint main(void) { return vs_version() != VESCALE_VERSION_NUMBER; }\n' "$h" "$h" >"$T/$b.impl.c"
    for std in c99 c11; do
        check "$h/decl/$std" gcc -std=$std $W $MP -c "$T/$b.decl.c" -o "$T/o.o"
        check "$h/impl/$std" gcc -std=$std $W $MP -pedantic-errors -Wno-long-long "$T/$b.impl.c" -o "$T/a.out" -lpthread -lm
    done
    check "$h/decl/c++17" g++ -std=c++17 $W -x c++ -c "$T/$b.decl.c" -o "$T/o.o"
    check "$h/impl/c++17" g++ -std=c++17 $W -x c++ "$T/$b.impl.c" -o "$T/a.out" -lpthread -lm
done

# examples/gpt_kernels.h (the GPT's kernels: host C and NVRTC text from one text),
# with the implementation and in a second TU, and its NVRTC text built
printf '#define VESCALE_IMPLEMENTATION\n#include "vescale.h"\n#include "examples/gpt_kernels.h"\nint gk2(void);\nint main(void) { gpt_kctx k; return (int)gpt_kctx_init(&k, GPT_K_HOST, NULL) + gk2(); }\n' >"$T/gk1.c"
printf '#include "vescale.h"\n#include "examples/gpt_kernels.h"\nint gk2(void);\nint gk2(void) { float a = 1, z; gpt_kctx k; gpt_kctx_init(&k, GPT_K_HOST, NULL); return (int)gpt_k_gelu(&k, 1, &a, GPT_KF32, &z, GPT_KF32); }\n' >"$T/gk2.c"
for std in c99 c11; do
    check "examples/gpt_kernels.h/$std" bash -c "gcc -std=$std $W $T/gk1.c $T/gk2.c -o $T/a.out -lpthread -lm && $T/a.out"
done
check "examples/gpt_kernels.h/c++17" bash -c "g++ -std=c++17 $W -x c++ $T/gk1.c $T/gk2.c -o $T/a.out -lpthread && $T/a.out"
if [ -f "$CUDA/include/nvrtc.h" ]; then
    check "examples/gpt_kernels.h/nvrtc-text" gcc -std=c99 $W -DVESCALE_NVRTC -isystem "$CUDA/include" -c "$T/gk1.c" -o "$T/o.o"
fi

# every public function declared and defined under one marker, every marker listed
[ "$shard_i" = 0 ] && bash tests/check_markers.sh
# ... and the check itself fails on a header whose marker is opened twice (and on
# a public function defined but never declared)
awk '/^#define VESCALE_DDP_IMPLEMENTED$/ { print; print "// >>lr --"; next } { print }' vescale_ddp.h >"$T/twice.h"
check "markers/fails-on-a-marker-opened-twice" bash -c "! bash tests/check_markers.sh $T/twice.h | grep -q '^ok' &&
    bash tests/check_markers.sh $T/twice.h | grep -q 'marker >>lr opened twice in the implementation'"
sed 's/^VS_API vs_result vs_ddp_finalize(vs_ddp\* d);$//' vescale_ddp.h >"$T/undeclared.h"
check "markers/fails-on-an-undeclared-function" bash -c "bash tests/check_markers.sh $T/undeclared.h |
    grep -q 'vs_ddp_finalize (line [0-9]*) is defined but not declared'"

# plain builds, as the README says: no feature macro on the command line (the
# header defines _POSIX_C_SOURCE when it comes first). What a missing feature
# macro breaks is a declaration (an implicit one is an error under -Werror):
# -fsyntax-only sees it; the same TU's code and link are vescale.h/impl/*'s above,
# and plain/readme-example below builds, links and runs without the macro.
P="-Wall -Wextra -Werror -I."
for std in c99 c11; do
    check "plain/$std" gcc -std=$std $P -fsyntax-only "$T/vescale.impl.c"
done
check "plain/c++17" g++ -std=c++17 $P -x c++ -fsyntax-only "$T/vescale.impl.c"
check "plain/readme-example" bash -c "sed -n '/^static int train/,/^int main/p' README.md > $T/readme_body.c &&
    { printf '#define VESCALE_IMPLEMENTATION\n#include \"vescale.h\"\n'; cat $T/readme_body.c; } > $T/readme.c &&
    gcc -std=c99 $P $T/readme.c -o $T/a.out -lpthread -lm && $T/a.out"
# a system header first, without the macro: a clear message, not a wall of errors
printf '#include <stdio.h>\n#define VESCALE_IMPLEMENTATION\n#include "vescale.h"\nint main(void) { return 0; }\n' >"$T/late.c"
check "plain/late-include-says-why" bash -c "! gcc -std=c99 $P $T/late.c -o $T/a.out -lpthread -lm 2>$T/late.err &&
    grep -q 'include the implementation before any system header' $T/late.err"

# optimisation levels change what gcc can prove (uninitialized, truncation); -O3
# with -DNDEBUG as a Release build has it (CMake's Release flags: VS_ASSERT off, so
# a variable only an assertion reads is unused; tests/install_check.sh's consumers
# build in CMake's default configuration and leave the -O3 compile to this check)
check "vescale.h/impl/c99-O1" gcc -std=c99 -O1 $W $MP "$T/vescale.impl.c" -o "$T/a.out" -lpthread -lm
check "vescale.h/impl/c99-O3" gcc -std=c99 -O3 -DNDEBUG $W $MP "$T/vescale.impl.c" -o "$T/a.out" -lpthread -lm

if command -v clang >/dev/null 2>&1; then
    check "vescale.h/impl/clang-c99" clang -std=c99 $W $MP "$T/vescale.impl.c" -o "$T/a.out" -lpthread -lm
    check "vescale.h/impl/clang++-c++17" clang++ -std=c++17 $W -x c++ "$T/vescale.impl.c" -o "$T/a.out" -lpthread
fi

# all parts in one TU, implementations switched on one by one
cat >"$T/all.c" <<'C'
#define VESCALE_MESH_IMPLEMENTATION
#define VESCALE_DDP_IMPLEMENTATION
#define VESCALE_PIPE_IMPLEMENTATION
#define VESCALE_CKPT_IMPLEMENTATION
#include "vescale.h"
int main(void) { return vs_ddp_version() + vs_pipe_version() + vs_ckpt_version() != 3 * vs_version(); }
C
check "all-parts-one-tu/c99" bash -c "gcc -std=c99 $W $MP $T/all.c -o $T/a.out -lpthread -lm && $T/a.out"

# A second source file: a layer callback beside the trainer's implementation TU
# reads its context through the declared vs_layer_* getters (an undeclared one
# was an implicit int in C, truncating the pointer, and refused by g++).
cat >"$T/layer2.c" <<'C'
#include "vescale.h"
int layer2_check(const vs_pipe_call* call, const void* user, const void* p0, const void* g1, vs_mesh* tp);
int layer2_check(const vs_pipe_call* call, const void* user, const void* p0, const void* g1, vs_mesh* tp)
{
    int64_t shape[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS];
    if (vs_layer_param_box(call, 0, shape, off) != VS_OK || shape[0] != 6 || off[0] != 12) return 1;
    if (vs_layer_param_box(call, VS_LAYER_MAX_PARAMS, shape, off) != VS_ERR_INVALID) return 2;
    if (vs_layer_user(NULL) || vs_layer_param(call, -1)) return 3;
    return vs_layer_user(call) != user || vs_layer_param(call, 0) != p0 || vs_layer_grad(call, 1) != g1 ||
           vs_layer_tp(call) != tp;
}
C
cat >"$T/layer1.c" <<'C'
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
int layer2_check(const vs_pipe_call* call, const void* user, const void* p0, const void* g1, vs_mesh* tp);
int main(void)
{
    static vs_layer_ctx ctx;
    static int u, p, g;
    vs_pipe_call call;
    memset(&call, 0, sizeof call);
    ctx.user = &u, ctx.param[0] = &p, ctx.grad[1] = &g, ctx.tp = (vs_mesh*)&ctx;
    ctx.local_shape[0][0] = 6, ctx.offset[0][0] = 12;
    call.user = &ctx;
    return layer2_check(&call, &u, &p, &g, (vs_mesh*)&ctx);
}
C
check "second-source-file/c99" bash -c "gcc -std=c99 $W $MP $T/layer1.c $T/layer2.c -o $T/a.out -lpthread -lm && $T/a.out"
check "second-source-file/c++17" bash -c "g++ -std=c++17 $W -x c++ $T/layer1.c $T/layer2.c -o $T/a.out -lpthread && $T/a.out"

# VESCALE_STATIC: the implementation in two TUs of one program, nothing exported
for i in 1 2; do
    printf '#define VESCALE_STATIC\n#define VESCALE_IMPLEMENTATION\n#include "vescale.h"\nint tu%s(void);\nint tu%s(void) { return vs_version(); }\n' $i $i >"$T/s$i.c"
done
printf 'int tu1(void); int tu2(void);\nint main(void) { return tu1() != tu2(); }\n' >"$T/smain.c"
check "static/two-tus" bash -c "gcc -std=c99 $W $MP $T/s1.c $T/s2.c $T/smain.c -o $T/a.out -lpthread -lm && $T/a.out && ! nm $T/a.out | grep -q ' T vs_'"

# --- VESCALE_STATIC alone, as the top comments say (issue 9): it implies the
# implementation; two TUs of one program, nothing exported, no warning. Each
# header alone (vescale_mesh.h needs its 3 lines from the lead's branch).
for h in vescale.h vescale_mesh.h vescale_ddp.h vescale_pipe.h vescale_ckpt.h; do
    b=${h%.h}
    for i in 1 2; do
        printf '#define VESCALE_STATIC\n#include "%s"\nint tu%s(void);\nint tu%s(void) { return vs_version(); }\n' "$h" $i $i >"$T/so$i.c"
    done
    check "static-only/$h" bash -c "gcc -std=c99 $W $MP $T/so1.c $T/so2.c $T/smain.c -o $T/a.out -lpthread -lm && $T/a.out && ! nm $T/a.out | grep -q ' T vs_'"
done
check "static-only/c++17" bash -c "g++ -std=c++17 $W -x c++ $T/so1.c $T/so2.c $T/smain.c -o $T/a.out -lpthread && $T/a.out"
# ---------------------------------------------------------------------------------

# --- descs from C++, as vescale.h's top comment shows (issue 9): `= {}` then fields
# (C++17), designated initializers (C++20; g++ warns about the fields left out)
cat >"$T/desc.cpp" <<'CPP'
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
static int train(vs_world* w, void*) {
    vs_mesh* mesh;
#if __cplusplus >= 202002L
    vs_mesh_desc md{ .shape = {2, 2} };
#else
    vs_mesh_desc md = {};
    md.shape[0] = 2; md.shape[1] = 2;
#endif
    if (vs_mesh_init(w, &md, &mesh)) return 1;
    vs_ddp_desc dd = {};
    dd.mesh = mesh; dd.zero = VS_ZERO_1;
    vs_ddp* ddp;
    if (vs_ddp_init(&dd, &ddp)) return 1;
    if (vs_ddp_free(ddp)) return 1;
    vs_plan plan = {};
    plan.schedule = VS_PIPE_DEFAULT; // a named 0: no cast from int in C++
    vs_pipe_split_desc sd = {};
    sd.schedule = VS_PIPE_ZBV;
    if (plan.schedule != VS_PIPE_DEFAULT || sd.schedule != VS_PIPE_ZBV) return 1;
    return vs_mesh_free(mesh);
}
int main() { return vs_launch(4, train, nullptr) == VS_OK ? 0 : 1; }
CPP
check "c++-desc/c++17" bash -c "g++ -std=c++17 $W $T/desc.cpp -o $T/a.out -lpthread && $T/a.out"
if g++ -std=c++20 -x c++ -fsyntax-only /dev/null 2>/dev/null; then
    check "c++-desc/c++20" bash -c "g++ -std=c++20 $W -Wno-missing-field-initializers $T/desc.cpp -o $T/a.out -lpthread && $T/a.out"
fi
# ---------------------------------------------------------------------------------

# MPI transport
if command -v mpicc >/dev/null 2>&1; then
    check "mpi/c99" mpicc -std=c99 $W $MP -DVESCALE_MPI "$T/vescale.impl.c" -o "$T/a.out" -lpthread -lm
    check "mpi/c++17" mpicxx -std=c++17 $W -DVESCALE_MPI -x c++ "$T/vescale.impl.c" -o "$T/a.out" -lpthread -lm
else
    say "skip compile/mpi: mpicc not installed"
fi

# NCCL transport (and the DDP kernels NVRTC compiles): compile and link with a
# plain C compiler, and with nvcc
if [ -f "$CUDA/include/nccl.h" ] || [ -f /usr/include/nccl.h ]; then
    NC="-I$CUDA/include -L$CUDA/lib64 -L$CUDA/lib -Wl,-rpath,$CUDA/lib64"
    check "nccl/gcc-c99-link" gcc -std=c99 $W $MP -DVESCALE_NCCL $NC "$T/vescale.impl.c" -o "$T/a.out" -lcudart -lnccl -lnvrtc -lpthread -lm
    # DDP's implementation in another TU than the mesh's (it uses only the public API)
    printf '#define VESCALE_MESH_IMPLEMENTATION\n#include "vescale_mesh.h"\n' >"$T/tu1.c"
    printf '#define VESCALE_DDP_IMPLEMENTATION\n#include "vescale_ddp.h"\nint main(void) { return vs_ddp_version() != vs_version(); }\n' >"$T/tu2.c"
    check "nccl/mesh-and-ddp-in-two-tus" gcc -std=c99 $W $MP -DVESCALE_NCCL $NC "$T/tu1.c" "$T/tu2.c" -o "$T/a.out" -lcudart -lnccl -lnvrtc -lpthread -lm
    # ... and before the mesh's in one TU: the kernel text both share is built for the host once
    printf '#define VESCALE_DDP_IMPLEMENTATION\n#include "vescale_ddp.h"\n#define VESCALE_MESH_IMPLEMENTATION\n#include "vescale_mesh.h"\nint main(void) { return vs_ddp_version() != vs_version(); }\n' >"$T/tu3.c"
    check "nccl/ddp-then-mesh-in-one-tu" gcc -std=c99 $W $MP -DVESCALE_NCCL $NC "$T/tu3.c" -o "$T/a.out" -lcudart -lnccl -lnvrtc -lpthread -lm
    # a CUDA before 12.0 (no cudaLibraryLoadData) stops the build with a message saying so
    mkdir -p "$T/cuda11" && printf '#define CUDART_VERSION 11080\n' >"$T/cuda11/cuda_runtime.h"
    check "nccl/cuda-11-refused" bash -c "! gcc -std=c99 $W -DVESCALE_NCCL -I$T/cuda11 -fsyntax-only $T/vescale.impl.c 2>$T/err &&
        grep -q 'VESCALE_NCCL needs CUDA 12.0 or later' $T/err"
    if command -v mpicc >/dev/null 2>&1; then # the NCCL id over MPI
        check "nccl+mpi/c99-link" mpicc -std=c99 $W $MP -DVESCALE_MPI -DVESCALE_NCCL $NC "$T/vescale.impl.c" -o "$T/a.out" -lcudart -lnccl -lnvrtc -lpthread -lm
    fi
    check "nccl/g++-c++17-link" g++ -std=c++17 $W -DVESCALE_NCCL -x c++ $NC "$T/vescale.impl.c" -o "$T/a.out" -lcudart -lnccl -lnvrtc -lpthread -lm
    if command -v nvcc >/dev/null 2>&1; then
        check "nccl/nvcc-link" nvcc -x cu -DVESCALE_NCCL -I. -Xcompiler -Wall,-Wextra,-Werror "$T/vescale.impl.c" -o "$T/a.out" -lnccl -lnvrtc
        check "nccl/test_nccl-nvcc-link" nvcc -x cu -DVESCALE_NCCL -I. -Itests -Xcompiler -Wall,-Wextra,-Werror tests/test_nccl.c -o "$T/a.out" -lnccl -lnvrtc -lpthread
        check "nvcc/no-nccl" nvcc -x cu -I. -Xcompiler -Wall,-Wextra,-Werror -c "$T/vescale.impl.c" -o "$T/o.o"
        check "nccl/gpt_kernels-nvcc" nvcc -x cu -DVESCALE_NCCL -I. -Xcompiler -Wall,-Wextra,-Werror -c "$T/gk1.c" -o "$T/o.o"
        # bench/gpu_calib.c's GPU half (tests/gpu/run.sh builds and runs it on a lent GPU)
        check "nccl/gpu_calib-nvcc" nvcc -x cu -DVESCALE_NCCL -I. -Xcompiler -Wall,-Wextra,-Werror -c bench/gpu_calib.c -o "$T/o.o"
    else
        say "skip compile/nvcc: nvcc not installed"
    fi
else
    say "skip compile/nccl: nccl.h not found"
fi
