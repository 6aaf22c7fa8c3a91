#!/usr/bin/env bash
# lean-compare.sh: node_exporter (Debian prometheus-node-exporter) and
# pcp-exporter's default (serve with no flags) side by side on this host,
# scraped by one Prometheus every 15 s for DURATION seconds (600): samples
# per scrape, series created after the first scrape, bytes per scrape
# (plain and gzip), exporter RSS. Loopback ports from BASE (19230).
# Usage: scripts/lean-compare.sh [PCP_EXPORTER_BINARY]
set -euo pipefail
BIN=${1:-}
DURATION=${DURATION:-600}
BASE=${BASE:-19230}
PCPX=127.0.0.1:$BASE NE=127.0.0.1:$((BASE + 1)) PROM=127.0.0.1:$((BASE + 4))
dir=$(mktemp -d)
pids=()
# KEEP=1 keeps the directory (logs, Prometheus data) and says where
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null
	if [ -n "${KEEP:-}" ]; then echo "kept $dir" >&2; else rm -rf "$dir"; fi
}
trap cleanup EXIT
if [ -z "$BIN" ]; then
	BIN=$dir/pcp-exporter
	CGO_ENABLED=0 go build -o "$BIN" ./cmd/pcp-exporter
fi
NEBIN=$(command -v prometheus-node-exporter || command -v node_exporter)
"$BIN" serve --web.listen-address="$PCPX" >"$dir/pcpx.log" 2>&1 &
pids+=($!)
pcpx_pid=$!
"$NEBIN" --web.listen-address="$NE" >"$dir/ne.log" 2>&1 &
pids+=($!)
ne_pid=$!
# the first scrape after pmcd's metadata is read (pcp_exporter_source_up 1)
for _ in $(seq 120); do
	if curl -sf "http://$PCPX/metrics" | grep -q '^pcp_exporter_source_up{reason="",source="pmcd'; then break; fi
	sleep 1
done
cat >"$dir/prometheus.yml" <<YML
global:
  scrape_interval: 15s
scrape_configs:
  - job_name: pcp-exporter
    static_configs: [{targets: ["$PCPX"]}]
  - job_name: node_exporter
    static_configs: [{targets: ["$NE"]}]
YML
prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" --web.listen-address="$PROM" >"$dir/prom.log" 2>&1 &
pids+=($!)
sleep "$DURATION"
q() {
	local r v
	r=$(curl -s "http://$PROM/api/v1/query" --data-urlencode "query=$1")
	v=$(printf %s "$r" | sed -n 's/.*"value":\[[^,]*,"\([^"]*\)"\].*/\1/p')
	[ -n "$v" ] || echo "query $1: $r" >&2
	echo "$v"
}
win=$((DURATION + 60))
printf '%-34s %14s %14s\n' "uptime: $(uptime | sed 's/.*load/load/')" pcp-exporter node_exporter
row() { printf '%-34s %14s %14s\n' "$1" "$2" "$3"; }
row "samples per scrape (last)" "$(q 'scrape_samples_scraped{job="pcp-exporter"}')" "$(q 'scrape_samples_scraped{job="node_exporter"}')"
row "scrapes" "$(q "count_over_time(up{job=\"pcp-exporter\"}[${win}s])")" "$(q "count_over_time(up{job=\"node_exporter\"}[${win}s])")"
# series created after the first scrape: the job's series over the run less
# those of its first scrape (self-metrics apart: pcp_exporter_, go_,
# process_, promhttp_, node_scrape_)
self='pcp_exporter_.*|go_.*|process_.*|promhttp_.*|node_scrape_.*'
created() {
	local t0
	t0=$(q "min_over_time(timestamp(up{job=\"$1\"})[${win}s:15s])")
	q "count(last_over_time({job=\"$1\",__name__!~\"$self\"}[${win}s])) - count({job=\"$1\",__name__!~\"$self\"} @ $(awk -v t="$t0" 'BEGIN{printf "%.3f", t + 1}'))"
}
row "series created after 1st scrape" "$(created pcp-exporter)" "$(created node_exporter)"
# which they are: the metric names and label sets Prometheus saw first
# after the first scrape (at most 20 per job)
for job in pcp-exporter node_exporter; do
	t0=$(q "min_over_time(timestamp(up{job=\"$job\"})[${win}s:15s])")
	curl -s "http://$PROM/api/v1/query" --data-urlencode "query=last_over_time({job=\"$job\",__name__!~\"$self\"}[${win}s]) unless {job=\"$job\",__name__!~\"$self\"} @ $(awk -v t="$t0" 'BEGIN{printf "%.3f", t + 1}')" |
		{ grep -o '"metric":{[^}]*}' || true; } | head -20 | sed "s/^/  created ($job): /"
done
row "distinct series in the run" "$(q "count(last_over_time({job=\"pcp-exporter\"}[${win}s]))")" "$(q "count(last_over_time({job=\"node_exporter\"}[${win}s]))")"
sz() { curl -s "$@" | wc -c; }
row "bytes per scrape, plain" "$(sz "http://$PCPX/metrics")" "$(sz "http://$NE/metrics")"
row "bytes per scrape, gzip" "$(sz -H 'Accept-Encoding: gzip' "http://$PCPX/metrics")" "$(sz -H 'Accept-Encoding: gzip' "http://$NE/metrics")"
rss() { awk '/VmRSS/{print $2 " kB"}' "/proc/$1/status"; }
row "exporter RSS" "$(rss $pcpx_pid)" "$(rss $ne_pid)"
