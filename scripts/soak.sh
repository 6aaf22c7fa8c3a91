#!/usr/bin/env bash
# soak.sh: the soak test (soak/soak_test.go) for SOAK_DURATION (default 10m):
# the exporter serves a churning MMV directory (writers re-create, grow and
# delete files) and follows an archive pmlogger is writing, under 8
# concurrent scrapers and an OTLP push to a real OpenTelemetry Collector;
# it fails on any scrape error, impossible value, source down, goroutine,
# fd or RSS growth, or OTLP export error. Needs the peers of
# install-test-deps.sh (pmcd running) and PCP_EXPORTER_OTELCOL or otelcol.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PCP_EXPORTER_OTELCOL:=$(bash scripts/build-otelcol.sh)}"
export PCP_EXPORTER_OTELCOL
export PCP_EXPORTER_SOAK=${SOAK_DURATION:-10m}
go test -count=1 -timeout 0 -run '^TestSoak$' -v ./soak
