#!/bin/bash
# A real Prometheus scraping the exporter (issue 28): workload W1 (1,000
# metrics x 100 instances, mmvwriter.c) in a private MMV directory, served
# by `pcp-exporter serve` (and, unless ONLY_EXPORTER is set, by a second
# exporter with --openmetrics.created and by a static server of one saved
# gzipped exposition of the same data: what Prometheus's own ingestion
# costs), scraped every 5 s by the installed prometheus for DURATION
# seconds, each on an ephemeral loopback port in a temporary directory.
# Prints, per job, the median, minimum and maximum scrape_duration_seconds
# (which includes Prometheus's parsing and appending of the samples), the
# samples scraped, the series stored (_created ones apart) and the scrapes
# that succeeded, then the exporters' peak RSS.
# usage: bench/scrape/prometheus.sh   (env: DURATION=120, ONLY_EXPORTER;
#        needs pcp, libpcp-mmv1-dev, gcc, python3, prometheus)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
DURATION=${DURATION:-120}
work=$(mktemp -d)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
prom_accept='application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1'
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
gcc -O2 -Wall -o "$work/mmvwriter" "$here/mmvwriter.c" -lpcp_mmv -lpcp -lm
(cd "$root" && CGO_ENABLED=0 go build -o "$work/pcp-exporter" ./cmd/pcp-exporter)
mkdir -p "$work/tmp/mmv"
PCP_TMP_DIR=$work/tmp "$work/mmvwriter" w1 1000 100 336 > /dev/null 2>&1 &
pids+=($!)
sleep 2
# serve JOB ARGS...: an exporter on a free port; appends JOB's target
targets=()
serve() {
	local job=$1 port
	shift
	port=$(freeport)
	"$work/pcp-exporter" serve --mmv.dir="$work/tmp/mmv" --web.listen-address="127.0.0.1:$port" --log.level=warn "$@" >> "$work/exporter.log" 2>&1 &
	pids+=($!)
	epids+=("$job:$!")
	until curl -sf -o /dev/null "http://127.0.0.1:$port/-/ready"; do sleep 0.1; done
	targets+=("$job 127.0.0.1:$port")
}
epids=()
serve pcpx
if [[ -z ${ONLY_EXPORTER:-} ]]; then
	serve pcpx-created --openmetrics.created
	curl -s -H "Accept: $prom_accept" -H 'Accept-Encoding: gzip' -o "$work/static.om.gz" "http://${targets[0]#* }/metrics"
	port=$(freeport)
	python3 - "$port" "$work/static.om.gz" <<'PY' &
import http.server, sys
body = open(sys.argv[2], 'rb').read()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header('Content-Type', 'application/openmetrics-text; version=1.0.0; charset=utf-8')
        self.send_header('Content-Encoding', 'gzip')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
PY
	pids+=($!)
	targets+=("static 127.0.0.1:$port")
	sleep 1
fi
{
	printf 'global:\n  scrape_interval: 5s\n  scrape_timeout: 5s\nscrape_configs:\n'
	for t in "${targets[@]}"; do printf "  - job_name: %s\n    static_configs:\n      - targets: ['%s']\n" "${t% *}" "${t#* }"; done
} > "$work/prometheus.yml"
pport=$(freeport)
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" --web.listen-address="127.0.0.1:$pport" > "$work/prometheus.log" 2>&1 &
pids+=($!)
until curl -sf -o /dev/null "http://127.0.0.1:$pport/-/ready"; do sleep 0.2; done
start=$(date +%s)
sleep "$DURATION"
end=$(date +%s)
api="http://127.0.0.1:$pport/api/v1"
scalar() { curl -s -G "$api/query" --data-urlencode "query=$1" --data-urlencode "time=$end" | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)'; }
echo "Prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}'), scrape every 5 s for $DURATION s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for t in "${targets[@]}"; do
	job=${t% *}
	curl -s -G "$api/query_range" --data-urlencode "query=scrape_duration_seconds{job=\"$job\"}" --data-urlencode "start=$start" --data-urlencode "end=$end" --data-urlencode step=5 |
		python3 -c 'import json,sys,statistics
v=sorted(float(x[1]) for x in json.load(sys.stdin)["data"]["result"][0]["values"])
print("%-13s scrape_duration_seconds median %.4f s (min %.4f, max %.4f, %d points)" % (sys.argv[1], statistics.median(v), v[0], v[-1], len(v)), end="")' "$job"
	echo ", $(scalar "scrape_samples_scraped{job=\"$job\"}") samples/scrape, $(scalar "count({job=\"$job\",__name__!~\".+_created\"})") series + $(scalar "count({job=\"$job\",__name__=~\".+_created\"})") _created series, $(scalar "sum_over_time(up{job=\"$job\"}[${DURATION}s])") scrapes up"
done
for e in "${epids[@]}"; do echo "exporter ${e%%:*} peak RSS: $(awk '/VmHWM/{printf "%.1f MiB", $2/1024}' "/proc/${e#*:}/status")"; done
