#!/usr/bin/env bash
# build-otelcol.sh builds (once per machine, cached) the minimal OpenTelemetry
# Collector that the OTLP end-to-end tests send to, and prints its path.
#
# The binary lands at a stable, version-keyed path:
#
#   /var/cache/pcp-exporter-ci/otelcol-0.161.0/otelcol
#
# (or $PCP_EXPORTER_CI_CACHE/otelcol-0.161.0/otelcol). Tests find it through
# PCP_EXPORTER_OTELCOL, which .ci/run exports:
#
#   export PCP_EXPORTER_OTELCOL=$(scripts/build-otelcol.sh)
#
# Component versions are pinned as docs/tooling.md section 2(b) verified: the
# module proxy refuses otlpreceiver >= v0.163.0 (internal/statusutil is 403)
# and fileexporter other than v0.161.0, so the builder and every component are
# v0.161.0 and the confmap providers v1.67.0.
set -euo pipefail

OTELCOL_VERSION=0.161.0
PROVIDERS_VERSION=1.67.0
CACHE=${PCP_EXPORTER_CI_CACHE:-/var/cache/pcp-exporter-ci}
DIR=$CACHE/otelcol-$OTELCOL_VERSION
BIN=$DIR/otelcol

if [[ -x $BIN ]] && "$BIN" --version >/dev/null 2>&1; then
	echo "$BIN"
	exit 0
fi

mkdir -p "$DIR"
# One build at a time per machine: a second caller waits, then reuses the result.
exec 9>"$DIR/.lock"
flock 9
if [[ -x $BIN ]]; then
	echo "$BIN"
	exit 0
fi
WORK=$(mktemp -d "$DIR/build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

echo "build-otelcol: building OpenTelemetry Collector $OTELCOL_VERSION into $BIN" >&2
GOBIN=$WORK/bin go install "go.opentelemetry.io/collector/cmd/builder@v$OTELCOL_VERSION" >&2

cat >"$WORK/manifest.yaml" <<MANIFEST
dist:
  name: otelcol
  description: Minimal collector for pcp-exporter end-to-end tests
  output_path: $WORK/dist
  version: $OTELCOL_VERSION
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver v$OTELCOL_VERSION
processors:
  - gomod: go.opentelemetry.io/collector/processor/batchprocessor v$OTELCOL_VERSION
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter v$OTELCOL_VERSION
  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter v$OTELCOL_VERSION
providers:
  - gomod: go.opentelemetry.io/collector/confmap/provider/fileprovider v$PROVIDERS_VERSION
  - gomod: go.opentelemetry.io/collector/confmap/provider/envprovider v$PROVIDERS_VERSION
MANIFEST

# The builder runs go mod tidy and go build in the generated module; keep the
# outer module's flags out of it.
(cd "$WORK" && GOFLAGS='' "$WORK/bin/builder" --config "$WORK/manifest.yaml") >&2
"$WORK/dist/otelcol" --version >&2
mv -f "$WORK/dist/otelcol" "$BIN.tmp"
mv -f "$BIN.tmp" "$BIN"
echo "$BIN"
