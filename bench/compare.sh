#!/bin/bash
# bench/compare.sh: the work users run, by two builds of pcp-exporter side by
# side in one run (issue 26: "make bench at the end against make bench at the
# start"). BASE (a commit) and the working tree are built; each workload is
# run by both in turns, RUNS times after one warm-up each, so a machine whose
# speed drifts affects both alike. Medians of wall time, CPU (user+sys) and
# peak RSS, and the ratio head/base (< 1: faster).
#   decode   `dump` of W2 (v2 and v3) to /dev/null
#   replay   59 metrics of W2 at 1 s (bench/replay/metrics.txt); every
#            metric of W2 at 100 ms; every metric of the 1 GB long archive at 1 s
#   backfill W2 at a 1 s step into TSDB blocks
#   scrape   W1 (100,000 MMV values, bench/scrape/mmvwriter.c) with
#            Prometheus's Accept header and gzip, and as plain text, from two
#            exporters serving the same file; two small MMV files of the
#            corpus (17 values: a sidecar's scrape, where the exporter's own
#            metrics are most of the work); then every metric of the local
#            pmcd over TCP (as bench/pmcd/run.sh) as Prometheus asks (latency; exporter CPU per
#            scrape from /proc; peak RSS)
# Every workload's output is compared between the builds first (cmp; the
# blocks by their sample count), so a speed-up never hides a change.
# usage: bench/compare.sh BASE [OUTPUT]   (env: W2_DIR, RUNS (default 11))
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=${1:?usage: bench/compare.sh BASE [OUTPUT]}
out=${2:-/dev/stdout}
RUNS=${RUNS:-11}
MEASURE=$(mktemp -d)/measure
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
need_long
w2=$W2_DIR/w2v2
w=$(mktemp -d)
pids=()
mmvdir=/var/lib/pcp/tmp/mmv
name=pcpxcompare
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -f "$mmvdir/$name"
	rm -rf "$w" "$(dirname "$MEASURE")"
}
trap cleanup EXIT

rev=$(git -C "$root" rev-parse --short "$base")
head=$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- . 2>/dev/null || echo "+dirty")
mkdir -p "$w/src"
git -C "$root" archive "$base" | tar -x -C "$w/src"
(cd "$w/src" && CGO_ENABLED=0 go build -o "$w/base" ./cmd/pcp-exporter)
(cd "$root" && CGO_ENABLED=0 go build -o "$w/head" ./cmd/pcp-exporter)

m4=$(paste -sd' ' "$root/bench/replay/metrics.txt")

# run_cmd BIN CMD: CMD with {bin} replaced, under GNU time; prints "wall cpu rss"
run_cmd() {
	local c=${2//\{bin\}/$1} t0 t1
	t0=$EPOCHREALTIME
	/usr/bin/time -f '%U %S %M' -o "$w/time" bash -c "$c" > /dev/null 2>> "$w/errors"
	t1=$EPOCHREALTIME
	awk -v a="$t0" -v b="$t1" '{printf "%.4f %.2f %d\n", b - a, $1 + $2, $3}' "$w/time"
}
med() { awk -v c="$2" '{print $c}' "$1" | median; }
rows=()
# row LABEL: a table row from the medians in $w/r.base and $w/r.head
row() {
	rows+=("$(printf '%-40s %9.4f %9.4f %7.3f %8.2f %8.2f %9.1f %9.1f' "$1" \
		"$(med "$w/r.base" 1)" "$(med "$w/r.head" 1)" \
		"$(awk -v a="$(med "$w/r.base" 1)" -v b="$(med "$w/r.head" 1)" 'BEGIN{print b/a}')" \
		"$(med "$w/r.base" 2)" "$(med "$w/r.head" 2)" \
		"$(awk -v k="$(med "$w/r.base" 3)" 'BEGIN{print k/1024}')" "$(awk -v k="$(med "$w/r.head" 3)" 'BEGIN{print k/1024}')")")
}
# workload LABEL CMD: runs CMD by both builds in turns; a CMD of plain
# words runs under bench/measure (no shell or time(1) in between, which
# would add their start to a run of tens of milliseconds)
workload() {
	local label=$1 cmd=$2
	echo "running: $label" >&2
	if [[ $cmd != *[\&\|\>\<\;]* ]]; then
		measure_side "$RUNS" "${cmd//\{bin\}/$w/base}" "${cmd//\{bin\}/$w/head}"
		echo "${WALL[0]} ${CPU[0]} ${RSS[0]}" > "$w/r.base"
		echo "${WALL[1]} ${CPU[1]} ${RSS[1]}" > "$w/r.head"
		row "$label"
		return
	fi
	: > "$w/r.base"
	: > "$w/r.head"
	run_cmd "$w/base" "$cmd" > /dev/null
	run_cmd "$w/head" "$cmd" > /dev/null
	for _ in $(seq 1 "$RUNS"); do
		run_cmd "$w/base" "$cmd" >> "$w/r.base"
		run_cmd "$w/head" "$cmd" >> "$w/r.head"
	done
	row "$label"
}
# same_output CMD: the two builds' stdout must be the same. The CSV of
# `replay` gained an instance_id column (issue 22); it is dropped before the
# comparison so a base from before it compares too.
csv_norm() { awk -F, 'NR == 1 && $3 == "instance_id" {drop = 1} drop {OFS = ","; $3 = ""; sub(/,,/, ",")} {print}'; }
same_output() {
	local c=$1
	bash -c "${c//\{bin\}/$w/base}" 2>/dev/null | csv_norm > "$w/o.base"
	bash -c "${c//\{bin\}/$w/head}" 2>/dev/null | csv_norm > "$w/o.head"
	if ! cmp -s "$w/o.base" "$w/o.head"; then
		echo "compare: the builds' outputs differ for: $c" >&2
		echo "(output differs: $c)" >> "$w/notes"
	fi
}

for v in w2v2 w2v3; do
	same_output "{bin} dump $W2_DIR/$v"
	workload "decode: dump $v" "{bin} dump $W2_DIR/$v"
done
same_output "{bin} replay $w2 --interval 1s --interp prior $m4"
workload "replay: W2, 59 metrics, 1 s" "{bin} replay $w2 --interval 1s --interp prior $m4"
same_output "{bin} replay $w2 --interval 100ms"
workload "replay: W2, every metric, 100 ms" "{bin} replay $w2 --interval 100ms"
same_output "{bin} replay $LONG --interval 1s"
workload "replay: 1 GB archive, every metric, 1 s" "{bin} replay $LONG --interval 1s"
for b in base head; do
	rm -rf "$w/blocks"
	"$w/$b" backfill "$w2" --step 1s --quiet --output "tsdb:$w/blocks" > /dev/null
	promtool tsdb list "$w/blocks" | awk 'NR>1 {s+=$5; n+=$7} END {print s+0, "samples", n+0, "series"}' > "$w/samples.$b"
done
cmp -s "$w/samples.base" "$w/samples.head" || echo "(backfill blocks differ: $(cat "$w/samples.base") against $(cat "$w/samples.head"))" >> "$w/notes"
workload "backfill: W2 at 1 s into TSDB blocks" "rm -rf $w/blocks && exec {bin} backfill $w2 --step 1s --quiet --output tsdb:$w/blocks"

# scrape: W1 served by both builds at once
gcc -O2 -Wall -o "$w/mmvwriter" "$root/bench/scrape/mmvwriter.c" -lpcp_mmv -lpcp -lm
"$w/mmvwriter" "$name" 1000 100 333 > "$w/writer.out" 2>&1 &
pids+=($!)
sleep 3
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
declare -A url spid
for b in base head; do
	port=$(freeport)
	"$w/$b" serve --mmv.dir="$mmvdir" --web.listen-address="127.0.0.1:$port" --log.level=warn >> "$w/exporter.log" 2>&1 &
	spid[$b]=$!
	pids+=($!)
	url[$b]="http://127.0.0.1:$port/metrics"
	until curl -sf -o /dev/null "http://127.0.0.1:$port/-/ready"; do sleep 0.1; done
done
accept='application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1'
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
hwm() { awk '/VmHWM/{print $2}' "/proc/$1/status"; }
# scrapes LABEL ACCEPT GZIP: RUNS*3 scrapes of each build's url in turns,
# as ACCEPT asks, gzip-compressed if GZIP is 1; a row of the median
# latency, the exporter's mean CPU per scrape (its ticks over all the
# scrapes: one tick, 10 ms, is more than many a scrape takes) and the
# exporters' peak RSS so far
scrapes() {
	local label=$1 acc=$2 gz=$3 b t0 t1 l
	local -A cpu=([base]=0 [head]=0)
	local -a hdr=(-H "Accept: $acc")
	[[ $gz == 1 ]] && hdr+=(-H 'Accept-Encoding: gzip')
	echo "running: $label" >&2
	for b in base head; do
		: > "$w/s.$b"
		curl -s -o /dev/null "${hdr[@]}" "${url[$b]}"
	done
	for _ in $(seq 1 $((RUNS * 3))); do
		for b in base head; do
			t0=$(ticks "${spid[$b]}")
			l=$(curl -s -o "$w/body.$b" -w '%{time_total}' "${hdr[@]}" "${url[$b]}")
			t1=$(ticks "${spid[$b]}")
			cpu[$b]=$((cpu[$b] + t1 - t0))
			if [[ $gz == 1 ]]; then gzip -dc "$w/body.$b" > "$w/plain.$b"; else cp "$w/body.$b" "$w/plain.$b"; fi
			echo "$l $(awk -v d=$((t1 - t0)) -v hz="$hz" 'BEGIN{print d/hz}') $(grep -vc '^#' "$w/plain.$b")" >> "$w/s.$b"
			sleep 0.2
		done
	done
	rows+=("$(printf '%-40s %9.4f %9.4f %7.3f %8.3f %8.3f %9.1f %9.1f' "$label" \
		"$(med "$w/s.base" 1)" "$(med "$w/s.head" 1)" \
		"$(awk -v a="$(med "$w/s.base" 1)" -v b="$(med "$w/s.head" 1)" 'BEGIN{print b/a}')" \
		"$(awk -v t="${cpu[base]}" -v n=$((RUNS * 3)) -v hz="$hz" 'BEGIN{print t/hz/n}')" \
		"$(awk -v t="${cpu[head]}" -v n=$((RUNS * 3)) -v hz="$hz" 'BEGIN{print t/hz/n}')" \
		"$(awk -v k="$(hwm "${spid[base]}")" 'BEGIN{print k/1024}')" "$(awk -v k="$(hwm "${spid[head]}")" 'BEGIN{print k/1024}')")")
	[[ $(med "$w/s.base" 3) == "$(med "$w/s.head" 3)" ]] || echo "($label: samples differ: $(med "$w/s.base" 3) against $(med "$w/s.head" 3))" >> "$w/notes"
}
scrapes "scrape: W1 100k values, OpenMetrics gzip" "$accept" 1
scrapes "scrape: W1 100k values, text" 'text/plain;version=0.0.4' 0

# two small MMV files of the corpus (17 values; their writers are gone,
# so pmdammv's PROCESS check is off)
small=$w/small-mmv
mkdir -p "$small"
cp "$root/testdata/pcp-corpus/mmv/files/corpusv2" "$root/testdata/pcp-corpus/mmv/files/corpusv3" "$small/"
for b in base head; do
	kill "${spid[$b]}" 2>/dev/null || true
	port=$(freeport)
	"$w/$b" serve --mmv.dir="$small" --no-mmv.pid-check --web.listen-address="127.0.0.1:$port" --log.level=warn >> "$w/exporter.log" 2>&1 &
	spid[$b]=$!
	pids+=($!)
	url[$b]="http://127.0.0.1:$port/metrics"
	until curl -sf -o /dev/null "http://127.0.0.1:$port/-/ready"; do sleep 0.1; done
done
scrapes "scrape: 2 small MMV files, OM gzip" "$accept" 1

# pmcd: every metric of the local pmcd over TCP but mmv's (what the lean
# default leaves out turned on, as bench/pmcd/run.sh asks), by both builds
with=()
for n in proc hotproc acct pmcd.client pmcd.pmlogger pmcd.pmie mem.slabinfo mem.zoneinfo mem.buddyinfo mem.numa kernel.percpu.interrupts instant-strings; do
	with+=(--mapping.with="$n")
done
for b in base head; do
	kill "${spid[$b]}" 2>/dev/null || true
	port=$(freeport)
	"$w/$b" serve --pmcd=127.0.0.1 --pmcd.metrics=-mmv "${with[@]}" --naming=pmproxy --web.listen-address="127.0.0.1:$port" --log.level=warn >> "$w/exporter.log" 2>&1 &
	spid[$b]=$!
	pids+=($!)
	url[$b]="http://127.0.0.1:$port/metrics"
	# up, and its metadata read (kernel.all.load served)
	for _ in $(seq 1 300); do
		curl -s "${url[$b]}" | grep -q '^kernel_all_load{' && break
		sleep 0.2
	done
done
scrapes "scrape: pmcd every metric (TCP), OM gzip" "$accept" 1

{
	echo "bench/compare.sh $base: base $rev against head $head, RUNS=$RUNS (scrape: $((RUNS * 3)) scrapes each), $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
	printf '%-40s %9s %9s %7s %8s %8s %9s %9s\n' "workload (medians)" "base s" "head s" "head/b" "CPU b" "CPU h" "RSS b MiB" "RSS h MiB"
	printf '%s\n' "${rows[@]}"
	echo "(scrape: CPU is the exporter's mean per scrape, RSS the exporter's peak over the scrapes)"
	if [[ -s $w/notes ]]; then cat "$w/notes"; else echo "outputs: identical for every workload (cmp; backfill by sample count; scrape by samples)"; fi
} > "$out"
