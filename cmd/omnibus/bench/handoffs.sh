#!/usr/bin/env bash
# handoffs.sh: counts the goroutine wake-ups a broker makes per message
# (issue 30, "hand-offs"), and its threads' context switches and read and
# write system calls per message.
#
# Starts BROKER fresh with --debug-addr, runs one omnibus-tools bench
# scenario against it while taking a runtime trace of the whole run
# (/debug/pprof/trace), then reads the trace (`go tool trace -d=parsed`):
# every goroutine that went from waiting to runnable is one wake-up, put
# in the class of where it had waited (the first frame of omnibus's or
# Pebble's code in the stack it blocked with: amqpserver.(*conn).run,
# amqpserver.(*conn).writeLoop, the frame reader, core/gopool's worker,
# the store's committers, Pebble's commit pipeline, ...). Counts, not
# times: what they say does not depend on the machine's load, but the
# batch sizes (messages per commit) do, so compare the wake-ups per commit
# too (commitLoop's row is one per store commit).
#
# Usage: handoffs.sh BROKER [SCENARIO [COUNT]]
#   SCENARIO: send, send-direct, receive, receive-direct (default send-direct)
#   COUNT:    messages (default 20000); the trace lasts TRACESEC (6) seconds,
#             which must cover the run.
# Needs python3 for reading the trace.
set -euo pipefail
bin=$1 scen=${2:-send-direct} n=${3:-20000}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
T=$(mktemp -d /tmp/omnibus-handoffs.XXXXXX)
TOOLS=${TOOLS:-}
if [ -z "$TOOLS" ]; then
	TOOLS=$T/omnibus-tools
	(cd "$ROOT" && go build -o "$TOOLS" ./cmd/omnibus-tools)
fi
PORT=$((20000 + RANDOM % 20000))
DPORT=$((PORT + 1))
cat >"$T/cfg.json" <<EOC
{"UserConfig":{"Logging":{"Type":"Console"},"Namespaces":[{"Name":"sbemulatorns","Queues":[
{"Name":"hot","Properties":{"MaxDeliveryCount":10,"LockDuration":"PT5M","MaxSizeInMegabytes":81920}}],"Topics":[]}]}}
EOC
"$bin" --data "$T/data" --amqp-addr "127.0.0.1:$PORT" --http-addr - --https-addr - --amqps-addr - \
	--metrics-addr - --debug-addr "127.0.0.1:$DPORT" --config "$T/cfg.json" --log-level warn >"$T/broker.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 100); do
	(exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
	sleep 0.1
done
extra=()
case $scen in *-direct) extra=(--direct-writes) ;; esac
common=(--url "amqp://127.0.0.1:$PORT" --queue hot --quiet --size 1024)
case $scen in receive*)
	"$TOOLS" bench "${common[@]}" --scenario send --inflight 100 --count "$n" >/dev/null
	;;
esac
counters() {
	local cs
	cs=$(cat /proc/$PID/task/*/status | awk '/voluntary_ctxt_switches/ {s += $2} END {print s}')
	echo "$cs $(awk '/^syscr/ {r = $2} /^syscw/ {w = $2} END {print r, w}' /proc/$PID/io)"
}
curl -s -o "$T/trace.out" "http://127.0.0.1:$DPORT/debug/pprof/trace?seconds=${TRACESEC:-6}" &
CURL=$!
sleep 0.3
read -r cs0 r0 w0 < <(counters)
case $scen in
send*) "$TOOLS" bench "${common[@]}" --scenario send --inflight 100 --count "$n" "${extra[@]}" >"$T/bench.out" ;;
*) "$TOOLS" bench "${common[@]}" --scenario drain --credit 100 --batch-credit --drain-timeout 1s "${extra[@]}" >"$T/bench.out" ;;
esac
read -r cs1 r1 w1 < <(counters)
wait $CURL
go tool trace -d=parsed "$T/trace.out" >"$T/parsed.txt" 2>/dev/null || true
echo "$(basename "$bin") $scen, $n messages: per message $(awk -v a=$cs0 -v b=$cs1 -v n=$n 'BEGIN {printf "%.2f", (b-a)/n}') thread context switches, $(awk -v a=$r0 -v b=$r1 -v n=$n 'BEGIN {printf "%.3f", (b-a)/n}') read and $(awk -v a=$w0 -v b=$w1 -v n=$n 'BEGIN {printf "%.3f", (b-a)/n}') write system calls"
python3 - "$T/parsed.txt" "$n" <<'EOP'
import collections, re, sys
n = int(sys.argv[2])
blocked_at, wakes = {}, collections.Counter()
ev, mode, frames = None, None, []
def where(frames):
    for f in frames:
        if 'omnibus' in f or 'pebble' in f or 'net/http' in f:
            return re.sub(r'^github.com/(omnibusmq/omnibus/|cockroachdb/pebble/v2/)?', '', f.split(' @')[0].strip())
    return frames[0].split(' @')[0] if frames else '?'
def done():
    global ev, frames
    if ev:
        kind, g = ev
        if kind == 'block':
            blocked_at[g] = where(frames)
        else:
            wakes[blocked_at.get(g, '?')] += 1
    ev, frames = None, []
for line in open(sys.argv[1]):
    if line.startswith('M='):
        done()
        m = re.search(r'StateTransition .*GoID=(\d+) (\S+)->(\S+)', line)
        if m:
            g, a, b = m.groups()
            if (a, b) == ('Running', 'Waiting'):
                ev, mode = ('block', g), None
            elif (a, b) == ('Waiting', 'Runnable'):
                ev = ('wake', g)
        continue
    if ev:
        s = line.strip()
        if s.startswith('TransitionStack='):
            mode = 'T'
        elif s.startswith('Stack='):
            mode = 'S'
        elif mode == 'T' and ' @ ' in s:
            frames.append(s)
done()
total = sum(wakes.values())
commits = wakes.get('storage/pebblestore.(*committers).commitLoop', 0)
print(f"goroutine wake-ups per message: {total / n:.2f}" + (f" ({total / commits:.1f} per store commit, {n / commits:.1f} messages per commit)" if commits else ""))
for k, v in wakes.most_common(12):
    print(f"  {v / n:6.3f}  {k}")
EOP
