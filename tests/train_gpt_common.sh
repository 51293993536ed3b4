# Sourced by the tests/train_gpt_*.sh scripts: `. tests/train_gpt_common.sh NAME`.
# Sets B (the build folder, default build), bin (train_gpt), tmp (a temporary
# folder removed at exit) and fails, and defines say OK? WHAT, which prints
# "ok example/NAME WHAT" (OK? = 1) or "not ok example/NAME WHAT" and counts it.
B=${B:-build}
bin=$B/train_gpt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
_say_name=$1
say() { # ok?, what
    if [ "$1" = 1 ]; then echo "ok example/$_say_name $2"; else echo "not ok example/$_say_name $2"; fails=$((fails + 1)); fi
}
