#!/usr/bin/env bash
# Whether two memscope builds write the same reports, text and --json, byte
# for byte: a change meant to be faster must not change a number. Every file
# runs with GOMAXPROCS 2 and 4 (and 8 over 50 MB), which move the decoder's
# helpers and so its joins:
#
#   scripts/same_reports.sh OLD NEW [FILE...]
#
# Without files: the bundled snapshots and those of ../shared/samples. Prints
# each file and setting whose output differs, then the counts; the exit
# status is 1 when any differs.
set -uo pipefail
old=$1 new=$2
shift 2
cd "$(dirname "$0")/.."
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
	mapfile -t files < <(find testdata/snapshots ../shared/samples -name '*.pickle*' -size -60M 2>/dev/null | sort)
fi
runs=0 diffs=0
for f in "${files[@]}"; do
	procs="2 4"
	[ "$(stat -c %s "$f")" -gt 50000000 ] && procs="2 4 8"
	for p in $procs; do
		for mode in "" --json; do
			a=$(GOMAXPROCS=$p "$old" report $mode "$f" 2>&1 | md5sum)
			b=$(GOMAXPROCS=$p "$new" report $mode "$f" 2>&1 | md5sum)
			runs=$((runs + 1))
			if [ "$a" != "$b" ]; then
				echo "differs: $f GOMAXPROCS=$p ${mode:-text}"
				diffs=$((diffs + 1))
			fi
		done
	done
done
echo "$runs runs, $diffs differ"
[ "$diffs" -eq 0 ]
