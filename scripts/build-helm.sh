#!/usr/bin/env bash
# build-helm.sh builds (once per machine, cached) helm, used by .ci/run to lint
# and render the chart in deploy/helm, and prints its path:
#
#   /var/cache/pcp-exporter-ci/helm-v3.22.0/helm
#
# (or $PCP_EXPORTER_CI_CACHE/helm-v3.22.0/helm). Debian has no helm package and
# the network only reaches the Go module proxy, so it is built from the module
# (docs/tooling.md section 3). .ci/run exports PCP_EXPORTER_HELM.
set -euo pipefail

HELM_VERSION=v3.22.0
CACHE=${PCP_EXPORTER_CI_CACHE:-/var/cache/pcp-exporter-ci}
DIR=$CACHE/helm-$HELM_VERSION
BIN=$DIR/helm

if [[ -x $BIN ]] && "$BIN" version --short >/dev/null 2>&1; then
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
echo "build-helm: building helm $HELM_VERSION into $BIN" >&2
GOFLAGS='' GOBIN=$WORK go install -trimpath -ldflags='-s -w' "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
"$WORK/helm" version --short >&2
mv -f "$WORK/helm" "$BIN.tmp"
mv -f "$BIN.tmp" "$BIN"
echo "$BIN"
