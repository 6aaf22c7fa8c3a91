#!/bin/bash
# bench/fleet/run.sh: one pcp-exporter serving /probe for a fleet of N
# simulated pmcds (issue 35). A private pmcd (pmcd, linux, proc, jbd2 agents;
# port 44411) is recorded once through /probe (bench/fleet record); the
# simulator serves its answers on N loopback addresses (127.0.2.1 on, port
# 45000); a load generator probes every target every EVERY for DURATION.
# Reported: probes answered, latency percentiles, the exporter's RSS and CPU
# (from /proc), and the RSS per target (RSS at N less RSS at N/10, over the
# targets added). Defaults are short (N=200, EVERY=15s, DURATION=1m); the
# issue's run is N=1000 DURATION=10m.
# MODULE_METRICS (default all) are the module's --pmcd.metrics patterns, as a
# YAML list; SMALL_DURATION the N/10 run's duration (default DURATION).
# Beside the N-target run, in the same run, pmproxy's /metrics?hostspec=
# (which opens a context, handshake and metadata walk per request) is
# probed for PMPROXY_N of the targets, as often: what it sustains.
# usage: bench/fleet/run.sh   (env: N, EVERY, DURATION, SMALL_DURATION, MODULE_METRICS, PCPX,
# PORT the exporter's, PMCD_PORT the recorded pmcd's, SIM_ADDR and SIM_PORT the simulator's,
# PMPROXY_PORT pmproxy's, PMPROXY_N its targets)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
N=${N:-200}
EVERY=${EVERY:-15s}
DURATION=${DURATION:-1m}
SMALL_DURATION=${SMALL_DURATION:-$DURATION}
MODULE_METRICS=${MODULE_METRICS:-[]}
PORT=${PORT:-19331}
PMCD_PORT=${PMCD_PORT:-44411}
SIM_ADDR=${SIM_ADDR:-127.0.2.1}
SIM_PORT=${SIM_PORT:-45000}
PMPROXY_PORT=${PMPROXY_PORT:-44412}
PMPROXY_N=${PMPROXY_N:-10}
w=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	if [[ -n ${KEEP:-} ]]; then echo "kept $w" >&2; else rm -rf "$w"; fi
}
trap cleanup EXIT
(cd "$root" && go build -o "$w/fleet" ./bench/fleet && go build -o "$w/pcpx" ./cmd/pcp-exporter)
PCPX=${PCPX:-$w/pcpx}
pmcd=/usr/lib/pcp/bin/pmcd
[[ -x $pmcd ]] || pmcd=/usr/libexec/pcp/bin/pmcd
mkdir -p "$w/pmcd" "$w/mmv"
cat > "$w/pmcd/pmcd.conf" <<CONF
pmcd	2	dso	pmcd_init	/var/lib/pcp/pmdas/pmcd/pmda_pmcd.so
proc	3	pipe	binary		/var/lib/pcp/pmdas/proc/pmdaproc -d 3
linux	60	pipe	binary		/var/lib/pcp/pmdas/linux/pmdalinux
jbd2	122	dso	jbd2_init	/var/lib/pcp/pmdas/jbd2/pmda_jbd2.so
[access]
disallow ".*" : store;
allow ".*" : fetch;
CONF
PCP_RUN_DIR=$w/pmcd "$pmcd" -f -A -i 127.0.0.1 -p "$PMCD_PORT" -s "$w/pmcd/pmcd.socket" -c "$w/pmcd/pmcd.conf" -l "$w/pmcd/pmcd.log" -x "$w/pmcd/err" >/dev/null 2>&1 &
pids+=($!)
cat > "$w/pmcd.yml" <<CONF
modules:
  default: {timeout: 60s, metrics: $MODULE_METRICS} # the recording probes send no scrape timeout
probe:
  allow: [127.0.0.0/8]
CONF
read -ra exargs <<<"${EXPORTER_ARGS:-}"
serve() {
	"$PCPX" serve --web.listen-address="127.0.0.1:$PORT" --mmv.dir="$w/mmv" --pmcd.config="$w/pmcd.yml" "${exargs[@]}" >"$w/exp${1:-}.log" 2>&1 &
	exp=$!
	pids+=("$exp")
	for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/-/healthy" >/dev/null && return; sleep 0.1; done
	echo "exporter not up" >&2
	exit 1
}
mkdir -p "$w/pmproxy"
cat > "$w/pmproxy/pmproxy.conf" <<CONF
[pmproxy]
pcp.enabled = true
http.enabled = true
resp.enabled = false
secure.enabled = false
[keys]
enabled = false
[pmseries]
enabled = false
[discover]
enabled = false
[pmsearch]
enabled = false
CONF
PCP_RUN_DIR=$w/pmproxy PCP_TMP_DIR=$w/pmproxy "${pmcd%/pmcd}/pmproxy" -f -p "$PMPROXY_PORT" -i 127.0.0.1 -c "$w/pmproxy/pmproxy.conf" -l "$w/pmproxy/pmproxy.log" -s "$w/pmproxy/pmproxy.socket" >/dev/null 2>&1 &
pmproxy=$!
pids+=("$pmproxy")
sleep 2
serve
"$w/fleet" record -pmcd "127.0.0.1:$PMCD_PORT" -o "$w/rec" -- sh -c "for i in 1 2 3; do curl -sf -o /dev/null 'http://127.0.0.1:$PORT/probe?target=PROXY'; sleep 1; done"
kill "$exp"
# pmproxy's requests too (a fetch's context number is not part of the key)
"$w/fleet" record -pmcd "127.0.0.1:$PMCD_PORT" -o "$w/rec" -- sh -c "for i in 1 2 3; do curl -sf -o /dev/null 'http://127.0.0.1:$PMPROXY_PORT/metrics?hostspec=PROXY'; sleep 1; done"
"$w/fleet" sim -f "$w/rec" -n "$N" -addr "$SIM_ADDR" -port "$SIM_PORT" >"$w/sim.log" 2>&1 &
sim=$!
pids+=("$sim")
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
hz=$(getconf CLK_TCK)
rss=()
echo "load: $(uptime | sed 's/.*load average/load average/')"
for n in $((N / 10)) "$N"; do
	sleep 1
	serve "-$n"
	c0=$(cpu "$exp")
	s0=$(cpu "$sim")
	t0=$(date +%s.%N)
	d=$DURATION
	[[ $n == "$N" ]] || d=$SMALL_DURATION
	pp=
	if [[ $n == "$N" && $PMPROXY_N -gt 0 ]]; then
		p0=$(cpu "$pmproxy")
		"$w/fleet" load -url "http://127.0.0.1:$PMPROXY_PORT/metrics?hostspec=" -expect $'\nhinv_ncpu' -n "$PMPROXY_N" -addr "$SIM_ADDR" -port "$SIM_PORT" -every "$EVERY" -for "$d" >"$w/pmproxy.out" &
		pp=$!
	fi
	"$w/fleet" load -url "http://127.0.0.1:$PORT/probe?target=" -n "$n" -addr "$SIM_ADDR" -port "$SIM_PORT" -every "$EVERY" -for "$d" | sed "s/^/$n targets: /"
	if [[ -n $pp ]]; then
		wait "$pp"
		p1=$(cpu "$pmproxy")
		sed "s/^/pmproxy ?hostspec=, $PMPROXY_N targets: /" "$w/pmproxy.out"
		echo "pmproxy ?hostspec=, $PMPROXY_N targets: RSS $(($(rss "$pmproxy") / 1024)) MiB, CPU $(echo "($p1 - $p0) / $hz / ($(date +%s.%N) - $t0)" | bc -l | cut -c1-5) cores"
	fi
	t1=$(date +%s.%N)
	c1=$(cpu "$exp")
	s1=$(cpu "$sim")
	r=$(rss "$exp")
	curl -sf -o "$w/metrics-$n.txt" "http://127.0.0.1:$PORT/metrics" || true
	echo "$n targets: exporter RSS $((r / 1024)) MiB, CPU $(echo "($c1 - $c0) / $hz / ($t1 - $t0)" | bc -l | cut -c1-5) cores over the run (first probes read each target's metadata); simulator CPU $(echo "($s1 - $s0) / $hz / ($t1 - $t0)" | bc -l | cut -c1-5) cores"
	rss+=("$r")
	kill "$exp"
	wait "$exp" 2>/dev/null || true
done
small=$((N / 10))
echo "RSS per target: $(((rss[1] - rss[0]) / (N - small))) KiB ($small -> $N targets)"
grep 'unknown requests' "$w/sim.log" | tail -1
