#!/usr/bin/env bash
# Backfill walkthrough: PCP archive history into Prometheus-compatible storage.
# Run from the repository root:
#
#   bash examples/backfill/walkthrough.sh [ARCHIVE]
#
# (default: a multi-volume archive of the test corpus; on a PCP host, try
# /var/log/pcp/pmlogger/$(hostname)/<YYYYMMDD>). Needs promtool and
# victoria-metrics (Debian: apt-get install prometheus victoria-metrics).
# Each step prints what it does; examples/examples_test.go runs this script.
set -euo pipefail

ARCHIVE=${1:-testdata/pcp-corpus/archives/multivol/multivol}
WORK=${WORK:-$(mktemp -d)}
PCP_EXPORTER=${PCP_EXPORTER:-"go run ./cmd/pcp-exporter"}
VM_PORT=${VM_PORT:-18428}
echo "== working in $WORK"

# 1. What is in the archive: metrics, units, instances.
echo "== 1. metadata"
$PCP_EXPORTER info "$ARCHIVE" >"$WORK/info.json"
python3 -c 'import json,sys; [print(" ", m["name"], m["sem"], repr(m["units"])) for m in json.load(open(sys.argv[1]))]' "$WORK/info.json" | head -10

# 2. OpenMetrics text, then Prometheus' own block builder. Every recorded
#    sample (--raw) keeps the archive's original timestamps.
echo "== 2. openmetrics text -> promtool tsdb create-blocks-from openmetrics"
$PCP_EXPORTER backfill "$ARCHIVE" --raw --output "openmetrics:$WORK/pcp.om"
tail -n 3 "$WORK/pcp.om"
promtool tsdb create-blocks-from openmetrics "$WORK/pcp.om" "$WORK/promdata" >/dev/null
promtool tsdb list "$WORK/promdata"
# Point Prometheus at it: prometheus --storage.tsdb.path="$WORK/promdata"

# 3. TSDB blocks written directly, on a 10 s interpolated grid.
echo "== 3. TSDB blocks directly (--step 10s)"
$PCP_EXPORTER backfill "$ARCHIVE" --step 10s --output "tsdb:$WORK/tsdb"
promtool tsdb list "$WORK/tsdb"

# 4. Remote write into a running database (here VictoriaMetrics; Prometheus
#    needs --web.enable-remote-write-receiver, and accepts old samples only
#    with out-of-order ingestion enabled).
echo "== 4. remote write into VictoriaMetrics"
victoria-metrics -httpListenAddr="127.0.0.1:$VM_PORT" -storageDataPath="$WORK/vm" -retentionPeriod=100y >"$WORK/vm.log" 2>&1 &
vm=$!
trap 'kill $vm 2>/dev/null; wait $vm 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
	curl -fs "http://127.0.0.1:$VM_PORT/health" >/dev/null 2>&1 && break
	sleep 0.1
done
$PCP_EXPORTER backfill "$ARCHIVE" --raw --output "remote-write:http://127.0.0.1:$VM_PORT/api/v1/write"
curl -fs "http://127.0.0.1:$VM_PORT/internal/force_flush" >/dev/null
series=$(curl -fs "http://127.0.0.1:$VM_PORT/api/v1/series/count" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0])')
echo "VictoriaMetrics holds $series series"
[[ $series -gt 0 ]]
echo "== done"
