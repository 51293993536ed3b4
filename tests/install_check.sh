#!/usr/bin/env bash
# `make install` into a temporary prefix, then consumers built from the installed
# tree only: through pkg-config (vescale, vescale-mpi, vescale-nccl) and through
# CMake (find_package(vescale) and its MPI and NCCL components). Each consumer
# defines VESCALE_IMPLEMENTATION and runs a 2-rank vs_launch all-reduce, checking
# the sum (the NCCL ones are only compiled and linked: no GPU needed). Prints one
# "ok / not ok / skip install/..." line per check.
set -u
cd "$(dirname "$0")/.."
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
P=$T/prefix
CUDA=${CUDA:-/usr/local/cuda}
MAKE=${MAKE:-make}
# run from `make test`: the outer make's command-line variables (B=, SAN=, ...)
# and a DESTDIR in the environment must not reach the install under test
unset MAKEFLAGS MFLAGS MAKELEVEL DESTDIR

check() { # name, command...
    local name=$1; shift
    if "$@" >"$T/out" 2>&1; then echo "ok install/$name"; else echo "not ok install/$name"; sed 's/^/    /' "$T/out" | tail -25; fi
}

check "make-install" $MAKE -s install PREFIX="$P"
for f in include/vescale.h include/vescale_mesh.h include/vescale_ddp.h include/vescale_pipe.h \
         include/vescale_ckpt.h lib/pkgconfig/vescale.pc lib/pkgconfig/vescale-mpi.pc \
         lib/pkgconfig/vescale-nccl.pc lib/cmake/vescale/vescale-config.cmake \
         lib/cmake/vescale/vescale-config-version.cmake bin/vescale-ckpt bin/vescale-lighthouse; do
    [ -f "$P/$f" ] || { echo "not ok install/files: $f missing"; exit 0; }
done
check "vescale-ckpt-runs" bash -c "'$P/bin/vescale-ckpt' 2>&1 | grep -q 'usage: vescale-ckpt ls'"
check "vescale-lighthouse-runs" bash -c "'$P/bin/vescale-lighthouse' --help 2>&1 | grep -q 'usage: vescale-lighthouse'"

# The consumer: the implementation in this file, the header from the prefix only
# (angle brackets, no -I. anywhere below).
mkdir -p "$T/src"
cat >"$T/src/consumer.c" <<'C'
#define VESCALE_IMPLEMENTATION
#include <vescale.h>
#include <stdio.h>

static int rank_main(vs_world* w, void* arg)
{
    (void)arg;
    float v = (float)(vs_world_rank(w) + 1), sum = 0;
    if (vs_all_reduce(vs_world_comm(w), &v, &sum, 1, VS_F32, VS_OP_SUM, NULL) != VS_OK) return 1;
    return sum == 3.0f ? 0 : 2; /* 1 + 2 */
}
int main(void)
{
    if (vs_launch(2, rank_main, NULL) != VS_OK) {
        fprintf(stderr, "vs_launch: %s\n", vs_last_error());
        return 1;
    }
    printf("consumer: sum ok, vescale %s (%s)\n", vs_version_string(),
           vs_transport_available(VS_TRANSPORT_MPI) ? "mpi" : vs_transport_available(VS_TRANSPORT_NCCL) ? "nccl" : "threads");
    return 0;
}
C
export PKG_CONFIG_PATH="$P/lib/pkgconfig"

# --- pkg-config -------------------------------------------------------------------
if command -v pkg-config >/dev/null 2>&1; then
    check "pkg-config" bash -c "cc -std=c99 -Wall -Wextra -Werror $T/src/consumer.c -o $T/pc \$(pkg-config --cflags --libs vescale) && $T/pc | grep -q '(threads)'"
    if command -v mpicc >/dev/null 2>&1; then
        # plain cc, every MPI flag from vescale-mpi.pc
        check "pkg-config-mpi" bash -c "cc -std=c99 -Wall -Wextra -Werror $T/src/consumer.c -o $T/pcm \$(pkg-config --cflags --libs vescale-mpi) && $T/pcm | grep -q '(mpi)'"
    else
        echo "skip install/pkg-config-mpi: mpicc not installed"
    fi
    if [ -f "$CUDA/include/nccl.h" ]; then
        check "pkg-config-nccl-link" bash -c "cc -std=c99 -Wall -Wextra -Werror $T/src/consumer.c -o $T/pcn \$(pkg-config --cflags --libs vescale-nccl)"
    else
        echo "skip install/pkg-config-nccl-link: $CUDA/include/nccl.h not found"
    fi
else
    echo "skip install/pkg-config: pkg-config not installed"
fi

# --- CMake ------------------------------------------------------------------------
# cmake_project DIR LANG FIND TARGET: a CMakeLists.txt for the consumer
cmake_project() {
    mkdir -p "$1"
    cat >"$1/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.10)
project(consumer $2)
find_package($3)
add_executable(consumer "$T/src/consumer.c")
set_target_properties(consumer PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(consumer PRIVATE -Wall -Wextra -Werror)
target_link_libraries(consumer PRIVATE $4)
EOF
}
# (CMake's default configuration, no optimisation: what a consumer's build proves is
# the package's flags and libraries; the library at -O3 -DNDEBUG, Release's flags, is
# tests/compile_check.sh's vescale.h/impl/c99-O3; Release here compiled it twice more)
cmake_build() { # DIR [WANT]: configure, build, run; the run's line must name WANT
    cmake -S "$1" -B "$1/b" -DCMAKE_PREFIX_PATH="$P" &&
        cmake --build "$1/b" && "$1/b/consumer" >"$1/run.log" && cat "$1/run.log" &&
        grep -q "(${2:-threads})" "$1/run.log"
}
cmake_refused() { # DIR MESSAGE: configuring fails, saying MESSAGE
    ! cmake -S "$1" -B "$1/b" -DCMAKE_PREFIX_PATH="$P" >"$1/conf.log" 2>&1 && cat "$1/conf.log" &&
        grep -q "$2" "$1/conf.log"
}
if command -v cmake >/dev/null 2>&1; then
    cmake_project "$T/cm" C "vescale 0.1 REQUIRED" vescale::vescale
    check "cmake" cmake_build "$T/cm"
    # the version file: a newer major (or, in 0.x, minor) release is refused
    cmake_project "$T/cmv" C "vescale 99.0 REQUIRED" vescale::vescale
    check "cmake-version-refused" cmake_refused "$T/cmv" "compatible with requested version"
    # an unknown component is refused with the list of known ones
    cmake_project "$T/cmu" C "vescale REQUIRED COMPONENTS GLOO" vescale::vescale
    check "cmake-unknown-component-refused" cmake_refused "$T/cmu" "unknown component"
    if command -v mpicc >/dev/null 2>&1; then
        cmake_project "$T/cmm" C "vescale REQUIRED COMPONENTS MPI" vescale::mpi
        check "cmake-mpi" cmake_build "$T/cmm" mpi
    else
        echo "skip install/cmake-mpi: mpicc not installed"
    fi
    if [ -f "$CUDA/include/nccl.h" ]; then
        cmake_project "$T/cmn" C "vescale REQUIRED COMPONENTS NCCL" vescale::nccl
        check "cmake-nccl-link" bash -c "cmake -S $T/cmn -B $T/cmn/b -DCMAKE_PREFIX_PATH=$P -DCUDAToolkit_ROOT=$CUDA && cmake --build $T/cmn/b"
    else
        echo "skip install/cmake-nccl-link: $CUDA/include/nccl.h not found"
    fi
else
    echo "skip install/cmake: cmake not installed"
fi

# --- uninstall leaves nothing of ours ---------------------------------------------
check "uninstall" bash -c "$MAKE -s uninstall PREFIX=$P && [ -z \"\$(find $P -type f)\" ]"
