#!/usr/bin/env bash
# hotpath.sh: what one message costs the broker on the hot path, measured
# two ways, for one or more broker binaries side by side (issue 30):
#
#   cpu  the broker's user + system CPU time per send or per delivery +
#        completion (omnibus-tools bench --broker-pid), a fresh broker
#        and data directory per run. Wall-clock noise of a shared machine
#        moves it by ±10 %; interleave the binaries and take medians.
#   ir   instructions the broker executes per message, counted by valgrind
#        (callgrind), zeroed before and dumped after the measured phase:
#        user-space instructions only (the kernel's socket and fsync work
#        is not in it), and independent of what else runs on the machine.
#        Under valgrind the broker runs ~50× slower, so more messages
#        share each group commit than natively: compare builds with it,
#        not with the cpu figures.
#
# Usage: hotpath.sh BROKER [BROKER...]     (binaries built with CGO_ENABLED=0;
#                                            the release build is)
# Environment:
#   MODES="cpu ir"        which measurements
#   SCENARIOS="send send-direct receive receive-direct send-12b receive-12b send-64k receive-64k"
#   REPS=3                runs per binary and scenario (interleaved)
#   COUNT=100000          messages per cpu run (64 KiB: COUNT/10)
#   IRCOUNT=10000         messages per ir run (64 KiB: IRCOUNT/10)
#   TOOLS=path            omnibus-tools to drive it (default: built from this tree)
#   OUT=dir               raw results (default: a new /tmp directory)
# Prints one TSV line per run (binary, scenario, rep, mode, value per
# message) and a table of medians.
set -euo pipefail

MODES=${MODES:-cpu ir}
SCENARIOS=${SCENARIOS:-send send-direct receive receive-direct send-12b receive-12b send-64k receive-64k}
REPS=${REPS:-3}
COUNT=${COUNT:-100000}
IRCOUNT=${IRCOUNT:-10000}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
OUT=${OUT:-$(mktemp -d /tmp/omnibus-hotpath.XXXXXX)}
mkdir -p "$OUT"
[ $# -ge 1 ] || {
	echo "usage: $0 BROKER [BROKER...]" >&2
	exit 2
}
case " $MODES " in *" ir "*)
	command -v valgrind >/dev/null && command -v callgrind_control >/dev/null || {
		echo "MODES=ir needs valgrind (Debian: apt-get install valgrind), or run with MODES=cpu" >&2
		exit 2
	}
	;;
esac
TMP=$(mktemp -d /tmp/omnibus-hotpath-run.XXXXXX)
if [ -z "${TOOLS:-}" ]; then
	TOOLS=$TMP/omnibus-tools
	(cd "$ROOT" && go build -o "$TOOLS" ./cmd/omnibus-tools)
fi

PID=
stop() {
	if [ -n "$PID" ]; then
		kill -TERM "$PID" 2>/dev/null || true
		wait "$PID" 2>/dev/null || true
		PID=
	fi
}
cleanup() {
	stop
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "== $*" >&2; }

PORT=$((20000 + RANDOM % 20000))
cat >"$TMP/cfg.json" <<EOF
{"UserConfig":{"Logging":{"Type":"Console"},"Namespaces":[{"Name":"sbemulatorns","Queues":[
{"Name":"hot","Properties":{"MaxDeliveryCount":10,"LockDuration":"PT5M","MaxSizeInMegabytes":81920}}],"Topics":[]}]}}
EOF

# start BIN [valgrind] starts a fresh broker and waits for its port.
start() {
	local bin=$1 vg=${2:-}
	rm -rf "$TMP/data"
	local cmd=("$bin" --data "$TMP/data" --amqp-addr "127.0.0.1:$PORT" --http-addr - --https-addr - --amqps-addr -
		--metrics-addr - --config "$TMP/cfg.json" --log-level warn)
	if [ -n "$vg" ]; then
		# Go's asynchronous preemption signals trip callgrind's signal
		# bookkeeping; the broker runs without them under valgrind.
		GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.%p" "${cmd[@]}" >"$TMP/broker.log" 2>&1 &
	else
		"${cmd[@]}" >"$TMP/broker.log" 2>&1 &
	fi
	PID=$!
	local i
	for i in $(seq 1 600); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then return 0; fi
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.1
	done
	cat "$TMP/broker.log" >&2
	echo "broker did not start" >&2
	exit 1
}

# flags SCENARIO N MODE: the bench flags of a scenario's measured phase.
# A cpu run's receive fills the queue itself (bench counts the CPU of its
# receiving only); an ir run's drains what fill put in before the zeroing.
flags() {
	local scen=$1 n=$2 mode=$3 size=1024 extra=()
	case $scen in *-12b) size=12 ;; *-64k) size=65536 n=$((n / 10)) ;; esac
	case $scen in *-direct) extra=(--direct-writes) ;; esac
	case $scen/$mode in
	send*) echo "--scenario send --inflight 100 --count $n --size $size ${extra[*]}" ;;
	receive*/cpu) echo "--scenario receive --prefill $n --credit 100 --batch-credit --size $size ${extra[*]}" ;;
	receive*/ir) echo "--scenario drain --credit 100 --batch-credit --drain-timeout 2s --size $size ${extra[*]}" ;;
	esac
}

# fill SCENARIO N: for a receive scenario, what its queue holds first.
fill() {
	local scen=$1 n=$2 size=1024
	case $scen in receive*) ;; *) return 0 ;; esac
	case $scen in *-12b) size=12 ;; *-64k) size=65536 n=$((n / 10)) ;; esac
	"$TOOLS" bench --url "amqp://127.0.0.1:$PORT" --queue hot --durable --quiet --scenario send --inflight 500 \
		--count "$n" --size "$size" >"$TMP/fill.txt" 2>&1 || {
		cat "$TMP/fill.txt" >&2
		exit 1
	}
}

json() { sed -n "s/^ *\"$1\": \\([0-9.e+-]*\\),*$/\\1/p" "$2" | head -1; }

run_cpu() {
	local bin=$1 scen=$2 rep=$3 f=$OUT/cpu__$(basename "$1")__${2}__$3
	start "$bin"
	# shellcheck disable=SC2046
	"$TOOLS" bench --url "amqp://127.0.0.1:$PORT" --queue hot --durable --quiet --broker-pid "$PID" \
		$(flags "$scen" "$COUNT" cpu) --json "$f.json" >"$f.txt" 2>&1 || log "$(tail -1 "$f.txt")"
	stop
	local cpu ops
	cpu=$(json brokerCpuSeconds "$f.json")
	ops=$(json operations "$f.json")
	awk -v c="$cpu" -v n="$ops" 'BEGIN { if (n > 0) printf "%.2f", c * 1e6 / n; else printf "?" }'
}

run_ir() {
	local bin=$1 scen=$2 rep=$3 f=$OUT/ir__$(basename "$1")__${2}__$3
	start "$bin" valgrind
	fill "$scen" "$IRCOUNT"
	callgrind_control -z "$PID" >/dev/null
	# shellcheck disable=SC2046
	"$TOOLS" bench --url "amqp://127.0.0.1:$PORT" --queue hot --durable --quiet \
		$(flags "$scen" "$IRCOUNT" ir) --json "$f.json" >"$f.txt" 2>&1 || log "$(tail -1 "$f.txt")"
	# Let the flush and compaction the run set off finish inside the
	# window: they are the message's cost too.
	sleep 5
	rm -f "$TMP"/cg.*
	callgrind_control -d "$PID" >/dev/null
	sleep 1
	local ir ops
	ir=$(callgrind_annotate "$(ls "$TMP"/cg.*.1)" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
	cp "$(ls "$TMP"/cg.*.1)" "$f.callgrind"
	stop
	ops=$(json operations "$f.json")
	[ -n "$ops" ] && [ "$ops" != 0 ] || ops=$(json received "$f.json")
	awk -v c="$ir" -v n="$ops" 'BEGIN { if (n > 0) printf "%.0f", c / n; else printf "?" }'
}

: >"$OUT/runs.tsv"
for rep in $(seq 1 "$REPS"); do
	for scen in $SCENARIOS; do
		for mode in $MODES; do
			for bin in "$@"; do
				log "$mode $scen $(basename "$bin") rep $rep (load $(cut -d' ' -f1 /proc/loadavg))"
				v=$("run_$mode" "$bin" "$scen" "$rep")
				printf '%s\t%s\t%s\t%s\t%s\n' "$(basename "$bin")" "$scen" "$rep" "$mode" "$v" | tee -a "$OUT/runs.tsv"
			done
		done
	done
done

echo
echo "| scenario | measure | $(for b in "$@"; do printf '%s | ' "$(basename "$b")"; done)"
echo "|---|---|$(for _ in "$@"; do printf -- '---:|'; done)"
for scen in $SCENARIOS; do
	for mode in $MODES; do
		unit="µs CPU/msg"
		[ "$mode" = ir ] && unit="instructions/msg"
		row="| $scen | $unit |"
		for bin in "$@"; do
			vals=$(awk -F'\t' -v b="$(basename "$bin")" -v s="$scen" -v m="$mode" '$1 == b && $2 == s && $4 == m && $5 != "?" {print $5}' "$OUT/runs.tsv" | sort -g)
			med=$(echo "$vals" | awk 'NF {v[++n] = $1} END {if (n == 0) print "?"; else if (n % 2) print v[(n + 1) / 2]; else print (v[n / 2] + v[n / 2 + 1]) / 2}')
			row="$row $med ($(echo "$vals" | paste -sd' ')) |"
		done
		echo "$row"
	done
done
echo
echo "raw: $OUT"
