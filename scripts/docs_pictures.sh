#!/bin/sh
# Regenerates the README's pictures (docs/*.png) from bundled data:
#   sh scripts/docs_pictures.sh
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/memscope" .
"$tmp/memscope" compare --plot "$tmp/cmp" testdata/traces/generated/memory_traces testdata/traces/generated/memory_traces_scaling >/dev/null 2>&1
"$tmp/memscope" report --plot "$tmp/snap" testdata/snapshots/h200/big.pickle.gz >/dev/null 2>&1
cp "$tmp/cmp/memory_comparison_rank_1.png" docs/compare_rank1.png
cp "$tmp/cmp/memory_comparison_overview.png" docs/compare_overview.png
cp "$tmp/snap/memory_timeline.png" docs/snapshot_timeline.png
cp "$tmp/snap/category_breakdown.png" docs/snapshot_categories.png
cp "$tmp/snap/top_consumers.png" docs/snapshot_top.png
echo "docs/: pictures regenerated"
