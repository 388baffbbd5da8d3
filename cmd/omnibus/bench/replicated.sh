#!/usr/bin/env bash
# make cluster-replicated: the replicated send against a single node: omnibus-tools bench --scenario send
# --inflight 100 --size 1024 --durable, 8 s after 1 s warm-up, a single node
# and a 3-node cluster (one Raft group, mTLS peers) alternated PAIRS (5) times;
# broker CPU per message per process from /proc (over warm-up and run, divided
# by the run's sends: about 1/9 above the run's own figure). Ports 18101-18503.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PAIRS=${PAIRS:-5}
[ -x bin/omnibus ] && [ -x bin/omnibus-tools ] || { echo "cluster-replicated: build first (make build)" >&2; exit 2; }
BIN=bin KEY=SAS_KEY_VALUE KEYNAME=RootManageSharedAccessKey
W=$(mktemp -d /tmp/omnibus-repl.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT
cat >"$W/Config.json" <<'J'
{"UserConfig":{"Namespaces":[{"Name":"repl","Queues":[{"Name":"q","Properties":{"LockDuration":"PT1M","MaxDeliveryCount":10}}]}],"Logging":{"Type":"Console"}}}
J
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
bench() { # url json
  "$BIN/omnibus-tools" bench --scenario send --inflight 100 --size 1024 --durable --duration 8s --warmup 1s \
    --queue q --url "$1" --pass "$KEY" --quiet --json "$2" >/dev/null 2>&1
}
rate() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.0f %d" % (r["sendRate"], r["sent"]))' "$1"; }
single() {
  local d="$W/s$1"; mkdir -p "$d"
  "$BIN/omnibus" --data "$d/data" --config "$W/Config.json" --amqp-addr 127.0.0.1:18101 --amqps-addr - \
    --http-addr 127.0.0.1:18102 --https-addr - --metrics-addr - --key "$KEY" --log-level warn >"$d/log" 2>&1 &
  local pid=$!; PIDS+=($pid)
  until curl -s -o /dev/null http://127.0.0.1:18102/health; do sleep 0.2; done; sleep 1
  local t0; t0=$(ticks $pid)
  bench amqp://127.0.0.1:18101 "$d/b.json"
  local t1; t1=$(ticks $pid)
  read -r r n < <(rate "$d/b.json")
  echo "single $r msg/s cpu $(awk -v a=$t0 -v b=$t1 -v n=$n -v hz=$hz 'BEGIN{printf "%.1f", (b-a)/hz*1e6/n}') us/msg"
  kill -9 $pid; wait $pid 2>/dev/null || true; PIDS=(); sleep 1
}
cluster() {
  local d="$W/c$1" peers="1=127.0.0.1:18201,2=127.0.0.1:18202,3=127.0.0.1:18203" pids=() i
  mkdir -p "$d"
  "$BIN/omnibus" cluster init --node-id 1 --data "$d/node1" >/dev/null
  for i in 1 2 3; do
    local extra=()
    [ $i -gt 1 ] && extra=(--join-token "$("$BIN/omnibus" cluster token --data "$d/node1" --addr 127.0.0.1:18201 --node-id $i --key-name $KEYNAME --key $KEY --timeout 60s)")
    "$BIN/omnibus" serve --node-id $i --peers "$peers" --data "$d/node$i" --config "$W/Config.json" \
      --amqp-addr 127.0.0.1:1830$i --amqps-addr - --http-addr 127.0.0.1:1840$i --https-addr - --metrics-addr 127.0.0.1:1850$i \
      --key-name $KEYNAME --key $KEY --log-level warn "${extra[@]}" >"$d/node$i.log" 2>&1 &
    pids+=($!); PIDS+=($!)
    [ $i = 1 ] && sleep 1
  done
  local leader=""
  for _ in $(seq 1 300); do
    leader=$("$BIN/omnibus" cluster status --data "$d/node1" --addr 127.0.0.1:18201 --json 2>/dev/null | python3 -c '
import json,sys
for m in json.load(sys.stdin):
    if m.get("serving"): print(m["id"])' 2>/dev/null || true)
    [ -n "$leader" ] && curl -s -o /dev/null -w '%{http_code}' -H "Authorization: $("$BIN/omnibus" token --key $KEY)" http://127.0.0.1:1840$leader/q | grep -q 200 && break
    sleep 0.3
  done
  sleep 1
  local t0=() t1=() p
  for p in "${pids[@]}"; do t0+=("$(ticks $p)"); done
  bench amqp://127.0.0.1:1830$leader "$d/b.json"
  for p in "${pids[@]}"; do t1+=("$(ticks $p)"); done
  read -r r n < <(rate "$d/b.json")
  local cpus=""
  for i in 0 1 2; do cpus="$cpus node$((i+1))$([ $((i+1)) = $leader ] && echo '(leader)')=$(awk -v a=${t0[$i]} -v b=${t1[$i]} -v n=$n -v hz=$hz 'BEGIN{printf "%.1f", (b-a)/hz*1e6/n}')"; done
  echo "cluster $r msg/s cpu us/msg:$cpus"
  for p in "${pids[@]}"; do kill -9 $p 2>/dev/null || true; wait $p 2>/dev/null || true; done; PIDS=(); sleep 1
}
echo "load: $(uptime)"; git log --oneline -1 | cat
for i in $(seq 1 "$PAIRS"); do single $i; cluster $i; done
echo "load: $(uptime)"
