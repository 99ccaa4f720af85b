#!/usr/bin/env bash
# 8 processes tune different shapes into one database at the same time: no entry may be lost
# and the file must stay valid.
set -euo pipefail
cli="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
db="$dir/tune.json"
pids=()
for p in 1 2 3 4 5 6 7 8; do
  shapes="$dir/shapes_$p.txt"
  : > "$shapes"
  for s in 1 2 3 4 5; do
    echo "n=1,c=$((p + 1)),k=$((s + 1)),in=$((4 + s))x5,ker=1x1" >> "$shapes"
  done
  "$cli" tune --shapes "$shapes" --db "$db" --flags benchmark=1,max_samples=1,min_samples=1 --json > "$dir/out_$p.json" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
"$cli" db check "$db"
entries=$(grep -c '"algorithm"' "$db")
if [ "$entries" -ne 40 ]; then
  echo "expected 40 entries, found $entries" >&2
  exit 1
fi
echo "8 concurrent writers: 40 entries, file valid"
