#!/usr/bin/env bash
# make compare: omnibus against RabbitMQ (classic and quorum queues) with
# the same bench scenarios, interleaved, plus omnibus's start-up time,
# idle RSS and RSS with a backlog. Prints a markdown report.
#
# Environment (all optional):
#   REPS=3            repetitions of every scenario (interleaved per target)
#   DURATION=8s       length of each timed send / send+receive run
#   PREFILL=50000     messages put in before each receive run
#   BACKLOG=1000000   1 KiB messages for the RSS-with-backlog measurement
#   EXTRA="direct 12b 64k"  further scenarios, on every target (EXTRA= for none):
#                     direct: unsettled send and receive with go-amqp writing
#                     each frame itself and a goroutine per send in flight,
#                     as an application or SDK does (--direct-writes);
#                     12b: unsettled send and receive of 12-byte messages
#                     (the size RabbitMQ's own AMQP 1.0 benchmarks use);
#                     64k: the same with 64 KiB messages (PREFILL/10 of them)
#   OUT=dir           where results go (default: a new /tmp directory, kept)
#   CPUS=shared       shared: broker and load generator share every CPU;
#                     split: the broker (omnibus or RabbitMQ) runs on the
#                     upper half of the CPUs and the load generator on the
#                     lower half (taskset), so that neither takes CPU time
#                     from the other, as with a client on another machine
#
# Everything started here (RabbitMQ, epmd, omnibus) is stopped by PID on
# exit, also on failure or Ctrl-C. RabbitMQ is installed from Debian
# packages when missing.
set -euo pipefail

REPS=${REPS:-3}
DURATION=${DURATION:-8s}
PREFILL=${PREFILL:-50000}
BACKLOG=${BACKLOG:-1000000}
CPUS=${CPUS:-shared}
EXTRA=${EXTRA-direct 12b 64k}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
TMP=$(mktemp -d /tmp/omnibus-compare.XXXXXX)
OUT=${OUT:-$(mktemp -d /tmp/omnibus-compare-results.XXXXXX)}
mkdir -p "$OUT"

. "$HERE/rabbitmq.sh"

OMNI_PID=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if declare -F omni_stop >/dev/null; then omni_stop; fi
	rmq_stop
	rm -rf "$TMP"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "== $*" >&2; }

# CPU placement: commands prefixed with "${ON_BROKER_CPUS[@]}" or
# "${ON_CLIENT_CPUS[@]}" run on the broker's or the load generator's CPUs
# (all of them unless CPUS=split). taskset execs the command, so $! is
# still the broker's PID.
NCPU=$(nproc)
ON_BROKER_CPUS=()
ON_CLIENT_CPUS=()
case $CPUS in
shared)
	CPU_NOTE="broker and load generator share all $NCPU CPUs"
	;;
split)
	if [ "$NCPU" -lt 2 ]; then
		echo "CPUS=split needs at least 2 CPUs, this machine has $NCPU" >&2
		exit 2
	fi
	cpu_range() { if [ "$1" = "$2" ]; then echo "$1"; else echo "$1-$2"; fi; }
	CLIENT_CPUS=$(cpu_range 0 $((NCPU / 2 - 1)))
	BROKER_CPUS=$(cpu_range $((NCPU / 2)) $((NCPU - 1)))
	CPU_NOTE="split: the broker on CPUs $BROKER_CPUS, the load generator on CPUs $CLIENT_CPUS (taskset)"
	ON_BROKER_CPUS=(taskset -c "$BROKER_CPUS")
	ON_CLIENT_CPUS=(taskset -c "$CLIENT_CPUS")
	;;
*)
	echo "CPUS must be shared or split, not $CPUS" >&2
	exit 2
	;;
esac
RMQ_PREFIX=("${ON_BROKER_CPUS[@]}") # rabbitmq.sh starts the node with it

log "building omnibus and the compare helper into $TMP"
(cd "$ROOT" && go build -o "$TMP/omnibus" ./cmd/omnibus && go build -o "$TMP/omnibus-tools" ./cmd/omnibus-tools && go build -o "$TMP/compare" ./cmd/omnibus/bench/compare)
read -r OMNI_PORT RMQ_PORT RMQ_DIST_PORT RMQ_EPMD_PORT RMQ_MGMT_PORT OMNI_PORT2 <<<"$("$TMP/compare" ports 6 | tr '\n' ' ')"
RMQ_DIR=$TMP/rabbitmq

SCENARIOS="send-unsettled send-presettled receive both-max"
for x in $EXTRA; do
	case $x in
	direct | 12b | 64k) SCENARIOS="$SCENARIOS send-unsettled-$x receive-$x" ;;
	*)
		echo "EXTRA: unknown scenario set $x (direct, 12b, 64k)" >&2
		exit 2
		;;
	esac
done

# --- omnibus ----------------------------------------------------------------

# omni_config FILE QUEUE... writes an emulator Config.json declaring the
# queues (no TTL, room for a large backlog).
omni_config() {
	local file=$1 sep="" q
	shift
	{
		echo '{"UserConfig":{"Logging":{"Type":"Console"},"Namespaces":[{"Name":"sbemulatorns","Queues":['
		for q in "$@"; do
			printf '%s{"Name":"%s","Properties":{"MaxDeliveryCount":10,"LockDuration":"PT1M","MaxSizeInMegabytes":81920}}\n' "$sep" "$q"
			sep=,
		done
		echo '],"Topics":[]}]}}'
	} >"$file"
}

# omni_start DATA PORT CONFIG starts omnibus and waits for its first AMQP
# open; sets OMNI_PID and OMNI_STARTUP_MS (process start → open accepted).
omni_start() {
	local t0 t1
	t0=$(date +%s%N)
	"${ON_BROKER_CPUS[@]}" "$TMP/omnibus" --data "$1" --amqp-addr "127.0.0.1:$2" --http-addr - --https-addr - --amqps-addr - --metrics-addr 127.0.0.1:0 \
		--config "$3" --log-level warn >>"$TMP/omnibus.log" 2>&1 &
	OMNI_PID=$!
	t1=$(AMQP_USER=RootManageSharedAccessKey AMQP_PASS=SAS_KEY_VALUE "$TMP/compare" waitopen "amqp://127.0.0.1:$2" 120s)
	OMNI_STARTUP_MS=$(((t1 - t0) / 1000000))
}

omni_stop() {
	if [ -n "${OMNI_PID:-}" ]; then
		kill -TERM "$OMNI_PID" 2>/dev/null || true
		local i
		for i in $(seq 1 100); do
			kill -0 "$OMNI_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$OMNI_PID" 2>/dev/null || true
		wait "$OMNI_PID" 2>/dev/null || true
		OMNI_PID=
	fi
}

rss_mb() { awk '/^VmRSS/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }
hwm_mb() { awk '/^VmHWM/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }

# --- runs -------------------------------------------------------------------

# bench TARGET SCENARIO REP [flags...] runs one scenario and keeps its JSON
# as SCENARIO__TARGET__REP.json. A failed verification is kept and flagged
# in the table rather than stopping the comparison.
bench() {
	local target=$1 scen=$2 rep=$3 url user pass queue pid
	shift 3
	case $target in
	omnibus*) url=amqp://127.0.0.1:$OMNI_PORT user=RootManageSharedAccessKey pass=SAS_KEY_VALUE queue=$QUEUE pid=$OMNI_PID ;;
	rabbitmq-*) url=amqp://127.0.0.1:$RMQ_PORT user=guest pass=guest queue=/amq/queue/$QUEUE pid=$RMQ_BEAM_PID ;;
	esac
	log "$scen on $target (rep $rep)"
	"${ON_CLIENT_CPUS[@]}" "$TMP/omnibus-tools" bench --url "$url" --user "$user" --pass "$pass" --queue "$queue" --label "$target" \
		--broker-pid "$pid" --size 1024 --durable --quiet --drain-timeout 15s --json "$OUT/${scen}__${target}__${rep}.json" "$@" \
		>"$OUT/${scen}__${target}__${rep}.txt" 2>&1 ||
		log "  $scen on $target failed: $(grep -E '^result' "$OUT/${scen}__${target}__${rep}.txt" || tail -1 "$OUT/${scen}__${target}__${rep}.txt")"
}

scenario_flags() {
	case $1 in
	send-unsettled) echo "--scenario send --inflight 100 --duration $DURATION --warmup 1s" ;;
	send-presettled) echo "--scenario send --presettled --duration $DURATION --warmup 1s" ;;
	# RabbitMQ 3.x's AMQP 1.0 plugin stops delivering when go-amqp tops up
	# credit while deliveries are in flight: every receiver grants its 100
	# credits again only once they are used up, on both brokers alike.
	receive) echo "--scenario receive --prefill $PREFILL --credit 100 --batch-credit" ;;
	both-max) echo "--scenario both --inflight 100 --credit 100 --batch-credit --duration $DURATION --warmup 1s" ;;
	both-half) echo "--scenario both --inflight 100 --credit 100 --batch-credit --duration $DURATION --warmup 1s --rate $HALF_RATE" ;;
	# The extra sets: the base scenario with other writes or sizes (the
	# flags after bench's own --size 1024 win).
	send-unsettled-direct) echo "$(scenario_flags send-unsettled) --direct-writes" ;;
	receive-direct) echo "$(scenario_flags receive) --direct-writes" ;;
	*-12b) echo "$(scenario_flags "${1%-12b}") --size 12" ;;
	send-unsettled-64k) echo "$(scenario_flags send-unsettled) --size 65536" ;;
	receive-64k) echo "--scenario receive --prefill $((PREFILL / 10)) --credit 100 --batch-credit --size 65536" ;;
	esac
}

# stored TARGET SCEN REP counts what a send run left in the queue (for
# presettled sends, what the broker really took) and empties it.
stored() {
	local target=$1 scen=$2 rep=$3 n
	case $target in
	omnibus*)
		"${ON_CLIENT_CPUS[@]}" "$TMP/omnibus-tools" bench --url "amqp://127.0.0.1:$OMNI_PORT" --queue "$QUEUE" --scenario drain --rad \
			--credit 1000 --drain-timeout 1s --quiet --json "$TMP/drain.json" >/dev/null 2>&1 || true
		n=$(sed -n 's/^  "received": \([0-9]*\),$/\1/p' "$TMP/drain.json")
		;;
	rabbitmq-*)
		# Presettled messages may still be on their way into the queue:
		# count until the number stops changing.
		local prev=-1 i
		for i in $(seq 1 30); do
			n=$(rmq_env; "$RMQ_BIN/rabbitmqctl" -q list_queues name messages 2>/dev/null | awk -v q="$QUEUE" '$1 == q {print $2}')
			if [ "$n" = "$prev" ]; then break; fi
			prev=$n
			sleep 1
		done
		rmq_delete "$QUEUE"
		;;
	esac
	local sent
	sent=$(sed -n 's/^    "acked": \([0-9]*\),$/\1/p' "$OUT/${scen}__${target}__${rep}.json" 2>/dev/null || true)
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$scen" "$target" "$rep" "${sent:-?}" "${n:-?}" "${DURATION%s}" >>"$OUT/stored.tsv"
}

# one TARGET SCEN REP runs a scenario on a fresh queue of the target.
one() {
	local target=$1 scen=$2 rep=$3
	QUEUE=$scen-$rep
	case $target in
	rabbitmq-classic) QUEUE=$QUEUE-classic && rmq_queue "$QUEUE" classic ;;
	rabbitmq-quorum) QUEUE=$QUEUE-quorum && rmq_queue "$QUEUE" quorum ;;
	omnibus-autocredit) QUEUE=$scen-autocredit-$rep ;;
	esac
	local flags
	flags=$(scenario_flags "$scen")
	# omnibus-autocredit: the same scenario with go-amqp's own credit
	# management (RabbitMQ 3.x stalls under it, see scenario_flags).
	if [ "$target" = omnibus-autocredit ]; then flags=${flags/ --batch-credit/}; fi
	# shellcheck disable=SC2086
	bench "$target" "$scen" "$rep" $flags
	case $scen in
	send-*) stored "$target" "$scen" "$rep" ;;
	*) case $target in rabbitmq-*) rmq_delete "$QUEUE" ;; esac ;;
	esac
}

# --- main -------------------------------------------------------------------

rmq_install
log "starting RabbitMQ (ports $RMQ_PORT, management $RMQ_MGMT_PORT)"
rmq_start
RMQ_VERSION=$(rmq_version)
RMQ_BEAM_PID=$(rmq_beam_pid)

QUEUES=()
for rep in $(seq 1 "$REPS"); do
	for scen in $SCENARIOS both-half; do QUEUES+=("$scen-$rep"); done
	QUEUES+=("receive-autocredit-$rep" "both-max-autocredit-$rep" "both-half-autocredit-$rep")
done
omni_config "$TMP/Config.json" "${QUEUES[@]}"
log "starting omnibus (port $OMNI_PORT, data $TMP/data)"
omni_start "$TMP/data" "$OMNI_PORT" "$TMP/Config.json"
BENCH_STARTUP_MS=$OMNI_STARTUP_MS
sleep 3
IDLE_RSS=$(rss_mb "$OMNI_PID")
log "omnibus up in ${BENCH_STARTUP_MS} ms (with ${#QUEUES[@]} queues), idle RSS ${IDLE_RSS} MB"

for rep in $(seq 1 "$REPS"); do
	for scen in $SCENARIOS; do
		for target in omnibus rabbitmq-classic rabbitmq-quorum; do
			one "$target" "$scen" "$rep"
		done
	done
	one omnibus-autocredit receive "$rep"
	one omnibus-autocredit both-max "$rep"
done

HALF_RATE=$(sed -n 's/^  "recvRate": \([0-9.]*\),$/\1/p' "$OUT"/both-max__omnibus__*.json | sort -n |
	awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.0f", m / 2}')
log "fixed-rate runs at ${HALF_RATE} msg/s (half omnibus's median send+receive rate)"
for rep in $(seq 1 "$REPS"); do
	for target in omnibus rabbitmq-classic rabbitmq-quorum omnibus-autocredit; do
		one "$target" both-half "$rep"
	done
done
BUSY_RSS=$(rss_mb "$OMNI_PID")
BUSY_HWM=$(hwm_mb "$OMNI_PID")
omni_stop
rmq_stop

# Start-up of an empty omnibus with one queue, five times.
omni_config "$TMP/Config1.json" backlog
STARTS=()
for i in 1 2 3 4 5; do
	rm -rf "$TMP/data-start"
	omni_start "$TMP/data-start" "$OMNI_PORT2" "$TMP/Config1.json"
	STARTS+=("$OMNI_STARTUP_MS")
	if [ "$i" = 1 ]; then
		sleep 3
		IDLE1_RSS=$(rss_mb "$OMNI_PID")
	fi
	omni_stop
done
STARTUP_MEDIAN=$(printf '%s\n' "${STARTS[@]}" | sort -n | sed -n 3p)

# RSS with a backlog, then recovery of that backlog after a restart.
log "filling omnibus with $BACKLOG × 1 KiB messages"
rm -rf "$TMP/data-start"
omni_start "$TMP/data-backlog" "$OMNI_PORT2" "$TMP/Config1.json"
fill_t0=$(date +%s%N)
"${ON_CLIENT_CPUS[@]}" "$TMP/omnibus-tools" bench --url "amqp://127.0.0.1:$OMNI_PORT2" --queue backlog --scenario send --count "$BACKLOG" \
	--inflight 500 --size 1024 --durable --quiet --json "$OUT/backlog-fill.json" >"$OUT/backlog-fill.txt" 2>&1 ||
	log "backlog fill failed: $(tail -1 "$OUT/backlog-fill.txt")"
fill_s=$(((($(date +%s%N) - fill_t0) / 1000000)))
sleep 3
BACKLOG_RSS=$(rss_mb "$OMNI_PID")
BACKLOG_HWM=$(hwm_mb "$OMNI_PID")
DISK_MB=$(du -sm "$TMP/data-backlog" | cut -f1)
omni_stop
omni_start "$TMP/data-backlog" "$OMNI_PORT2" "$TMP/Config1.json"
RECOVERY_MS=$OMNI_STARTUP_MS
sleep 3
RECOVERED_RSS=$(rss_mb "$OMNI_PID")
log "draining the recovered backlog"
"${ON_CLIENT_CPUS[@]}" "$TMP/omnibus-tools" bench --url "amqp://127.0.0.1:$OMNI_PORT2" --queue backlog --scenario drain --rad --credit 1000 \
	--drain-timeout 3s --quiet --json "$OUT/backlog-drain.json" >"$OUT/backlog-drain.txt" 2>&1 || true
DRAINED=$(sed -n 's/^  "received": \([0-9]*\),$/\1/p' "$OUT/backlog-drain.json")
DRAIN_RATE=$(sed -n 's/^  "recvRate": \([0-9.]*\),$/\1/p' "$OUT/backlog-drain.json" | cut -d. -f1)
omni_stop

{
	echo "## omnibus vs RabbitMQ: medians of $REPS runs (range, n)"
	echo
	echo "CPUs: $CPU_NOTE."
	echo
	"$TMP/compare" table "$OUT"
	echo
	echo "Fixed rate for both-half: ${HALF_RATE} msg/s (half omnibus's median send+receive rate)."
	echo
	echo "Stored after each send run (acked sends → messages found in the queue):"
	echo
	echo '| scenario | target | rep | acked (presettled: taken by the link) | in the queue afterwards |'
	echo '|---|---|---:|---:|---:|'
	awk -F'\t' '{printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5}' "$OUT/stored.tsv"
	echo
	echo "## omnibus resources"
	echo
	echo '| measurement | value | target |'
	echo '|---|---:|---|'
	echo "| start-up to first AMQP open, empty store, 1 queue (median of 5: ${STARTS[*]}) | ${STARTUP_MEDIAN} ms | < 200 ms |"
	echo "| start-up with the ${#QUEUES[@]} benchmark queues | ${BENCH_STARTUP_MS} ms | |"
	echo "| idle RSS 3 s after start, 1 queue | ${IDLE1_RSS} MB | < 40 MB |"
	echo "| idle RSS 3 s after start, ${#QUEUES[@]} queues | ${IDLE_RSS} MB | < 40 MB |"
	echo "| RSS after the comparison (peak) | ${BUSY_RSS} MB (${BUSY_HWM} MB) | |"
	echo "| filling $BACKLOG × 1 KiB (unsettled, 500 in flight) | ${fill_s} ms | |"
	echo "| RSS with $BACKLOG × 1 KiB backlog (peak while filling) | ${BACKLOG_RSS} MB (${BACKLOG_HWM} MB) | < 400 MB |"
	echo "| store on disk with the backlog | ${DISK_MB} MB | |"
	echo "| restart with the backlog to first AMQP open (recovery) | ${RECOVERY_MS} ms | |"
	echo "| RSS 3 s after recovery | ${RECOVERED_RSS} MB | |"
	echo "| backlog drained after recovery (receive-and-delete) | ${DRAINED:-?} messages at ${DRAIN_RATE:-?} msg/s | = $BACKLOG |"
	echo
	echo "Versions: $(go version | cut -d' ' -f3), ${RMQ_VERSION}. Raw results: $OUT"
} | tee "$OUT/report.md"
