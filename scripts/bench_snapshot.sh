#!/usr/bin/env bash
# Wall time and peak RSS of `memscope report --json FILE` against Python's
# pickle.load on the same file, medians of RUNS runs of each, in one command:
#
#   scripts/bench_snapshot.sh FILE [RUNS]
#
# Needs GNU time (/usr/bin/time) and python3. Builds memscope first.
set -euo pipefail
file=$1
runs=${2:-3}
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/memscope
CGO_CFLAGS="${CGO_CFLAGS:-} -Wno-deprecated-declarations" go build -o "$bin" .
measure() { # prints "seconds kilobytes" per run
	for _ in $(seq "$runs"); do
		/usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -1
	done
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
go_runs=$(measure "$bin" report --json "$file")
py_runs=$(measure python3 -c 'import pickle,sys; pickle.load(open(sys.argv[1],"rb"))' "$file")
gs=$(echo "$go_runs" | awk '{print $1}' | median); gm=$(echo "$go_runs" | awk '{print $2}' | median)
ps=$(echo "$py_runs" | awk '{print $1}' | median); pm=$(echo "$py_runs" | awk '{print $2}' | median)
size=$(stat -c %s "$file")
echo "file: $file ($((size >> 20)) MiB), medians of $runs runs"
echo "memscope report --json: ${gs} s, $((gm >> 10)) MiB peak RSS"
echo "python pickle.load:     ${ps} s, $((pm >> 10)) MiB peak RSS"
awk -v gs="$gs" -v ps="$ps" -v gm="$gm" -v pm="$pm" 'BEGIN {printf "speed-up %.1fx, RSS %.2fx of Python\n", ps/gs, gm/pm}'
