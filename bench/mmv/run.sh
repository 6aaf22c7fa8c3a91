#!/bin/bash
# MMV read benchmark (issue 4): source/mmv fetching 1,000 metrics x 100
# instances (100k values, the W1 "anchbig" shape: u64 counters, doubles, u32,
# i64) from one File and through a Dir, and 100 x 10; plus loading (map and
# decode) the 100k-value file. Reports ns/op, ns/value, B/op and allocs/op
# (a fetch must not allocate per value).
# usage: bench/mmv/run.sh   (env: COUNT=5 GOMAXPROCS=1)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
GOMAXPROCS=${GOMAXPROCS:-1} go test -run '^$' -bench '^Benchmark(Fetch|Open)$' -benchmem -count "${COUNT:-5}" ./source/mmv |
  grep -E '^Benchmark'
