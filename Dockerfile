# pcp-exporter container image: a static binary on an empty base, run as nobody.
# CI builds the same image without a Docker daemon (scripts/build-image.sh, deploy/image):
# keep the user, entrypoint, port and files below in step with deploy/image/main.go.
#
#   docker build -t pcp-exporter .
#   docker run --rm -v /var/lib/pcp/tmp/mmv:/var/lib/pcp/tmp/mmv:ro -p 9464:9464 pcp-exporter
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN make build BINARY=/out/pcp-exporter VERSION=${VERSION} && /out/pcp-exporter --version
RUN mkdir -p /rootfs/etc /rootfs/tmp /rootfs/var/lib/pcp/tmp/mmv /rootfs/etc/ssl/certs \
 && chmod 1777 /rootfs/tmp \
 && printf 'root:x:0:0:root:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' > /rootfs/etc/passwd \
 && printf 'root:x:0:\nnogroup:x:65534:\n' > /rootfs/etc/group \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ \
 && cp /out/pcp-exporter /rootfs/pcp-exporter

FROM scratch
COPY --from=build /rootfs/ /
USER 65534:65534
ENV PCP_TMP_DIR=/var/lib/pcp/tmp
EXPOSE 9464
ENTRYPOINT ["/pcp-exporter"]
CMD ["serve"]
