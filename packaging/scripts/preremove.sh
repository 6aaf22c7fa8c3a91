#!/bin/sh
# pcp-exporter prerm (deb) / %preun (rpm): on removal (not on upgrade) the
# unit and its socket are stopped and disabled where systemd runs.
set -e

case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac
if [ -d /run/systemd/system ]; then
	systemctl --no-reload disable --now pcp-exporter.service pcp-exporter.socket >/dev/null 2>&1 || true
fi
exit 0
