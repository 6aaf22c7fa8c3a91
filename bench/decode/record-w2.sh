#!/bin/bash
# Record workload W2 (performance-anchors.md): every linux-PMDA metric (PMID
# domain 60) under kernel mem disk network filesys swap hinv, logged by
# pmlogger from the local pmcd every 100 ms for DURATION, as v2 (w2v2) and v3
# (w2v3) side by side. Same as ../shared/bench/w2-gen-config.sh + w2-record.sh.
# usage: record-w2.sh DIR [DURATION=5min]
set -euo pipefail
dir=$1; dur=${2:-5min}
mkdir -p "$dir"; cd "$dir"
{
  echo "# W2: linux PMDA metrics (not proc), 100 ms, generated $(date -u +%FT%TZ)"
  echo "log mandatory on 100 msec {"
  pminfo -m kernel mem disk network filesys swap hinv | awk '$3 ~ /^60\./ {print "    " $1}'
  echo "}"
} > w2.config
echo "w2.config: $(grep -c '^    ' w2.config) metrics" >&2
rm -f w2v2.* w2v3.*
pmlogger -V 2 -c w2.config -T "$dur" -l w2v2.log w2v2 &
pmlogger -V 3 -c w2.config -T "$dur" -l w2v3.log w2v3 &
wait
ls -la "$dir" >&2
