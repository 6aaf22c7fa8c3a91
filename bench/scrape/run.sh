#!/bin/bash
# Scrape benchmark (issues 5 and 28): workload W1 (performance anchors): a C
# writer linked with libpcp_mmv (mmvwriter.c) updates 1,000 metrics x 100
# instances (100,000 values) every 100 ms in pmcd's MMV directory. The same
# file is scraped from pmproxy's /metrics (pmcd + pmdammv + pmproxy) and
# from `pcp-exporter serve`'s /metrics (default and pmproxy naming) in every
# variant a user meets: curl's text, Prometheus's Accept header
# (OpenMetrics), each with and without gzip. The variants take turns run
# after run (a machine whose speed drifts affects them all alike); medians
# of latency, bytes sent, samples and server CPU per scrape (pmcd+pmproxy,
# or the exporter, from /proc/PID/stat), the ratios to pmproxy asked the
# same way (pmproxy sends text, uncompressed, whatever is asked), and the
# exporters' peak RSS. Then LOAD_CONCURRENCY scrapers (bench/scrape/load)
# scrape a fresh exporter as Prometheus does for LOAD_SECONDS: scrapes,
# failures, latency median and p99, peak RSS.
# usage: bench/scrape/run.sh   (env: RUNS, LOAD_SECONDS (0: no load phase),
#        LOAD_CONCURRENCY; needs pcp, libpcp-mmv1-dev, gcc, python3, root)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
RUNS=${RUNS:-7}
LOAD_SECONDS=${LOAD_SECONDS:-60}
LOAD_CONCURRENCY=${LOAD_CONCURRENCY:-64}
mmvdir=/var/lib/pcp/tmp/mmv
work=$(mktemp -d)
name=pcpxbench
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -f "$mmvdir/$name"
	rm -rf "$work"
}
trap cleanup EXIT
prom_accept='application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1'
gcc -O2 -Wall -o "$work/mmvwriter" "$here/mmvwriter.c" -lpcp_mmv -lpcp -lm
(cd "$root" && CGO_ENABLED=0 go build -o "$work/pcp-exporter" ./cmd/pcp-exporter && go build -o "$work/load" ./bench/scrape/load)
"$work/mmvwriter" "$name" 1000 100 333 > "$work/writer.out" 2>&1 &
pids+=($!)
sleep 3
hz=$(getconf CLK_TCK)
ticks() { local t=0 p; for p in "$@"; do [[ -r /proc/$p/stat ]] && t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat"))); done; echo "$t"; }
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rss() { awk '/VmHWM/{printf "%.1f MiB", $2/1024}' "/proc/$1/status"; }
# serve NAMING: starts an exporter on a free loopback port; sets EPID, EURL
serve() {
	local port
	port=$(freeport)
	"$work/pcp-exporter" serve --mmv.dir="$mmvdir" --naming="$1" --web.listen-address="127.0.0.1:$port" --log.level=warn >> "$work/exporter.log" 2>&1 &
	EPID=$!
	pids+=("$EPID")
	EURL="http://127.0.0.1:$port/metrics"
	until curl -sf -o /dev/null "http://127.0.0.1:$port/-/ready"; do sleep 0.1; done
}
serve default
def_pid=$EPID def_url=$EURL
serve pmproxy
pmp_pid=$EPID pmp_url=$EURL
pmproxy_pids="$(pgrep -x pmcd | head -1) $(pgrep -x pmproxy | head -1)"
pmproxy_url="http://127.0.0.1:44322/metrics?names=mmv.$name"

# variants: label | url | server pids | headers (text, text+gzip, om, om+gzip)
labels=() urls=() spids=() kinds=()
add() { labels+=("$1"); urls+=("$2"); spids+=("$3"); kinds+=("$4"); }
add "pmproxy, curl" "$pmproxy_url" "$pmproxy_pids" text
add "pmproxy, Prometheus headers" "$pmproxy_url" "$pmproxy_pids" om+gzip
for n in default pmproxy; do
	if [[ $n == default ]]; then u=$def_url p=$def_pid; else u=$pmp_url p=$pmp_pid; fi
	add "exporter $n naming, text" "$u" "$p" text
	add "exporter $n naming, text gzip" "$u" "$p" text+gzip
	add "exporter $n naming, OpenMetrics" "$u" "$p" om
	add "exporter $n naming, OpenMetrics gzip" "$u" "$p" om+gzip
done
# fetch I: one scrape of variant I into $work/body.I; prints "wall bytes"
fetch() {
	local i=$1
	local args=(-s -o "$work/body.$i" -w '%{time_total} %{size_download}')
	case ${kinds[$i]} in
	text+gzip) args+=(-H 'Accept-Encoding: gzip') ;;
	om) args+=(-H "Accept: $prom_accept") ;;
	om+gzip) args+=(-H "Accept: $prom_accept" -H 'Accept-Encoding: gzip') ;;
	esac
	curl "${args[@]}" "${urls[$i]}"
}
n=${#labels[@]}
for i in $(seq 0 $((n - 1))); do : > "$work/rows.$i"; fetch "$i" > /dev/null; done
for _ in $(seq 1 "$RUNS"); do
	for i in $(seq 0 $((n - 1))); do
		# shellcheck disable=SC2086
		a=$(ticks ${spids[$i]})
		w=$(fetch "$i")
		# shellcheck disable=SC2086
		b=$(ticks ${spids[$i]})
		if gzip -t "$work/body.$i" 2>/dev/null; then s=$(gzip -dc "$work/body.$i" | grep -vc '^#'); else s=$(grep -vc '^#' "$work/body.$i"); fi
		echo "$w $s $(awk -v d=$((b - a)) -v hz="$hz" 'BEGIN{print d/hz}')" >> "$work/rows.$i"
	done
done
med() { awk -v c="$2" '{print $c}' "$work/rows.$1" | sort -g | awk '{a[NR]=$1} END {print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
printf '%-42s %10s %10s %9s %8s %8s\n' "W1 scrape (100k series)" "latency s" "bytes" "samples" "CPU s" "pmproxy/"
for i in $(seq 0 $((n - 1))); do
	ref=0
	[[ ${kinds[$i]} == om* ]] && ref=1 # pmproxy asked with Prometheus's headers
	printf '%-42s %10.4f %10d %9d %8.3f %7.0fx\n' "${labels[$i]}" "$(med "$i" 1)" "$(med "$i" 2)" "$(med "$i" 3)" "$(med "$i" 4)" \
		"$(awk -v a="$(med "$ref" 1)" -v b="$(med "$i" 1)" 'BEGIN{print a/b}')"
done
echo "exporter peak RSS over the bench: $(rss "$def_pid") (default naming), $(rss "$pmp_pid") (pmproxy naming)"
echo "goal (Prometheus's headers, i.e. OpenMetrics gzip): < 50 ms and >= 100x pmproxy; peak RSS < 128 MiB"
kill "$def_pid" "$pmp_pid"
if ((LOAD_SECONDS > 0)); then
	for gz in true false; do
		serve default
		echo -n "fresh exporter (default naming), OpenMetrics$([[ $gz == true ]] && echo " gzip"): "
		"$work/load" -c "$LOAD_CONCURRENCY" -d "${LOAD_SECONDS}s" -gzip="$gz" -pid "$EPID" "$EURL"
		kill "$EPID"
	done
	echo "goal under $LOAD_CONCURRENCY concurrent scrapers: every scrape completes; peak RSS < 256 MiB"
fi
