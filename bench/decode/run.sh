#!/bin/bash
# Decode benchmark (issue 2): workload W2 (pmlogger of 1,135 linux metrics at
# 100 ms for 5 minutes, about 186 MB, v2 and v3; recorded with record-w2.sh
# when absent, needs Debian pcp and a running pmcd) decoded by
#   - libpcp's pmFetchArchive loop (fetcharchive.c, the C peer), count only and
#     with pmExtractValue to double,
#   - source/archive (godecode), touching every value and converting to float64,
#   - `pcp-exporter dump > /dev/null` and `pmdumplog -a > /dev/null`,
# side by side in one run: median wall time of RUNS runs (page cache warm),
# MB/s of volume data and values/s. Then the Go benchmark (go test -bench,
# -benchmem) over the same archive. W2 is never committed.
# usage: bench/decode/run.sh   (env: W2_DIR=/tmp/pcpx-bench/w2 RUNS=5 GOMAXPROCS)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${W2_DIR:-/tmp/pcpx-bench/w2}
runs=${RUNS:-5}
for c in pmdumplog pmlogger gcc go; do
  command -v $c >/dev/null || { echo "run.sh: $c not found (install pcp libpcp3-dev gcc; see scripts/install-test-deps.sh)" >&2; exit 1; }
done
if [ ! -s "$dir/w2v2.0" ] || [ ! -s "$dir/w2v3.0" ]; then
  echo "recording W2 into $dir (5 minutes) ..." >&2
  "$here/record-w2.sh" "$dir" 5min
fi
bin=$(mktemp -d); trap 'rm -rf "$bin"' EXIT
gcc -O2 -o "$bin/fetcharchive" "$here/fetcharchive.c" -lpcp
(cd "$root" && go build -o "$bin/pcp-exporter" ./cmd/pcp-exporter && go build -o "$bin/godecode" ./bench/decode/godecode)

# median wall seconds of $runs runs of a command (after one warm-up run)
median() {
  local t=() s e
  bash -c "$1" >/dev/null
  for _ in $(seq "$runs"); do
    s=$(date +%s%N); bash -c "$1" >/dev/null; e=$(date +%s%N)
    t+=("$(( (e - s) / 1000 ))")
  done
  printf '%s\n' "${t[@]}" | sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.4f", m/1e6}'
}

printf '%-6s %-44s %9s %10s %12s\n' archive decoder "wall s" "MB/s" "Mvalues/s"
for w in w2v2 w2v3; do
  a="$dir/$w"
  bytes=$(cat "$a".[0-9]* | wc -c)
  cvals=$("$bin/fetcharchive" "$a" 0 | awk '{print $4}')
  gvals=$("$bin/godecode" "$a" 0 | awk '{print $4}')
  [ "$cvals" = "$gvals" ] || echo "WARNING: $w: libpcp counts $cvals values, godecode $gvals" >&2
  declare -A wall=()
  for t in "libpcp pmFetchArchive (count)|exec $bin/fetcharchive $a 0" \
           "libpcp pmFetchArchive + pmExtractValue|exec $bin/fetcharchive $a 1" \
           "Go source/archive (touch every value)|exec $bin/godecode $a 0" \
           "Go source/archive + Float64()|exec $bin/godecode $a 1" \
           "pcp-exporter dump > /dev/null|exec $bin/pcp-exporter dump $a" \
           "pmdumplog -a > /dev/null|exec pmdumplog -a $a"; do
    name=${t%%|*}; cmd=${t#*|}
    s=$(median "$cmd")
    wall[$name]=$s
    awk -v w="$w" -v n="$name" -v s="$s" -v b="$bytes" -v v="$cvals" \
      'BEGIN {printf "%-6s %-44s %9.3f %10.1f %12.2f\n", w, n, s, b/s/1e6, v/s/1e6}'
  done
  awk -v w="$w" -v g="${wall[Go source/archive (touch every value)]}" -v c="${wall[libpcp pmFetchArchive (count)]}" \
      -v d="${wall[pcp-exporter dump > /dev/null]}" -v p="${wall[pmdumplog -a > /dev/null]}" -v b="$bytes" -v v="$cvals" \
    'BEGIN {printf "%-6s %d bytes of volumes, %d values; Go decode / libpcp loop: %.2fx faster; dump vs pmdumplog -a: %.1fx faster\n", w, b, v, c/g, p/d}'
  unset wall
done
echo
echo "go test -bench Decode -benchmem (PCPX_BENCH_ARCHIVE=$dir/w2v2):"
(cd "$root" && PCPX_BENCH_ARCHIVE="$dir/w2v2" go test -run '^$' -bench '^BenchmarkDecode$' -benchmem -count 3 ./source/archive/pcplog | grep -E '^Benchmark')
