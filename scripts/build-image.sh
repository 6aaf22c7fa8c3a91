#!/usr/bin/env bash
# build-image.sh builds the pcp-exporter OCI image without a Docker daemon and
# checks that it starts: a static binary (make build, CGO_ENABLED=0) is put on
# an empty base by deploy/image (go-containerregistry), written as an OCI image
# layout to bin/image (and a `docker load` tarball bin/pcp-exporter-image.tar),
# then read back: the binary is extracted from the image's filesystem and run
# with --version. The Dockerfile builds the same image with Docker. The example
# application examples/mmvapp gets the same kind of image (bin/mmvapp-image),
# the one examples/kubernetes/sidecar.yaml runs beside the exporter.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${IMAGE_OUT:-bin}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
mkdir -p "$OUT"
make build BINARY="$OUT/pcp-exporter" VERSION="$VERSION"
certs=/etc/ssl/certs/ca-certificates.crt
[[ -f $certs ]] || certs=""
(cd deploy && go run ./image \
	-binary "../$OUT/pcp-exporter" \
	-out "../$OUT/image" \
	-tarball "../$OUT/pcp-exporter-image.tar" \
	-ref "ghcr.io/pcp-exporter/pcp-exporter:$VERSION" \
	-version "$VERSION" \
	-ca-certificates "$certs" \
	-check)

CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$OUT/mmvapp" ./examples/mmvapp
(cd deploy && go run ./image \
	-binary "../$OUT/mmvapp" \
	-path /mmvapp -cmd "" -title mmvapp -port - \
	-out "../$OUT/mmvapp-image" \
	-tarball "../$OUT/mmvapp-image.tar" \
	-ref "ghcr.io/pcp-exporter/mmvapp:$VERSION" \
	-version "$VERSION" \
	-ca-certificates "" \
	-check -check.args=-version -check.want="mmvapp ")
