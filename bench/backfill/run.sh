#!/bin/bash
# Backfill benchmark (issue 8): workload W2 (bench/lib.sh) at a 1 s step into
# Prometheus TSDB blocks, by `pcp-exporter backfill --step 1s --output
# tsdb:DIR` and by what PCP 6.0.3 and Prometheus 2.42 offer (performance
# anchor M5: pmrep -r -o csv, csv2om.py to OpenMetrics, promtool tsdb
# create-blocks-from openmetrics), in one run: median wall time, CPU, peak
# RSS, samples in the blocks (promtool tsdb list) and samples/s, with the
# ratio. Also the raw backfill (every recorded value, 100 ms).
# usage: bench/backfill/run.sh   (env: W2_DIR, RUNS)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
need_w2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && CGO_ENABLED=0 go build -o "$work/pcp-exporter" ./cmd/pcp-exporter)
a=$W2_DIR/w2v2
samples() { promtool tsdb list "$1" | awk 'NR>1 {s+=$5} END {print s+0}'; }

printf '%-46s %8s %8s %9s %10s %12s\n' "backfill of W2 (v2) into TSDB blocks" "wall s" "CPU s" "RSS MiB" "samples" "samples/s"
row() { printf '%-46s %8.3f %8.3f %9.1f %10d %12.0f\n' "$1" "$MED_WALL" "$MED_CPU" "$(awk -v k="$MED_RSS" 'BEGIN{print k/1024}')" "$2" "$(awk -v n="$2" -v w="$MED_WALL" 'BEGIN{print (w>0)?n/w:0}')"; }

peer="/usr/bin/python3 /usr/bin/pmrep -I -r -a $a -t 1s -o csv kernel mem disk network filesys swap hinv > $work/w2.csv && /usr/bin/python3 $here/csv2om.py $work/w2.csv $work/w2.om 2>/dev/null && rm -rf $work/pblocks && promtool tsdb create-blocks-from openmetrics $work/w2.om $work/pblocks"
measure peer "$RUNS" "$peer"
n=$(samples "$work/pblocks"); row "pmrep -> csv2om.py -> promtool (1 s)" "$n"
p_rate=$(awk -v n="$n" -v w="$MED_WALL" 'BEGIN{print n/w}')

measure ours "$RUNS" "rm -rf $work/oblocks && exec $work/pcp-exporter backfill $a --step 1s --quiet --output tsdb:$work/oblocks"
n=$(samples "$work/oblocks"); row "pcp-exporter backfill --step 1s" "$n"
o_rate=$(awk -v n="$n" -v w="$MED_WALL" 'BEGIN{print n/w}')
echo "ratio backfill/peer samples/s: $(ratio "$o_rate" "$p_rate")  (goal >= 20x; peak RSS goal < 256 MiB)"

measure raw 1 "rm -rf $work/rblocks && exec $work/pcp-exporter backfill $a --raw --quiet --output tsdb:$work/rblocks"
n=$(samples "$work/rblocks"); row "pcp-exporter backfill --raw (100 ms)" "$n"
