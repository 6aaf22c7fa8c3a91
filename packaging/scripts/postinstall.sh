#!/bin/sh
# pcp-exporter postinst (deb) / %post (rpm): the system user the service runs
# as, a member of group pcp (to read /var/lib/pcp/tmp/mmv and
# /var/log/pcp/pmlogger) when PCP is installed; then the unit enabled and
# (re)started where systemd runs.
set -e

# deb: "configure" (an upgrade passes the old version as $2); rpm: 1 on
# install, 2 on upgrade.
upgrade=0
case "$1" in
configure) [ -n "$2" ] && upgrade=1 ;;
[0-9]*) [ "$1" -gt 1 ] && upgrade=1 ;;
*) exit 0 ;;
esac

if ! getent group pcp-exporter >/dev/null; then
	groupadd --system pcp-exporter
fi
if ! getent passwd pcp-exporter >/dev/null; then
	useradd --system --gid pcp-exporter --home-dir /nonexistent --no-create-home \
		--shell /usr/sbin/nologin --comment "PCP exporter" pcp-exporter
fi
if getent group pcp >/dev/null; then
	usermod --append --groups pcp pcp-exporter
fi

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null || true
	if [ "$upgrade" = 1 ]; then
		systemctl try-restart pcp-exporter.service >/dev/null || true
	else
		systemctl enable pcp-exporter.service >/dev/null || true
		systemctl start pcp-exporter.service >/dev/null || true
	fi
fi
exit 0
