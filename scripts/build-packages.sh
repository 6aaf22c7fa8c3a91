#!/usr/bin/env bash
# build-packages.sh OUTDIR: the .deb and .rpm of pcp-exporter (make package).
#
# Builds the static, version-stamped binary (make binary), its man page from
# the commands' help (kingpin's --help-man), a Debian changelog stanza, and
# packs them with the unit, the socket, /etc/default/pcp-exporter and the
# maintainer scripts of packaging/ using nfpm, the Go tool pinned in go.mod
# (go tool nfpm: nothing is downloaded but Go modules). Prints the paths of
# the two packages.
#
# The package version is the tag without its "v" when HEAD is tagged
# (v1.2.3 -> 1.2.3), else 0.0.0~git<commit date>.<short revision>, so that a
# tagged release sorts after every snapshot before it.
set -euo pipefail

cd "$(dirname "$0")/.."
out=${1:-dist}
GO=${GO:-go}
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT

rev=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if tag=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null); then
	version=${tag#v}
elif [[ $rev != unknown ]]; then
	version=0.0.0~git$(TZ=UTC git show -s --date=format-local:%Y%m%d%H%M%S --format=%cd HEAD).$(git rev-parse --short=12 HEAD)
else
	version=0.0.0~unknown
fi
arch=$($GO env GOARCH)

make --no-print-directory binary BINARY="$build/pcp-exporter" VERSION="$version" >&2
$GO build -o "$build/nfpm" github.com/goreleaser/nfpm/v2/cmd/nfpm
"$build/pcp-exporter" --version >&2

# The man page: kingpin's, with a whatis line and the version in .TH.
"$build/pcp-exporter" --help-man |
	sed -e "1s/.*/.TH PCP-EXPORTER 1 \"\" \"pcp-exporter $version\" \"User Commands\"/" \
		-e '/^\.SH "NAME"$/{n;s/.*/pcp-exporter \\- bridge Performance Co-Pilot (PCP) metrics to Prometheus and OpenTelemetry/}' |
	gzip -9n >"$build/pcp-exporter.1.gz"

date=$(TZ=UTC git show -s --format=%cD HEAD 2>/dev/null || date -uR)
maintainer=$(sed -n 's/^maintainer: //p' packaging/nfpm.yaml)
printf 'pcp-exporter (%s-1) unstable; urgency=medium\n\n  * Snapshot of revision %s.\n\n -- %s  %s\n' \
	"$version" "$rev" "$maintainer" "$date" | gzip -9n >"$build/changelog.Debian.gz"

# nfpm reads the files named in packaging/nfpm.yaml relative to its working
# directory: the staging directory, with the repository's files copied in.
mkdir -p "$build/examples"
cp -r packaging "$build/"
cp -r examples/mapping examples/derived examples/prometheus "$build/examples/"
export PKG_VERSION=$version PKG_ARCH=$arch
for p in deb rpm; do
	(cd "$build" && ./nfpm package --config packaging/nfpm.yaml --packager "$p" --target "$out/" >&2)
done
ls "$out/pcp-exporter_$version-1_$arch.deb" "$out"/pcp-exporter-"$version"-1.*.rpm
