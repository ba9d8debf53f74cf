#!/usr/bin/env bash
# Wall time and peak RSS of `memscope report --json FILE` against Python's
# pickle.load on the same file (through gzip.open for a .gz), medians of RUNS
# runs of each, in one command:
#
#   scripts/bench_snapshot.sh FILE [RUNS]
#
# Needs GNU time (/usr/bin/time) and python3. Builds memscope first.
set -euo pipefail
file=$1
runs=${2:-3}
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/memscope
CGO_CFLAGS="${CGO_CFLAGS:-} -Wno-deprecated-declarations" go build -o "$bin.new" .
# A binary just written by the linker maps about 8 MiB more of its own
# pages (RssFile) than a copy of it, here as on an installed one: measure
# a copy, so that builds compare by what they do.
cp "$bin.new" "$bin" && rm "$bin.new"
# A gzip file is read as a user would read it in Python: through gzip.open,
# which inflates as pickle.load reads (memscope too inflates as it decodes).
load='import pickle,sys; pickle.load(open(sys.argv[1],"rb"))' via=""
if [ "$(head -c 2 "$file" | od -An -tx1 | tr -d ' ')" = 1f8b ]; then
	load='import gzip,pickle,sys; pickle.load(gzip.open(sys.argv[1]))' via=" (gzip.open)"
fi
one() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -1; } # "seconds kilobytes"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# The runs alternate (memscope, Python, memscope, ...) so that a machine
# that slows down for a while slows both; the ratio is also given as the
# median of each pair's ratio.
go_runs="" py_runs="" ratios=""
for _ in $(seq "$runs"); do
	g=$(one "$bin" report --json "$file")
	p=$(one python3 -c "$load" "$file")
	go_runs+="$g"$'\n' py_runs+="$p"$'\n'
	ratios+=$(awk -v g="${g%% *}" -v p="${p%% *}" 'BEGIN {printf "%.2f", p/g}')$'\n'
done
gs=$(echo -n "$go_runs" | awk '{print $1}' | median); gm=$(echo -n "$go_runs" | awk '{print $2}' | median)
ps=$(echo -n "$py_runs" | awk '{print $1}' | median); pm=$(echo -n "$py_runs" | awk '{print $2}' | median)
pr=$(echo -n "$ratios" | median)
size=$(stat -c %s "$file")
echo "file: $file ($((size >> 20)) MiB), medians of $runs runs"
echo "memscope report --json: ${gs} s, $((gm >> 10)) MiB peak RSS"
echo "python pickle.load:     ${ps} s, $((pm >> 10)) MiB peak RSS${via}"
awk -v gs="$gs" -v ps="$ps" -v gm="$gm" -v pm="$pm" -v pr="$pr" 'BEGIN {printf "speed-up %.1fx (median of the pairs: %.1fx), RSS %.2fx of Python\n", ps/gs, pr, gm/pm}'
