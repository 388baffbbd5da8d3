#!/usr/bin/env bash
# What metrics cost on the hot path: make compare's send and receive
# scenarios (omnibus-tools bench, 1 KiB durable messages) against omnibus with
# metrics on (--metrics-addr, scraped every second, far more often than
# Prometheus's default 15 s) and off (--metrics-addr -, which also turns
# off the statistics the core keeps). On and off alternate in one run,
# in ABBA order, each run on a fresh broker and data directory, so that
# drift on a shared machine hits both alike. Prints every run's rate and
# the broker's CPU per message, then the medians.
#
# Environment (all optional):
#   REPS=6          runs of each scenario in each mode
#   DURATION=8s     length of each send run
#   PREFILL=50000   messages put in before each receive run
#   SCENARIOS="send receive"   which of the two to run
#   SCRAPE=1        seconds between scrapes with metrics on (0: none)
#   OUT=dir         where results go (default: a new /tmp directory, kept)
#
# Every broker started here is stopped by PID on exit.
set -euo pipefail

REPS=${REPS:-6}
DURATION=${DURATION:-8s}
PREFILL=${PREFILL:-50000}
SCRAPE=${SCRAPE:-1}
SCENARIOS=${SCENARIOS:-send receive}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
TMP=$(mktemp -d /tmp/omnibus-metrics-cost.XXXXXX)
OUT=${OUT:-$(mktemp -d /tmp/omnibus-metrics-cost-results.XXXXXX)}
mkdir -p "$OUT"

PID=
SCRAPER=
stop() {
	if [ -n "$SCRAPER" ]; then
		kill "$SCRAPER" 2>/dev/null || true
		wait "$SCRAPER" 2>/dev/null || true
		SCRAPER=
	fi
	if [ -n "$PID" ]; then
		kill -TERM "$PID" 2>/dev/null || true
		wait "$PID" 2>/dev/null || true
		PID=
	fi
}
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop
	rm -rf "$TMP"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "== $*" >&2; }

log "building omnibus and the compare helper into $TMP"
(cd "$ROOT" && go build -o "$TMP/omnibus" ./cmd/omnibus && go build -o "$TMP/compare" ./cmd/omnibus/bench/compare)
read -r PORT MPORT <<<"$("$TMP/compare" ports 2 | tr '\n' ' ')"
cat >"$TMP/Config.json" <<'EOF'
{"UserConfig":{"Logging":{"Type":"Console"},"Namespaces":[{"Name":"sbemulatorns","Queues":[
{"Name":"send","Properties":{"MaxDeliveryCount":10,"LockDuration":"PT1M","MaxSizeInMegabytes":81920}},
{"Name":"receive","Properties":{"MaxDeliveryCount":10,"LockDuration":"PT1M","MaxSizeInMegabytes":81920}}
],"Topics":[]}]}}
EOF

# start MODE starts a fresh broker with metrics on or off.
start() {
	local addr=-
	if [ "$1" = on ]; then addr=127.0.0.1:$MPORT; fi
	rm -rf "$TMP/data"
	"$TMP/omnibus" --data "$TMP/data" --config "$TMP/Config.json" --amqp-addr "127.0.0.1:$PORT" --http-addr - \
		--https-addr - --amqps-addr - --metrics-addr "$addr" --log-level warn >>"$OUT/omnibus.log" 2>&1 &
	PID=$!
	AMQP_USER=RootManageSharedAccessKey AMQP_PASS=SAS_KEY_VALUE "$TMP/compare" waitopen "amqp://127.0.0.1:$PORT" 60s >/dev/null
	if [ "$1" = on ] && [ "$SCRAPE" != 0 ]; then
		(while curl -sf -o /dev/null "http://127.0.0.1:$MPORT/metrics"; do sleep "$SCRAPE"; done) &
		SCRAPER=$!
	fi
}

# run SCENARIO MODE REP runs one scenario on a fresh broker.
run() {
	local scen=$1 mode=$2 rep=$3 flags
	case $scen in
	send) flags="--scenario send --inflight 100 --duration $DURATION --warmup 1s" ;;
	receive) flags="--scenario receive --prefill $PREFILL --credit 100 --batch-credit" ;;
	esac
	start "$mode"
	log "$scen, metrics $mode (rep $rep)"
	# shellcheck disable=SC2086
	"$TMP/omnibus" bench --url "amqp://127.0.0.1:$PORT" --queue "$scen" --label "metrics-$mode" --broker-pid "$PID" \
		--size 1024 --durable --quiet --drain-timeout 15s --json "$OUT/${scen}__${mode}__${rep}.json" $flags \
		>"$OUT/${scen}__${mode}__${rep}.txt" 2>&1 || log "  failed: $(tail -1 "$OUT/${scen}__${mode}__${rep}.txt")"
	stop
	local f=$OUT/${scen}__${mode}__${rep}.json rate cpu n
	case $scen in
	send) rate=$(sed -n 's/^  "sendRate": \([0-9.]*\),$/\1/p' "$f") ;;
	receive) rate=$(sed -n 's/^  "recvRate": \([0-9.]*\),$/\1/p' "$f") ;;
	esac
	# CPU over the timed span, per acknowledged send or delivery in it.
	n=$(sed -n 's/^  "operations": \([0-9]*\),$/\1/p' "$f")
	cpu=$(sed -n 's/^  "brokerCpuSeconds": \([0-9.]*\),$/\1/p' "$f")
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$scen" "$mode" "$rep" "${rate:-?}" "${cpu:-?}" "${n:-?}" >>"$OUT/runs.tsv"
}

for rep in $(seq 1 "$REPS"); do
	order="on off"
	if [ $((rep % 2)) = 0 ]; then order="off on"; fi
	for scen in $SCENARIOS; do
		for mode in $order; do run "$scen" "$mode" "$rep"; done
	done
done

echo "| scenario | metrics | runs: msg/s | median msg/s | median broker CPU µs/msg |"
echo "|---|---|---|---:|---:|"
for scen in $SCENARIOS; do
	for mode in on off; do
		awk -F'\t' -v s="$scen" -v m="$mode" '
			$1 == s && $2 == m && $4 != "?" { r[++n] = $4; c[n] = ($6 > 0 ? $5 / $6 * 1e6 : 0); runs = runs sprintf("%s%.0f", n > 1 ? " " : "", $4) }
			function median(a, k,   i, j, t) {
				for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
				return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
			}
			END { printf "| %s | %s | %s | %.0f | %.1f |\n", s, m, runs, median(r, n), median(c, n) }' "$OUT/runs.tsv"
	done
done
echo
echo "Raw results: $OUT"
