#!/usr/bin/env bash
# install-test-deps.sh installs, as root on Debian bookworm, every peer the
# end-to-end tests run against, and starts the two daemons they talk to:
#
#   PCP (pmcd, pmproxy, pminfo, pmdumplog, pmlogger, libpcp and libpcp_mmv
#   with headers, python3-pcp), sasl2-bin (saslpasswd2: SASL users of the
#   private pmcds of the TLS/SASL tests), gcc (C peer programs against libpcp, and the
#   race detector), xz/bzip2/zstd (compressed archive volumes), Prometheus 2.42
#   with promtool, VictoriaMetrics, ca-certificates (put into the image) and
#   git (version stamping), shellcheck (lints these scripts), lintian, rpm
#   (checks the .deb and .rpm of make package), systemd (systemd-analyze on
#   the unit; no init needed) and jsonnet (renders mixin/).
#
# It is idempotent: packages already installed are not fetched again, and the
# daemons are only started when not answering. Prometheus, VictoriaMetrics and
# any other auto-started daemon are stopped: tests start their own instances
# on loopback ports. Set PCP_EXPORTER_SKIP_APT=1 to only (re)start daemons.
set -euo pipefail

if [[ $(id -u) != 0 ]]; then
	echo "install-test-deps: must run as root" >&2
	exit 1
fi

PACKAGES=(pcp python3-pcp libpcp-mmv1-dev libpcp3-dev sasl2-bin gcc xz-utils bzip2 zstd prometheus prometheus-node-exporter victoria-metrics ca-certificates git shellcheck lintian rpm systemd jsonnet)

missing=()
for p in "${PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done

if [[ ${#missing[@]} -gt 0 && ${PCP_EXPORTER_SKIP_APT:-} != 1 ]]; then
	echo "install-test-deps: installing ${missing[*]}" >&2
	# Package maintainer scripts call systemctl and invoke-rc.d, which fail or
	# start unwanted daemons in a container without systemd. A no-op
	# systemctl first on PATH and a policy-rc.d that forbids starting services
	# keep the installation quiet; the daemons we need are started below.
	shim=$(mktemp -d)
	printf '#!/bin/sh\nexit 0\n' >"$shim/systemctl"
	chmod +x "$shim/systemctl"
	policy=/usr/sbin/policy-rc.d
	own_policy=0
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod +x "$policy"
		own_policy=1
	fi
	cleanup() {
		rm -rf "$shim"
		if [[ $own_policy == 1 ]]; then rm -f "$policy"; fi
	}
	trap cleanup EXIT
	export DEBIAN_FRONTEND=noninteractive
	# apt runs dpkg with a PATH of its own (DPkg::Path), not the caller's:
	# the shim must be put in that one. A package left half-configured by an
	# earlier run without the shim is configured first.
	dpkg_path="DPkg::Path=$shim:/usr/sbin:/usr/bin:/sbin:/bin"
	PATH=$shim:$PATH dpkg --configure -a
	install() { PATH=$shim:$PATH apt-get -o "$dpkg_path" install -y -q --no-install-recommends "${missing[@]}"; }
	# Package lists fetched within the last day are reused; when they are
	# stale or lack a package, update and retry.
	if [[ -n $(find /var/lib/apt/lists -maxdepth 1 -name '*Release' -mmin -1440 2>/dev/null) ]] && install; then
		:
	else
		PATH=$shim:$PATH apt-get update -q
		install
	fi
	cleanup
	trap - EXIT
fi

# Tests start their own Prometheus/VictoriaMetrics; stop anything packages may
# have started (only through their init scripts, never by process name).
for svc in prometheus victoria-metrics prometheus-node-exporter; do
	if [[ -x /etc/init.d/$svc ]]; then
		/etc/init.d/$svc stop >/dev/null 2>&1 || true
	fi
done

# pmcd refuses to start when neither the host name nor localhost resolves
# (minimal containers without /etc/hosts entries).
if ! getent hosts localhost >/dev/null 2>&1; then
	echo "127.0.0.1 localhost" >>/etc/hosts
fi
if ! getent hosts "$(hostname)" >/dev/null 2>&1; then
	echo "127.0.1.1 $(hostname)" >>/etc/hosts
fi

pcp_answers() {
	pminfo -f mmv.control.files >/dev/null 2>&1
}

if ! pcp_answers; then
	echo "install-test-deps: starting pmcd and pmproxy" >&2
	/etc/init.d/pmcd start >&2 || true
	/etc/init.d/pmproxy start >&2 || true
	for _ in $(seq 1 60); do
		if pcp_answers; then break; fi
		sleep 0.5
	done
fi
if ! pgrep -x pmproxy >/dev/null 2>&1; then
	/etc/init.d/pmproxy start >&2 || true
fi

if ! pcp_answers; then
	echo "install-test-deps: pmcd does not answer 'pminfo -f mmv.control.files'" >&2
	exit 1
fi
echo "install-test-deps: ok (pmcd answers; $(pminfo -V 2>&1 | head -1))" >&2
