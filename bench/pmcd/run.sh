#!/bin/bash
# pmcd benchmark (issue 23): one scrape of every non-MMV metric the local pmcd
# serves, from pmproxy's /metrics and from `pcp-exporter serve --pmcd`, taken
# in turns in one run (pmproxy, ours over TCP, ours over the unix socket, then
# libpcp's own client): median latency, bytes and samples per scrape, and the
# CPU each scrape costs pmcd itself (from /proc/<pmcd pid>/stat, summed over
# the run: the clock tick is 10 ms), pmproxy, the exporter or the client.
# Ours over TCP reaches pmcd with the credentials pmproxy has (per-process
# metrics are refused alike: the same series, see TestServePMCDMatchesPmproxy);
# over the unix socket as root it also gets every process's values.
# The floor: libpcp_tcp and libpcp_unix are libpcp fetching the very PMIDs
# our scrape fetches in one pmFetch (libpcp_fetch.py, python3-pcp), timed
# around pmFetch alone; "fetch s" is the exporter's own time for its fetch
# (pcp_exporter_source_fetch_duration_seconds of the scrape). pmcd sends a
# fetch to every PMDA before it waits for their answers, so a fetch takes as
# long as its slowest PMDA: the per-agent table times one pmFetch of each
# PMDA's PMIDs alone. The PMDAs' own time (pmdalinux, pmdaproc run as
# separate processes) is in every latency and in neither CPU column.
# Each fetch starts PAUSE seconds after the one before (default 0.3), so
# that pmcd (single-threaded) and its PMDAs are not still busy with the
# previous client's requests, and each round starts one further along.
# The HTTP rows scrape as Prometheus 2.42 (Debian 12's) does (scraper/):
# over a connection kept alive from scrape to scrape, with its Accept header
# (OpenMetrics negotiated), Accept-Encoding: gzip, decompressed by Go's
# compress/gzip as the prometheus binary does ("bytes" are the compressed
# bytes), and its scrape-timeout header. Two more rows scrape ours over TCP
# otherwise: ours_tcp_curl with curl, a new connection (and curl's zlib) per
# scrape, as this script measured before; ours_tcp_identity asking
# Accept-Encoding: identity (what gzip costs both sides). The floor rows
# scrape bench/pmcd/fixed, a server that fetches and renders nothing and
# answers with the exporter's own body (one ours_tcp scrape's, taken before
# the rounds) under its headers: floor_gzip compresses it for each request
# at BestSpeed as the exporter does, floor_pre sends it compressed once,
# floor_hello sends three bytes. libpcp_tcp + floor_gzip is the least any
# exporter of those bytes can take here. ACCEPT=
# "text/plain;version=0.0.4" asks for the plain text format instead;
# ENCODING=identity for no compression in every row.
# usage: bench/pmcd/run.sh   (env: RUNS, PAUSE, PYTHON (with python3-pcp,
# default /usr/bin/python3); needs pcp with pmcd and pmproxy running)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
RUNS=${RUNS:-21}
PAUSE=${PAUSE:-0.3}
PYTHON=${PYTHON:-/usr/bin/python3}
# NAMING: the exporters' --naming (pmproxy: the series pmproxy serves, for
# its row; default: what a default exporter serves)
NAMING=${NAMING:-pmproxy}
# PMPROXY=0 leaves pmproxy's row out (its scrape takes 1-30 s, at load)
PMPROXY=${PMPROXY:-1}
# what Prometheus 2.42.0 sends (captured from its scrape of a listener)
ACCEPT=${ACCEPT:-application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1}
ENCODING=${ENCODING:-gzip}
curl=(curl -s --compressed -H "Accept: $ACCEPT" -H "Accept-Encoding: $ENCODING" -H "X-Prometheus-Scrape-Timeout-Seconds: 10" -A "Prometheus/2.42.0+ds")
work=$(mktemp -d)
cleanup() {
	[[ -n ${e1:-} ]] && kill "$e1" 2>/dev/null
	[[ -n ${e2:-} ]] && kill "$e2" 2>/dev/null
	[[ -n ${lp:-} ]] && kill "$lp" 2>/dev/null
	[[ -n ${sc:-} ]] && kill "$sc" 2>/dev/null
	[[ -n ${fx:-} ]] && kill "$fx" 2>/dev/null
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
(cd "$root" && CGO_ENABLED=0 go build -o "$work/pcp-exporter" ./cmd/pcp-exporter && go build -o "$work/scraper" ./bench/pmcd/scraper && go build -o "$work/fixed" ./bench/pmcd/fixed)
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# every top-level subtree pmcd serves but mmv (event.* are libpcp's own)
subtrees=$(PCP_DERIVED_CONFIG='' pminfo | cut -d. -f1 | sort -u | grep -vx 'mmv\|event' | paste -sd,)
p1=$(freeport) p2=$(freeport) p3=$(freeport)
# every metric: what the lean default leaves out turned on (the PMIDs
# libpcp_fetch.py fetches; checked below against the exporter's count)
with=()
for n in proc hotproc acct pmcd.client pmcd.pmlogger pmcd.pmie mem.slabinfo mem.zoneinfo mem.buddyinfo mem.numa kernel.percpu.interrupts instant-strings; do
	with+=(--mapping.with="$n")
done
"$work/pcp-exporter" serve --pmcd=127.0.0.1 --pmcd.metrics=-mmv "${with[@]}" --naming="$NAMING" --web.listen-address=127.0.0.1:"$p1" --log.level=info > "$work/e1.log" 2>&1 &
e1=$!
"$work/pcp-exporter" serve --pmcd=local: --pmcd.metrics=-mmv "${with[@]}" --naming="$NAMING" --web.listen-address=127.0.0.1:"$p2" --log.level=info > "$work/e2.log" 2>&1 &
e2=$!
# libpcp's client: one pmFetch per line written to it, its time read back;
# with another naming than pmproxy's the exporters export the string
# metrics too, but for the secrets (mapping/lean.go's Secrets), and so does
# it fetch them
if [[ $NAMING != pmproxy ]]; then
	LIBPCP_STRINGS=1 LIBPCP_SKIP=$(awk '/^var Secrets = /,/^}/' "$root/mapping/lean.go" | grep -o '"[^"]*"' | tr -d '"' | paste -sd' ')
	export LIBPCP_STRINGS LIBPCP_SKIP
fi
coproc LIBPCP { exec "$PYTHON" "$here/libpcp_fetch.py"; }
lp=$LIBPCP_PID
# Prometheus's scrape: one per line written to it, its times read back
coproc SCRAPER { exec "$work/scraper" -accept "$ACCEPT"; }
sc=$SCRAPER_PID
# scrape ENCODING URL BODYFILE [HEADERFILE]: "seconds bytes" of one scrape
scrape() {
	echo "$*" >&"${SCRAPER[1]}"
	local t n
	read -r -u "${SCRAPER[0]}" t _ n
	echo "$t $n"
}
doms=() npmids=0
declare -A agent dompmids
while read -r -u "${LIBPCP[0]}" w d n c; do
	case $w in
	agent) doms+=("$d") agent[$d]=$n dompmids[$d]=$c ;;
	pmids) npmids=$d ;;
	ready) break ;;
	esac
done
# the exporters have read pmcd's metadata (up to 3 minutes at load)
for p in "$p1" "$p2"; do
	for _ in $(seq 180); do
		curl -s "http://127.0.0.1:$p/metrics" | grep -q '^pcp_exporter_metrics_exported{.*} [1-9]' && break
		sleep 1
	done
done
# the floor server answers with the body of one scrape of ours over TCP
scrape "$ENCODING" "http://127.0.0.1:$p1/metrics" "$work/fixed.txt" > /dev/null
"$work/fixed" 127.0.0.1:"$p3" "$work/fixed.txt" &
fx=$!
for _ in $(seq 50); do
	curl -s "http://127.0.0.1:$p3/hello" > /dev/null && break
	sleep 0.1
done
load0=$(cut -d" " -f1-3 /proc/loadavg)
pmcd=$(cat /run/pcp/pmcd.pid 2>/dev/null || pgrep -x pmcd | head -1)
pmproxy=$(pgrep -x pmproxy | head -1)
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
labels=(pmproxy ours_tcp ours_unix libpcp_tcp libpcp_unix ours_tcp_curl ours_tcp_identity floor_gzip floor_pre floor_hello)
urls=("http://127.0.0.1:44322/metrics?names=$subtrees" "http://127.0.0.1:$p1/metrics" "http://127.0.0.1:$p2/metrics" tcp unix "http://127.0.0.1:$p1/metrics" "http://127.0.0.1:$p1/metrics"
	"http://127.0.0.1:$p3/gzip" "http://127.0.0.1:$p3/pre" "http://127.0.0.1:$p3/hello")
servers=("$pmproxy" "$e1" "$e2" "$lp" "$lp" "$e1" "$e1" "$fx" "$fx" "$fx")
encodings=("$ENCODING" "$ENCODING" "$ENCODING" - - "$ENCODING" identity "$ENCODING" "$ENCODING" "$ENCODING")
rows=${#labels[@]}
# one scrape of row i: "seconds bytes"; the body to $work/LABEL.txt
# (headers to $work/LABEL.headers when a second argument is given)
http() {
	local i=$1 out=$work/${labels[$1]}.txt
	if ((i == 5)); then
		"${curl[@]}" ${2:+-D "$work/${labels[$i]}.headers"} -o "$out" -w '%{time_total} %{size_download}' "${urls[$i]}"
	else
		scrape "${encodings[$i]}" "${urls[$i]}" "$out" ${2:+"$work/${labels[$i]}.headers"}
	fi
}
ishttp() { (($1 < 3 || $1 > 4)); }
# one fetch by libpcp: its seconds
libpcp() {
	echo "$1" >&"${LIBPCP[1]}"
	local t
	read -r -u "${LIBPCP[0]}" t
	echo "$t"
}
declare -A pmcdT serverT
for ((i = 0; i < rows; i++)); do
	if ((i == 0 && PMPROXY == 0)); then
		pmcdT[0]=0 serverT[0]=0
		: > "$work/${labels[0]}.headers"
		echo "0 0 0 -" > "$work/${labels[0]}.rows"
		continue
	fi
	if ishttp $i; then http $i headers > /dev/null; else libpcp "${urls[$i]}" > /dev/null; fi # warm: metadata read
	pmcdT[$i]=0 serverT[$i]=0
	: > "$work/${labels[$i]}.rows"
done
for r in $(seq 1 "$RUNS"); do
	# each round starts with the next one, so that none always follows
	# pmproxy (whose scrape leaves pmcd and the PMDAs busiest)
	for ((k = 0; k < rows; k++)); do
		i=$(((k + r) % rows))
		((i == 0 && PMPROXY == 0)) && continue
		sleep "$PAUSE"
		a=$(ticks "$pmcd") s=$(ticks "${servers[$i]}")
		if ishttp $i; then
			w=$(http $i)
		else
			w="$(libpcp "${urls[$i]}") 0"
		fi
		b=$(ticks "$pmcd") t=$(ticks "${servers[$i]}")
		pmcdT[$i]=$((pmcdT[$i] + b - a)) serverT[$i]=$((serverT[$i] + t - s))
		if ishttp $i; then
			f=-
			[[ ${labels[$i]} == floor_* ]] || f=$(awk '/^pcp_exporter_source_fetch_duration_seconds/ {print $NF}' "$work/${labels[$i]}.txt")
			echo "$w $(grep -vc '^#' "$work/${labels[$i]}.txt") ${f:--}" >> "$work/${labels[$i]}.rows"
		else
			echo "$w $npmids ${w% *}" >> "$work/${labels[$i]}.rows"
		fi
	done
	# the floor each PMDA sets: its PMIDs alone
	for how in tcp unix; do
		for d in "${doms[@]}"; do
			sleep "$PAUSE"
			libpcp "$how:$d" >> "$work/$how-$d.rows"
		done
	done
done
med() { awk -v c="$2" '{print $c}' "$1" | sort -g | awk '{a[NR]=$1} END {print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
cpu() { awk -v t="$1" -v n="$RUNS" -v hz="$hz" 'BEGIN{print 1000*t/hz/n}'; }
printf '%-28s %10s %10s %10s %9s %14s %14s\n' "scrape (non-MMV metrics)" "latency s" "fetch s" "bytes" "samples" "pmcd CPU ms" "client CPU ms"
for ((i = 0; i < rows; i++)); do
	r=$work/${labels[$i]}.rows
	f=$(med "$r" 4)
	[[ $i == 0 ]] && f=-
	printf '%-28s %10.4f %10s %10d %9d %14.2f %14.2f\n' "${labels[$i]}" "$(med "$r" 1)" "$f" "$(med "$r" 2)" "$(med "$r" 3)" \
		"$(cpu "${pmcdT[$i]}")" "$(cpu "${serverT[$i]}")"
	eval "wall_$i=$(med "$r" 1)"
done
exported=$(awk '/^pcp_exporter_metrics_exported/ {printf "%d", $NF}' "$work/ours_tcp.txt")
echo "(libpcp rows: one pmFetch of the same $npmids PMIDs our scrape fetches ($exported metrics exported over TCP); samples = PMIDs, bytes not measured)"
[[ $exported == "$npmids" ]] || echo "WARNING: ours_tcp exports $exported metrics, libpcp fetches $npmids PMIDs: not the same fetch"
printf '%-28s %7s %10s %10s\n' "one pmFetch per PMDA" "pmids" "tcp s" "unix s"
for d in "${doms[@]}"; do
	printf '%-28s %7d %10.4f %10.4f\n' "${agent[$d]} ($d)" "${dompmids[$d]}" "$(med "$work/tcp-$d.rows" 1)" "$(med "$work/unix-$d.rows" 1)"
done
for i in 0 1 2 5 6; do
	echo "${labels[$i]} answered: $(grep -i '^content-\(type\|encoding\):' "$work/${labels[$i]}.headers" | tr -d '\r' | paste -sd' ')"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.'"${3:-0}"'f", a/b}'; }
# shellcheck disable=SC2154
echo "latency ratio pmproxy/ours: $(ratio "$wall_0" "$wall_1")x (TCP, same series), $(ratio "$wall_0" "$wall_2")x (unix socket, every process too)"
# shellcheck disable=SC2154
echo "ours/libpcp floor: $(ratio "$wall_1" "$wall_3" 2) (TCP), $(ratio "$wall_2" "$wall_4" 2) (unix socket); pmproxy/libpcp: $(ratio "$wall_0" "$wall_3")x (TCP)"
# shellcheck disable=SC2154
echo "ours over TCP otherwise, /libpcp floor: $(ratio "$wall_5" "$wall_3" 2) (curl, a new connection per scrape), $(ratio "$wall_6" "$wall_3" 2) (no compression: gzip costs $(awk -v a="$wall_1" -v b="$wall_6" 'BEGIN{printf "%.1f", (a-b)*1000}') ms)"
# shellcheck disable=SC2154
awk -v o="$wall_1" -v l="$wall_3" -v g="$wall_7" -v p="$wall_8" -v h="$wall_9" 'BEGIN{
	printf "floor (bench/pmcd/fixed, ours_tcp'"'"'s body): libpcp_tcp + floor_gzip = %.1f ms, %.2fx libpcp_tcp\n", (l+g)*1000, (l+g)/l
	printf "ours_tcp beyond libpcp_tcp: %.2f ms = HTTP %.2f (floor_hello) + decompression and transfer %.2f (floor_pre - floor_hello) + compression %.2f (floor_gzip - floor_pre) + ours %.2f (fetch decoding, rendering, self-metrics: the rest; differences of medians of different scrapes, so pmcd'"'"'s swings from one fetch to the next land here)\n", (o-l)*1000, h*1000, (p-h)*1000, (g-p)*1000, (o-l-g)*1000 }'
flags() { grep -o 'flags=0x[0-9a-f]*' "$1" | sort | uniq -c | awk '{printf " %s x%d", $2, $1}'; }
echo "metadata read again after pmcd flagged a change (off the scrape path): $(grep -c 'metadata read again' "$work/e1.log" || true) (TCP;$(flags "$work/e1.log")), $(grep -c 'metadata read again' "$work/e2.log" || true) (unix socket;$(flags "$work/e2.log"))"
echo "pmcd CPU per scrape, ours/pmproxy: $(awk -v a="${pmcdT[1]}" -v b="${pmcdT[0]}" 'BEGIN{ if (b > 0) printf "%.3f", a/b; else print "-" }') (TCP), $(awk -v a="${pmcdT[2]}" -v b="${pmcdT[0]}" 'BEGIN{ if (b > 0) printf "%.3f", a/b; else print "-" }') (unix socket)"
echo "goals: median <= 20 ms, >= 50x faster than pmproxy, pmcd CPU <= 1/10 of pmproxy's, ours_tcp <= 1.5x libpcp_tcp (RUNS=$RUNS, PAUSE=$PAUSE, load average $load0 at start, $(cut -d" " -f1-3 /proc/loadavg) at end)"
