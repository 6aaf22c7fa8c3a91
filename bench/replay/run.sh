#!/bin/bash
# Replay benchmark (issue 3): workload W2 (bench/lib.sh) replayed at a 1 s
# step by `pcp-exporter replay` and by PCP's pmrep (-r: raw counters, the
# same values) over the same 59 metrics (metrics.txt, performance anchor M4),
# and for one 235-instance metric by pmval -r, in one run, the peer and ours
# taking turns run after run (bench/measure: no shell or time(1) around
# either): median wall time, CPU, peak RSS, values produced and values/s,
# with the ratios. Then peak RSS
# of a replay of every metric of W2 at 100 ms (memory stays flat).
# usage: bench/replay/run.sh   (env: W2_DIR, RUNS)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
need_w2
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
MEASURE=$bin/measure
(cd "$root" && CGO_ENABLED=0 go build -o "$bin/pcp-exporter" ./cmd/pcp-exporter)
a=$W2_DIR/w2v2
mapfile -t M < "$here/metrics.txt"
count_ours() { "$bin/pcp-exporter" replay "$a" --interval 1s --interp prior "$@" | tail -n +2 | wc -l; }
count_pmrep() { /usr/bin/python3 /usr/bin/pmrep -r -a "$a" -t 1s -o csv "$@" | awk -F, 'NR>1{for(i=2;i<=NF;i++) if($i!="") v++} END{print v+0}'; }
count_pmval() { pmval -a "$a" -t 1s -r "$1" | awk '/^[0-9][0-9]:/{for(i=2;i<=NF;i++) if ($i ~ /^-?[0-9.e+]+$/) v++} END{print v+0}'; }

printf '%-44s %8s %8s %9s %10s %12s\n' "replay of W2 (v2), 1 s step" "wall s" "CPU s" "RSS MiB" "values" "values/s"
row() { printf '%-44s %8.3f %8.3f %9.1f %10d %12.0f\n' "$1" "$MED_WALL" "$MED_CPU" "$(awk -v k="$MED_RSS" 'BEGIN{print k/1024}')" "$2" "$(awk -v n="$2" -v w="$MED_WALL" 'BEGIN{print (w>0)?n/w:0}')"; }

# side(i): the medians of command i of the last measure_side as MED_*
side() { MED_WALL=${WALL[$1]} MED_CPU=${CPU[$1]} MED_RSS=${RSS[$1]}; }

# the peer and ours in turns, run after run (bench/measure), with the cost
# no replay avoids on this machine: starting the process. (Reading the
# whole volume once, the floor of a replay that reads every record, is no
# floor since sparse reading: at a 1 s step over 100 ms records most
# records are passed over unread.)
measure_side "$RUNS" "/usr/bin/python3 /usr/bin/pmrep -r -a $a -t 1s -o csv ${M[*]}" "$bin/pcp-exporter replay $a --interval 1s --interp prior ${M[*]}" \
	"$bin/pcp-exporter --version"
side 0; n=$(count_pmrep "${M[@]}"); row "pmrep -r -o csv (59 metrics)" "$n"; p_rate=$(awk -v n="$n" -v w="$MED_WALL" 'BEGIN{print n/w}'); p_wall=$MED_WALL
side 1; n=$(count_ours "${M[@]}"); row "pcp-exporter replay (59 metrics)" "$n"; o_rate=$(awk -v n="$n" -v w="$MED_WALL" 'BEGIN{print n/w}')
echo "ratio replay/pmrep values/s: $(ratio "$o_rate" "$p_rate")  (goal >= 20x)"
printf '  %-42s %8.3f  (pmrep / 20: %.3f)\n' "process start: pcp-exporter --version" "${WALL[2]}" "$(awk -v w="$p_wall" 'BEGIN{print w/20}')"

m=mem.slabinfo.objects.active
measure_side "$RUNS" "pmval -a $a -t 1s -r $m" "$bin/pcp-exporter replay $a --interval 1s --interp prior $m"
side 0; n=$(count_pmval $m); row "pmval -r $m" "$n"; p_rate=$(awk -v n="$n" -v w="$MED_WALL" 'BEGIN{print n/w}')
side 1; n=$(count_ours $m); row "pcp-exporter replay $m" "$n"; o_rate=$(awk -v n="$n" -v w="$MED_WALL" 'BEGIN{print n/w}')
echo "ratio replay/pmval values/s: $(ratio "$o_rate" "$p_rate")"

measure all 1 "exec $bin/pcp-exporter replay $a --interval 100ms"
n=$("$bin/pcp-exporter" replay "$a" --interval 100ms | tail -n +2 | wc -l)
row "pcp-exporter replay, every metric, 100 ms" "$n"

# A long archive: W2 six times end to end (pmlogrewrite shifts each copy by
# 5m10s, pmlogextract joins them into volumes of 5,000 records): over 1 GB
# of volumes, generated under $W2_DIR, never committed. Replayed in full
# (every metric, 1 s step and 100 ms step): peak RSS must stay flat (goal
# under 64 MiB) as the archive grows six-fold.
need_long
long=$LONG
vols=$(find "$W2_DIR/long" -name 'w2x6.[0-9]*' | wc -l)
bytes=$(find "$W2_DIR/long" -name 'w2x6.[0-9]*' -printf '%s\n' | awk '{s+=$1} END {print s}')
echo
printf 'long archive: %d volumes, %.2f GB of volumes (W2: %.2f GB)\n' "$vols" "$(awk -v b="$bytes" 'BEGIN{print b/1e9}')" "$(awk -v b="$(stat -c %s "$a.0")" 'BEGIN{print b/1e9}')"
printf '%-44s %8s %8s %9s %10s %12s\n' "replay of the long archive" "wall s" "CPU s" "RSS MiB" "values" "values/s"
measure long1s 1 "exec $bin/pcp-exporter replay $long --interval 1s"
n=$("$bin/pcp-exporter" replay "$long" --interval 1s | tail -n +2 | wc -l)
row "pcp-exporter replay, every metric, 1 s" "$n"
measure long100 1 "exec $bin/pcp-exporter replay $long --interval 100ms"
n=$("$bin/pcp-exporter" replay "$long" --interval 100ms | tail -n +2 | wc -l)
row "pcp-exporter replay, every metric, 100 ms" "$n"
echo "peak RSS goal: < 64 MiB on over 1 GB of volumes"

# A late start: the last 10 s of the long archive (59 metrics). The first
# fetch positions with the temporal index (the last entry before the start)
# instead of reading the 1 GB before it; pmrep -S does the same through
# libpcp.
echo
printf '%-44s %8s %8s %9s %10s %12s\n' "the long archive's last 10 s (59 metrics)" "wall s" "CPU s" "RSS MiB" "values" "values/s"
late=$(( $(pmdumplog -L "$long" | awk '/commencing|ending/ {cmd="date -u -d \"" $3" "$4" "$5" "$6"\" +%s"; cmd | getline s; close(cmd); print s}' | tr '\n' ' ' | awk '{print $2 - $1}') - 10 ))
measure_side "$RUNS" "/usr/bin/python3 /usr/bin/pmrep -r -a $long -S +$late -s 10 -t 1s -o csv ${M[*]}" "$bin/pcp-exporter replay $long --start +${late}s --samples 10 --interp prior ${M[*]}"
side 0; n=$(/usr/bin/python3 /usr/bin/pmrep -r -a "$long" -S +$late -s 10 -t 1s -o csv "${M[@]}" | awk -F, 'NR>1{for(i=2;i<=NF;i++) if($i!="") v++} END{print v+0}')
row "pmrep -r -S +${late} -s 10" "$n"; p_wall=$MED_WALL
side 1; n=$("$bin/pcp-exporter" replay "$long" --start "+${late}s" --samples 10 --interp prior "${M[@]}" | tail -n +2 | wc -l)
row "pcp-exporter replay --start +${late}s --samples 10" "$n"
echo "ratio pmrep/replay wall time: $(ratio "$p_wall" "$MED_WALL")"
