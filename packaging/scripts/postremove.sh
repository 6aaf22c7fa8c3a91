#!/bin/sh
# pcp-exporter postrm (deb) / %postun (rpm): systemd told of the removed
# unit; on purge (deb) /etc/pcp-exporter when empty. The system user stays,
# as Debian's and Fedora's guidelines ask (files may still be owned by it).
set -e

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
if [ "$1" = purge ]; then
	rmdir --ignore-fail-on-non-empty /etc/pcp-exporter 2>/dev/null || true
fi
exit 0
