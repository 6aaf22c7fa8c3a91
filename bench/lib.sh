# shellcheck shell=bash disable=SC2034
# bench/lib.sh: helpers shared by the bench/*/run.sh scripts (sourced).
#
# measure LABEL N CMD   runs CMD (bash -c) N times under GNU time after one
#                       warm-up run and sets MED_WALL (s, to the microsecond),
#                       MED_CPU (user+sys s, to the centisecond)
#                       and MED_RSS (max RSS, KiB) to the medians.
# measure_side N CMD... runs single commands (plain words, no shell syntax)
#                       in turns with bench/measure (no shell or time(1) in
#                       between, so a fast command is not charged their start;
#                       a machine whose speed drifts during the bench affects
#                       every command alike) and sets the arrays WALL, CPU and
#                       RSS (medians, by command); it builds bench/measure
#                       into $MEASURE on first use.
# W2_DIR                workload W2 (pmlogger, 186 MB), recorded by
#                       bench/decode/record-w2.sh when absent (needs pcp).
W2_DIR=${W2_DIR:-/tmp/pcpx-bench/w2}
RUNS=${RUNS:-5}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

measure() {
	local label=$1 n=$2 cmd=$3 tf
	tf=$(mktemp)
	bash -c "$cmd" >/dev/null 2>&1 || { echo "measure: $label failed: $cmd" >&2; rm -f "$tf"; return 1; }
	: > "$tf.all"
	local t0 t1
	for _ in $(seq 1 "$n"); do
		# wall time to the microsecond (GNU time's %e has centiseconds,
		# too coarse for runs of tens of milliseconds); CPU and RSS from time
		t0=$EPOCHREALTIME
		/usr/bin/time -f '%U %S %M' -o "$tf" bash -c "$cmd" >/dev/null 2>&1
		t1=$EPOCHREALTIME
		echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }') $(tail -1 "$tf")" >> "$tf.all"
	done
	MED_WALL=$(awk '{print $1}' "$tf.all" | median)
	MED_CPU=$(awk '{print $2+$3}' "$tf.all" | median)
	MED_RSS=$(awk '{print $4}' "$tf.all" | median)
	rm -f "$tf" "$tf.all"
}

measure_side() {
	local n=$1 c args=() words out w cpu rss
	shift
	if [[ ! -x ${MEASURE:?set MEASURE to where bench/measure is built} ]]; then
		(cd "$(dirname "${BASH_SOURCE[0]}")/.." && CGO_ENABLED=0 go build -o "$MEASURE" ./bench/measure)
	fi
	for c in "$@"; do
		[[ ${#args[@]} -gt 0 ]] && args+=(":::")
		read -r -a words <<< "$c"
		args+=("${words[@]}")
	done
	out=$("$MEASURE" -n "$n" -- "${args[@]}") || { echo "measure_side failed: $*" >&2; return 1; }
	WALL=() CPU=() RSS=()
	while read -r w cpu rss; do
		WALL+=("$w") CPU+=("$cpu") RSS+=("$rss")
	done <<< "$out"
}

need_w2() {
	if [[ ! -s $W2_DIR/w2v2.0 ]]; then
		echo "recording W2 into $W2_DIR (5 minutes) ..." >&2
		"$(dirname "${BASH_SOURCE[0]}")/decode/record-w2.sh" "$W2_DIR" 5min
	fi
}

# need_long: sets LONG to the long archive (W2 six times end to end:
# pmlogrewrite shifts each copy by 5m10s, pmlogextract joins them into
# volumes of 5,000 records; over 1 GB), generating it under $W2_DIR when absent.
need_long() {
	need_w2
	local parts k sec
	LONG=$W2_DIR/long/w2x6
	if [[ ! -s $LONG.meta ]]; then
		echo "generating $LONG (6 x W2) ..." >&2
		mkdir -p "$W2_DIR/long"
		parts=("$W2_DIR/w2v2")
		for k in 1 2 3 4 5; do
			sec=$((k * 310))
			printf 'global {\n    TIME -> +%d:%02d:%02d\n}\n' $((sec / 3600)) $((sec % 3600 / 60)) $((sec % 60)) > "$W2_DIR/long/shift$k.conf"
			rm -f "$W2_DIR/long/part$k".*
			/usr/lib/pcp/bin/pmlogrewrite -c "$W2_DIR/long/shift$k.conf" "$W2_DIR/w2v2" "$W2_DIR/long/part$k"
			parts+=("$W2_DIR/long/part$k")
		done
		/usr/lib/pcp/bin/pmlogextract -v 5000 "${parts[@]}" "$LONG"
		rm -f "$W2_DIR/long/part"*
	fi
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1fx", a / b; else print "-" }'; }
