#!/usr/bin/env bash
# Processes tuning into one database at the same time: no entry may be lost, the file must be
# whole at every moment, and nothing may be left behind.
#   round 1: 8 processes tune 5 different shapes each (40 distinct keys);
#   round 2: 8 processes tune the same 5 shapes under new flags (5 keys written 8 times each);
#   round 3: one process tunes 20 new shapes one `convtune tune` at a time while another runs
#            `convtune db merge` into the same file in a loop (merge takes the writers' lock, so
#            no entry a tune stored may be lost);
#   meanwhile a reader runs `convtune db check` in a loop and must never see a broken file, and
#   must have checked it at least once (else it proved nothing and the test fails).
set -euo pipefail
cli="$1"
dir=$(mktemp -d)
reader_pid=""
merger_pid=""
cleanup() {
  [ -n "$reader_pid" ] && kill "$reader_pid" 2>/dev/null || true
  [ -n "$merger_pid" ] && kill "$merger_pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
db="$dir/tune.json"
fail() {
  echo "db_concurrency: $*" >&2
  exit 1
}

canonical() { echo "dir=fwd,dtype=f32,layout=nchw,n=1,c=$1,k=$2,g=1,in=$3x5,ker=1x1,stride=1x1,dil=1x1,pad=0x0,pad_end=0x0"; }

# The reader: every read of the file while writers replace it must see a valid database.
touch "$dir/reading"
(
  checks=0
  while [ -f "$dir/reading" ]; do
    if [ -f "$db" ]; then
      if ! "$cli" db check "$db" >/dev/null 2>"$dir/reader.err"; then
        cp "$db" "$dir/broken.json" 2>/dev/null || true
        echo "broken" >"$dir/reader.status"
        exit 1
      fi
      checks=$((checks + 1))
    fi
  done
  echo "$checks" >"$dir/reader.status"
) &
reader_pid=$!

run_round() {
  local round=$1 flags=$2
  local pids=()
  for p in 1 2 3 4 5 6 7 8; do
    local shapes="$dir/shapes_${round}_$p.txt"
    : >"$shapes"
    for s in 1 2 3 4 5; do
      if [ "$round" = 1 ]; then
        echo "n=1,c=$((p + 1)),k=$((s + 1)),in=$((4 + s))x5,ker=1x1" >>"$shapes"
      else
        echo "n=1,c=2,k=$((s + 1)),in=$((4 + s))x5,ker=1x1" >>"$shapes"
      fi
    done
    "$cli" tune --shapes "$shapes" --db "$db" --flags "$flags" --json >"$dir/out_${round}_$p.json" 2>"$dir/err_${round}_$p.txt" &
    pids+=($!)
  done
  local p=1
  for pid in "${pids[@]}"; do
    wait "$pid" || fail "round $round: process $p failed: $(cat "$dir/err_${round}_$p.txt")"
    if grep -q "not saved\|ignored\|warning" "$dir/err_${round}_$p.txt"; then
      fail "round $round: process $p warned: $(cat "$dir/err_${round}_$p.txt")"
    fi
    p=$((p + 1))
  done
}

run_round 1 benchmark=1,max_samples=1,min_samples=1
run_round 2 benchmark=1,deterministic=1,max_samples=1,min_samples=1

# Round 3: a tune loop against a merge loop. other.json holds 3 keys of its own.
other="$dir/other.json"
for s in 1 2 3; do
  "$cli" tune --problem "n=1,c=13,k=$((s + 1)),in=5x5,ker=1x1" --db "$other" --flags benchmark=1,max_samples=1,min_samples=1 \
    >/dev/null 2>"$dir/err_other.txt" || fail "tuning into other.json failed: $(cat "$dir/err_other.txt")"
done
touch "$dir/merging"
(
  merges=0
  while [ -f "$dir/merging" ]; do
    "$cli" db merge "$db" "$other" >/dev/null 2>"$dir/merge.err" || { echo "failed" >"$dir/merge.status"; exit 1; }
    merges=$((merges + 1))
  done
  echo "$merges" >"$dir/merge.status"
) &
merger_pid=$!
for i in $(seq 1 20); do
  "$cli" tune --problem "n=1,c=11,k=$i,in=7x5,ker=1x1" --db "$db" --flags benchmark=1,max_samples=1,min_samples=1 \
    >/dev/null 2>"$dir/err_3_$i.txt" || fail "round 3: tune $i failed: $(cat "$dir/err_3_$i.txt")"
  if grep -q "not saved\|ignored\|warning" "$dir/err_3_$i.txt"; then fail "round 3: tune $i warned: $(cat "$dir/err_3_$i.txt")"; fi
done
rm -f "$dir/merging"
wait "$merger_pid" || true
merges=$(cat "$dir/merge.status" 2>/dev/null || echo "none")
[ "$merges" != "failed" ] || fail "a merge failed: $(cat "$dir/merge.err")"
[[ "$merges" =~ ^[0-9]+$ ]] && [ "$merges" -gt 0 ] || fail "the merge loop ran no merge during the tune loop ($merges): the case proved nothing"

rm -f "$dir/reading"
wait "$reader_pid" || true
reader_pid=""
status=$(cat "$dir/reader.status" 2>/dev/null || echo "none")
[ "$status" != "broken" ] || fail "a concurrent reader saw a broken file: $(cat "$dir/reader.err")"
[[ "$status" =~ ^[0-9]+$ ]] && [ "$status" -gt 0 ] || fail "the concurrent reader made no check ($status): the test proved nothing"

"$cli" db check "$db" >/dev/null || fail "the final file is not valid"
show=$("$cli" db show "$db")
entries=$(grep -c '"algorithm"' "$db")
[ "$entries" -eq 68 ] || fail "expected 68 entries (40 + 5 + 20 tuned during merges + 3 merged in), found $entries"
# Every key of round 1 exactly once; every key of round 2 exactly once, under det=1.
for p in 1 2 3 4 5 6 7 8; do
  for s in 1 2 3 4 5; do
    key="cpu|$(canonical $((p + 1)) $((s + 1)) $((4 + s)))|det=0|"
    n=$(grep -cF "$key" <<<"$show" || true)
    [ "$n" -eq 1 ] || fail "key $key found $n times"
  done
done
for s in 1 2 3 4 5; do
  key="cpu|$(canonical 2 $((s + 1)) $((4 + s)))|det=1|"
  n=$(grep -cF "$key" <<<"$show" || true)
  [ "$n" -eq 1 ] || fail "key $key found $n times"
done
lost=0
for i in $(seq 1 20); do
  key="cpu|$(canonical 11 "$i" 7)|det=0|"
  n=$(grep -cF "$key" <<<"$show" || true)
  [ "$n" -eq 1 ] || lost=$((lost + 1))
done
[ "$lost" -eq 0 ] || fail "$lost of the 20 entries tuned during $merges merges are lost"
for s in 1 2 3; do
  key="cpu|$(canonical 13 $((s + 1)) 5)|det=0|"
  n=$(grep -cF "$key" <<<"$show" || true)
  [ "$n" -eq 1 ] || fail "merged key $key found $n times"
done
# Round 2 wrote the same keys 8 times: each process's choice is a valid algorithm of this build
# (db check warns about unknown ones), and the file holds one of them.
if "$cli" db check "$db" 2>&1 | grep -q "not in this build"; then fail "unknown algorithm in the file"; fi
leftovers=$(find "$dir" -name 'tune.json.tmp.*' -o -name 'tune.json.corrupt*' | wc -l)
[ "$leftovers" -eq 0 ] || fail "temporary or corrupt files left: $(ls "$dir")"
echo "16 concurrent writers (8 on distinct keys, 8 on the same keys), then 20 tunes against $merges merges: 68 entries, none lost; $status concurrent reads, all valid"
