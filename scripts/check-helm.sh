#!/usr/bin/env bash
# check-helm.sh checks the Helm chart deploy/helm/pcp-exporter offline:
#   1. helm lint --strict with each ci/*-values.yaml (every mode);
#   2. helm template with each of them;
#   3. the Go tests of the deploy module (separate go.mod, so Kubernetes types
#      stay out of the binary): every rendered manifest decoded strictly into
#      the Kubernetes API and prometheus-operator types (unknown fields fail),
#      the sidecar's security context, volumes and args, DaemonSet hostPaths,
#      backfill sharding; and the OCI image builder.
# helm comes from $PCP_EXPORTER_HELM, else scripts/build-helm.sh (cached build).
set -euo pipefail
cd "$(dirname "$0")/.."
HELM=${PCP_EXPORTER_HELM:-$(bash scripts/build-helm.sh)}
export PCP_EXPORTER_HELM=$HELM
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
export HELM_CACHE_HOME=$home HELM_CONFIG_HOME=$home HELM_DATA_HOME=$home
chart=deploy/helm/pcp-exporter
n=0
for values in "$chart"/ci/*-values.yaml; do
	echo "helm lint --strict -f $values"
	"$HELM" lint --strict --quiet -f "$values" "$chart"
	"$HELM" template ci "$chart" --namespace monitoring -f "$values" >"$home/rendered.yaml"
	echo "helm template -f $values: $(grep -c '^kind:' "$home/rendered.yaml") objects"
	n=$((n + 1))
done
echo "helm: $n values files linted and rendered"
(cd deploy && go vet ./... && go test -count=1 ./...)
