#!/bin/bash
# Scrape benchmark (issue 5): workload W1 (performance anchors): a C writer
# linked with libpcp_mmv (mmvwriter.c) updates 1,000 metrics x 100 instances
# (100,000 values) every 100 ms in pmcd's MMV directory. The same file is
# scraped N times from pmproxy's /metrics (pmcd + pmdammv + pmproxy) and
# from `pcp-exporter serve`'s /metrics (pmproxy naming and default naming),
# in one run: median latency, bytes, samples, server CPU per scrape
# (pmcd+pmproxy, or the exporter, from /proc/PID/stat) and the exporter's
# peak RSS, with the ratios.
# usage: bench/scrape/run.sh   (env: RUNS; needs pcp, libpcp-mmv1-dev, gcc, root)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
RUNS=${RUNS:-7}
mmvdir=/var/lib/pcp/tmp/mmv
work=$(mktemp -d)
name=pcpxbench
cleanup() {
	[[ -n ${wpid:-} ]] && kill "$wpid" 2>/dev/null
	[[ -n ${epid:-} ]] && kill "$epid" 2>/dev/null
	wait 2>/dev/null || true
	rm -f "$mmvdir/$name"
	rm -rf "$work"
}
trap cleanup EXIT
gcc -O2 -Wall -o "$work/mmvwriter" "$here/mmvwriter.c" -lpcp_mmv -lpcp -lm
(cd "$root" && CGO_ENABLED=0 go build -o "$work/pcp-exporter" ./cmd/pcp-exporter)
"$work/mmvwriter" "$name" 1000 100 333 > "$work/writer.out" 2>&1 &
wpid=$!
sleep 3
hz=$(getconf CLK_TCK)
ticks() { local t=0 p; for p in "$@"; do [[ -r /proc/$p/stat ]] && t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat"))); done; echo "$t"; }

# scrape LABEL URL PIDS...: medians of wall, bytes, samples and server CPU per scrape
scrape() {
	local label=$1 url=$2; shift 2
	local rows=$work/$label.rows
	: > "$rows"
	curl -s -o /dev/null "$url"
	for _ in $(seq 1 "$RUNS"); do
		local a b w
		a=$(ticks "$@")
		w=$(curl -s -o "$work/$label.txt" -w '%{time_total} %{size_download}' "$url")
		b=$(ticks "$@")
		echo "$w $(grep -vc '^#' "$work/$label.txt") $(awk -v d=$((b - a)) -v hz="$hz" 'BEGIN{print d/hz}')" >> "$rows"
	done
	med() { awk -v c="$1" '{print $c}' "$rows" | sort -g | awk '{a[NR]=$1} END {print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
	printf '%-36s %10.4f %10d %9d %9.3f\n' "$label" "$(med 1)" "$(med 2)" "$(med 3)" "$(med 4)"
	eval "${label//[^a-z]/_}_wall=$(med 1)"
}
printf '%-36s %10s %10s %9s %9s\n' "W1 scrape (100k series)" "latency s" "bytes" "samples" "CPU s"
scrape pmproxy "http://127.0.0.1:44322/metrics?names=mmv.$name" "$(pgrep -x pmcd | head -1)" "$(pgrep -x pmproxy | head -1)"
"$work/pcp-exporter" serve --mmv.dir="$mmvdir" --web.listen-address=127.0.0.1:19464 --log.level=warn > "$work/exporter.log" 2>&1 &
epid=$!
sleep 1
scrape exporter_default "http://127.0.0.1:19464/metrics" "$epid"
"$work/pcp-exporter" serve --mmv.dir="$mmvdir" --naming=pmproxy --web.listen-address=127.0.0.1:19465 --log.level=warn > "$work/exporter2.log" 2>&1 &
epid2=$!
sleep 1
scrape exporter_pmproxy "http://127.0.0.1:19465/metrics" "$epid2"
echo "exporter peak RSS: $(awk '/VmHWM/{print $2/1024 " MiB"}' "/proc/$epid/status") (default naming), $(awk '/VmHWM/{print $2/1024 " MiB"}' "/proc/$epid2/status") (pmproxy naming)"
kill "$epid2"
# shellcheck disable=SC2154
echo "latency ratio pmproxy/exporter: $(awk -v a="$pmproxy_wall" -v b="$exporter_default_wall" 'BEGIN{printf "%.0fx", a/b}') (default naming), $(awk -v a="$pmproxy_wall" -v b="$exporter_pmproxy_wall" 'BEGIN{printf "%.0fx", a/b}') (pmproxy naming); goal: < 50 ms and 100x"
