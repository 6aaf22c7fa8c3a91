#!/bin/bash
# pmcd benchmark (issue 23): one scrape of every non-MMV metric the local pmcd
# serves, from pmproxy's /metrics and from `pcp-exporter serve --pmcd`, taken
# in turns in one run (pmproxy, ours over TCP, ours over the unix socket):
# median latency, bytes and samples per scrape, and the CPU each scrape costs
# pmcd itself (from /proc/<pmcd pid>/stat, summed over the run: the clock
# tick is 10 ms), pmproxy or the exporter.
# Ours over TCP reaches pmcd with the credentials pmproxy has (per-process
# metrics are refused alike: the same series, see TestServePMCDMatchesPmproxy);
# over the unix socket as root it also gets every process's values.
# The PMDAs' own time (pmdalinux, pmdaproc run as separate processes) is in
# every latency and in neither CPU column.
# Each scrape starts PAUSE seconds after the one before (default 0.3), so
# that pmcd (single-threaded) and its PMDAs are not still busy with the
# previous client's requests.
# usage: bench/pmcd/run.sh   (env: RUNS, PAUSE; needs pcp with pmcd and pmproxy running)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
RUNS=${RUNS:-21}
PAUSE=${PAUSE:-0.3}
work=$(mktemp -d)
cleanup() {
	[[ -n ${e1:-} ]] && kill "$e1" 2>/dev/null
	[[ -n ${e2:-} ]] && kill "$e2" 2>/dev/null
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
(cd "$root" && CGO_ENABLED=0 go build -o "$work/pcp-exporter" ./cmd/pcp-exporter)
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# every top-level subtree pmcd serves but mmv (event.* are libpcp's own)
subtrees=$(PCP_DERIVED_CONFIG= pminfo | cut -d. -f1 | sort -u | grep -vx 'mmv\|event' | paste -sd,)
p1=$(freeport) p2=$(freeport)
"$work/pcp-exporter" serve --pmcd=127.0.0.1 --pmcd.metrics=-mmv --naming=pmproxy --web.listen-address=127.0.0.1:"$p1" --log.level=warn > "$work/e1.log" 2>&1 &
e1=$!
"$work/pcp-exporter" serve --pmcd=local: --pmcd.metrics=-mmv --naming=pmproxy --web.listen-address=127.0.0.1:"$p2" --log.level=warn > "$work/e2.log" 2>&1 &
e2=$!
sleep 3
pmcd=$(cat /run/pcp/pmcd.pid 2>/dev/null || pgrep -x pmcd | head -1)
pmproxy=$(pgrep -x pmproxy | head -1)
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
labels=(pmproxy ours_tcp ours_unix)
urls=("http://127.0.0.1:44322/metrics?names=$subtrees" "http://127.0.0.1:$p1/metrics" "http://127.0.0.1:$p2/metrics")
servers=("$pmproxy" "$e1" "$e2")
declare -A pmcdT serverT
for i in 0 1 2; do
	curl -s -o /dev/null "${urls[$i]}" # warm: metadata read
	pmcdT[$i]=0 serverT[$i]=0
	: > "$work/${labels[$i]}.rows"
done
for _ in $(seq 1 "$RUNS"); do
	for i in 0 1 2; do
		sleep "$PAUSE"
		a=$(ticks "$pmcd") s=$(ticks "${servers[$i]}")
		w=$(curl -s -o "$work/${labels[$i]}.txt" -w '%{time_total} %{size_download}' "${urls[$i]}")
		b=$(ticks "$pmcd") t=$(ticks "${servers[$i]}")
		pmcdT[$i]=$((pmcdT[$i] + b - a)) serverT[$i]=$((serverT[$i] + t - s))
		echo "$w $(grep -vc '^#' "$work/${labels[$i]}.txt")" >> "$work/${labels[$i]}.rows"
	done
done
med() { awk -v c="$2" '{print $c}' "$1" | sort -g | awk '{a[NR]=$1} END {print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
printf '%-28s %10s %10s %9s %14s %14s\n' "scrape (non-MMV metrics)" "latency s" "bytes" "samples" "pmcd CPU ms" "server CPU ms"
for i in 0 1 2; do
	r=$work/${labels[$i]}.rows
	printf '%-28s %10.4f %10d %9d %14.2f %14.2f\n' "${labels[$i]}" "$(med "$r" 1)" "$(med "$r" 2)" "$(med "$r" 3)" \
		"$(awk -v t="${pmcdT[$i]}" -v n="$RUNS" -v hz="$hz" 'BEGIN{print 1000*t/hz/n}')" \
		"$(awk -v t="${serverT[$i]}" -v n="$RUNS" -v hz="$hz" 'BEGIN{print 1000*t/hz/n}')"
	eval "wall_$i=$(med "$r" 1)"
done
# shellcheck disable=SC2154
echo "latency ratio pmproxy/ours: $(awk -v a="$wall_0" -v b="$wall_1" 'BEGIN{printf "%.0fx", a/b}') (TCP, same series), $(awk -v a="$wall_0" -v b="$wall_2" 'BEGIN{printf "%.0fx", a/b}') (unix socket, every process too)"
echo "pmcd CPU per scrape, ours/pmproxy: $(awk -v a="${pmcdT[1]}" -v b="${pmcdT[0]}" 'BEGIN{ if (b > 0) printf "%.3f", a/b; else print "-" }') (TCP), $(awk -v a="${pmcdT[2]}" -v b="${pmcdT[0]}" 'BEGIN{ if (b > 0) printf "%.3f", a/b; else print "-" }') (unix socket)"
echo "goals: median <= 20 ms, >= 50x faster than pmproxy, pmcd CPU <= 1/10 of pmproxy's (RUNS=$RUNS, PAUSE=$PAUSE, load average $(cut -d' ' -f1-3 /proc/loadavg))"
