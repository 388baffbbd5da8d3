#!/usr/bin/env bash
# cluster_scale.sh (make cluster-scale): how much more a cluster with data
# groups carries than the same cluster with one group, each node held to a
# CPU budget as if it were a machine of its own.
#
# For each cluster size in NODES (default "3 5") it runs the cluster twice,
# with one group (--groups 0: one leader does all the broker's work) and
# with data groups (--groups = the node count: every node leads one), and
# prints a table: total send + receive rate, each node's CPU per message,
# and the ratio. Each node runs in a cgroup (v1) of its own whose
# cpu.cfs_quota_us allows CPU cores of CPU time per period (default 0.2:
# five nodes of half a core would need more than this two-core machine
# has, and a budget only measures something while it binds: three nodes
# at 0.5 left the generators too little, the data groups' nodes used 0.42
# of their 0.5); its cpuacct.usage gives its CPU time. PERIOD sets
# cpu.cfs_period_us (default 100000, the kernel's: a node may spend its
# 20 ms in the first 10 ms of 100 and then wait 90; 10000 holds it to
# 2 ms of every 10, nearer a slower machine; raftstore RESULTS.md, "The
# budget's period"). The load: QUEUES_PER_NODE queues
# per node (default: as many as there are nodes), one `omnibus-tools bench
# --scenario both` per queue (send and receive at once, 1 KiB, 100 in
# flight), for DURATION (default 30s). Queue i is placed in data group
# (i mod n) + 1, which node (i mod n) + 1 leads; its generator connects to
# node ((i + i div n) mod n) + 1, so that each node's clients use every
# group alike and 1 in n of them reach the node leading their queue's
# group, as behind a load balancer: the others' links are served over
# the nodes' own connections (CLIENTS=leader puts every generator on the
# node leading its queue's group instead, with one group on its leader:
# no call between nodes, no byte proxied by a follower). The
# generators run outside the nodes' cgroups, on whatever CPU is left.
#
# SCENARIO=partitioned measures one busy entity instead (issue 29's
# partitioned entities): a single queue created with EnablePartitioning
# (16 partitions), which a cluster with data groups spreads over all of
# them and a one-group cluster keeps in its one leader. One `omnibus-tools
# bench --scenario both` sends and receives + completes on it over
# CLIENTS_PER_NODE connections per node (default: as many as there are
# nodes, the default scenario's generators per node), connection i on node
# (i mod n) + 1, as behind a load balancer; message j carries the
# partition key k(j mod KEYS) (default KEYS=64; KEYS=0 sends without keys,
# and the broker deals them over the partitions). One ledger over all
# connections, so the bench's verification (every message acknowledged is
# received, none twice) holds across the nodes. The run fails unless it
# used every group: the deliveries' partitions (the top 16 bits of their
# sequence numbers; the spread deals partition p to the group after
# partition p-1's) must fall in every group, and every data group's Raft
# log (`cluster status`, commit index before and after) must have taken at
# least a quarter of its even share of the entries; both printed.
# With data groups it also prints each node's spread receive counts
# (metrics omnibus_spread_*_total): group receives and released messages
# per delivered message, what a receive from the spread queue costs
# whatever the machine's load; and its calls on other nodes per delivered
# message, by operation (omnibus_peer_calls_total).
#
# ONLY=one runs only the one-group cluster of each size, ONLY=groups only
# the one with data groups (no ratio then): builds compared side by side
# (BIN=) one side at a time, in half the time. The one-group runs spread
# widely (five nodes 15,786-17,970 msg/s for one build in one hour,
# storage/raftstore/README.md), so alternate builds and repeat.
#
# ROUNDS=k (default 1) measures each size k times, one-group and
# data-group clusters alternating (one then groups in odd rounds, groups
# then one in even ones, so that a machine growing faster or slower over
# the quarter hour favours neither side), each pair's ratio in its row,
# then a "median" row: the median rate of each side and the median of the
# pairs' ratios, the figure to quote when single pairs spread.
#
# Each run prints the Raft entries its load's groups committed over the
# measurement and the messages each carried (how well the groups batch:
# 111 a one-group entry against 94 a data group's on 2026-12-03), and
# leaves each node's /metrics at the end and the groups' commit indexes
# at the measurement's start and end in the run's directory (KEEP=1
# keeps it).
#
# BACKLOG=N gives each generator --max-backlog N: its senders wait while
# N of its messages are sent and not yet received, so the queue stays
# near empty. Without it both sides run flat out and each queue keeps the
# backlog its first seconds left: messages lived 0.1 s in one run and
# 1.8 s in the next with the same code, and past three quarters of a
# follower's hold (1.5 s) a message costs its followers an apply. Each
# run prints how long its messages lived (the generators' medians).
#
# WARMUP (default 90s, see below; 0s for none) runs the load that long before the
# measured DURATION and leaves it out: the generators get --warmup and run
# WARMUP + DURATION, the nodes' CPU is read from WARMUP after they start,
# and PROFILE and SYSCALLS start then too. What is measured is the steady
# state of a broker that runs for days, not its first seconds: for about
# the first 15 s of load a node's memory grows (to ~600 MB with five
# groups: in-memory Raft logs up to their compaction, memtables, the
# collector's room), each fresh page a page fault of ~1.4 us, and every
# group's log writes fresh segment files, whose pages the kernel allocates
# and whose extents ext4 converts at each fdatasync, until the log is
# compacted and its segments are recycled (a 5-node profile: pwrite 13 %
# and memmove 31 % of a node's CPU without a warm-up, 2-4 % and 5-10 %
# after 40 s; raftstore RESULTS.md, "Steady state"). Both clusters of a pair
# get the same warm-up. How long that takes follows the rate: a group's
# log recycles its first file once it has written two segments (64 MiB
# each), and at 0.2 cores on a machine half as fast as the one 30 s was
# chosen on, three data groups were still writing their second fresh
# segment at 50 s (kernel copies into the page cache 10x slower per
# byte: 8 % of a node's CPU against 1 %). So the default is 90s, and
# when the measurement begins the script checks every node's logs that
# carry the load (the groups' with data groups, the one log without):
# any whose newest segment is not past the second is named on stderr,
# the row then measuring a cluster's first minute (raise WARMUP).
#
# Needs root (cgroups); skips, saying why, where /sys/fs/cgroup/cpu is not
# a writable cgroup v1 hierarchy. Take the numbers when the machine is
# quiet: the script prints `uptime` before each run.
set -euo pipefail
cd "$(dirname "$0")/../../.."

NODES=${NODES:-"3 5"}
CPU=${CPU:-0.2}
DURATION=${DURATION:-30s}
WARMUP=${WARMUP:-90s}
QUEUES_PER_NODE=${QUEUES_PER_NODE:-}
SCENARIO=${SCENARIO:-queues}
CLIENTS_PER_NODE=${CLIENTS_PER_NODE:-}
KEYS=${KEYS:-64}
SIZE=${SIZE:-1024}
BIN=${BIN:-bin}
CG_CPU=/sys/fs/cgroup/cpu
CG_ACCT=/sys/fs/cgroup/cpuacct
KEY=${KEY:-SAS_KEY_VALUE}
KEYNAME=RootManageSharedAccessKey

if [ "$(id -u)" != 0 ] || [ ! -w "$CG_CPU/cpu.cfs_quota_us" ] || [ ! -d "$CG_ACCT" ]; then
  echo "cluster-scale: skipped: needs root and a writable cgroup v1 hierarchy at $CG_CPU and $CG_ACCT" \
    "(cpu.cfs_quota_us holds each node to its CPU budget); this machine has neither" >&2
  exit 0
fi
case $SCENARIO in queues | partitioned) ;; *) echo "cluster-scale: SCENARIO is queues or partitioned, not $SCENARIO" >&2; exit 2 ;; esac
[ -x "$BIN/omnibus" ] && [ -x "$BIN/omnibus-tools" ] || { echo "cluster-scale: build first (make build)" >&2; exit 2; }

PERIOD=${PERIOD:-100000}
QUOTA=$(awk -v c="$CPU" -v p="$PERIOD" 'BEGIN { printf "%d", c * p }')
WORK=$(mktemp -d /tmp/omnibus-scale.XXXXXX)
PIDS=()

cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  sleep 0.3
  for d in "$CG_CPU"/omnibus-scale-* "$CG_ACCT"/omnibus-scale-*; do [ -d "$d" ] && rmdir "$d" 2>/dev/null || true; done
  if [ "${KEEP:-}" = 1 ]; then echo "cluster-scale: logs kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# port N I: a port for node I of kind N (peer 0, amqp 1, http 2, metrics
# 3, Go profiles 4: PROFILE=1 writes a CPU profile of every node over
# PROFILE_SECONDS, default 8, from the measurement's start).
port() { echo $((17000 + $1 * 100 + $2)); }

# create_partitioned DEADLINE AUTH: SCENARIO=partitioned's queue p, with
# EnablePartitioning, created through node 1's HTTP gateway (retried while
# the cluster is still electing), and there once node 1 shows it.
create_partitioned() {
  local deadline=$1 auth=$2 body
  body='<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">'
  body+='<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">'
  body+='<LockDuration>PT1M</LockDuration><MaxDeliveryCount>10</MaxDeliveryCount><EnablePartitioning>true</EnablePartitioning>'
  body+='</QueueDescription></content></entry>'
  until curl -s -H "$auth" "http://127.0.0.1:$(port 2 1)/p" | grep -q '<EnablePartitioning>true'; do
    [ $SECONDS -lt "$deadline" ] || { echo "cluster-scale: the partitioned queue p was never created" >&2; KEEP=1; exit 1; }
    curl -s -o /dev/null -X PUT -H "$auth" -H 'Content-Type: application/atom+xml' --data "$body" "http://127.0.0.1:$(port 2 1)/p" || true
    sleep 0.5
  done
}

# fresh_logs DIR N GROUPS: the Raft logs carrying the load (the log the
# data groups share, and any data group's own, else the one group's)
# whose newest segment is not past the second, i.e. which have not yet
# written over a recycled file, one per line as "node I log G: segment S"
# (G 0: the one group's, shared: the data groups').
fresh_logs() {
  local dir=$1 n=$2 groups=$3 i log seg g
  for i in $(seq 1 "$n"); do
    if [ "$groups" -gt 0 ]; then set -- "$dir/node$i/cluster/grouplog" "$dir/node$i"/cluster/groups/*/raftlog; else set -- "$dir/node$i/cluster/raftlog"; fi
    for log in "$@"; do
      [ -d "$log" ] || continue
      seg=$(find "$log" -maxdepth 1 -name '*.seg' -printf '%f\n' 2>/dev/null | sed 's/\.seg$//' | sort | tail -1 || true)
      [ -n "$seg" ] && [ $((16#$seg)) -gt 2 ] && continue
      g=0
      [ "$log" = "$dir/node$i/cluster/grouplog" ] && g=shared
      [ "$groups" -gt 0 ] && [ "$g" = 0 ] && g=$(basename "$(dirname "$log")")
      echo "node $i log $g: segment $((16#${seg:-0}))"
    done
  done
}

# status_json DIR: `cluster status --json` of the cluster whose node 1 is
# in DIR, asked on node 1's peer port (nothing when it does not answer).
status_json() {
  "$BIN/omnibus" cluster status --data "$1/node1" --addr "127.0.0.1:$(port 0 1)" --json 2>/dev/null
}

# status_commits DIR: each data group's commit index (the highest any
# member reports), or the one group's as group 0 without data groups, one
# "group commit" a line.
status_commits() {
  status_json "$1" | python3 -c '
import json, sys
top = {}
for m in json.load(sys.stdin):
    for gs in m.get("groups") or [{"group": 0, "commit": m["commit"]}]:
        top[gs["group"]] = max(top.get(gs["group"], 0), gs["commit"])
for g in sorted(top):
    print(g, top[g])'
}

# check_spread DIR GROUPS: prints the deliveries by partition and, with
# data groups, each group's Raft log entries written during the run; fails
# unless the deliveries came from partitions of every group (the spread
# deals partition p to the group after partition p-1's, so p mod GROUPS
# tells groups apart) and every group's log took at least a quarter of its
# even share.
check_spread() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
d, g = sys.argv[1], int(sys.argv[2])
parts = {int(p): n for p, n in (json.load(open(f"{d}/b0.json"))["tally"].get("partitions") or {}).items()}
print("cluster-scale: deliveries by partition: " + ", ".join(f"{p}: {n}" for p, n in sorted(parts.items())), file=sys.stderr)
if g == 0:
    sys.exit(0)
def commits(name):
    return {int(a): int(b) for a, b in (line.split() for line in open(f"{d}/{name}") if line.strip())}
before, after = commits("commits-before"), commits("commits-after")
delta = {x: after.get(x, 0) - before.get(x, 0) for x in range(1, g + 1)}
total = sum(delta.values())
print("cluster-scale: Raft log entries during the run, group by group: " + ", ".join(f"{x}: {delta[x]}" for x in sorted(delta)), file=sys.stderr)
ok = True
used = len({p % g for p in parts})
if used != g:
    print(f"cluster-scale: the deliveries came from partitions of {used} of the {g} groups", file=sys.stderr)
    ok = False
for x, n in delta.items():
    if total == 0 or n < total / g / 4:
        print(f"cluster-scale: data group {x} took {n} of {total} log entries: the queue is not spread over it", file=sys.stderr)
        ok = False
sys.exit(0 if ok else 1)
EOF
}

# spread_costs NODES: each node's spread receive counts (metrics
# omnibus_spread_*: receives, the receives they asked of single groups,
# messages delivered, messages a group handed out that the receive
# released), and group receives and releases per delivered message: what
# a receive from the spread queue cost, whatever the machine's load.
spread_costs() {
  local i
  for i in $(seq 1 "$1"); do
    curl -s "http://127.0.0.1:$(port 3 "$i")/metrics" | awk -v node="$i" '
      /^omnibus_spread_receives_total/ { r += $2 } /^omnibus_spread_group_receives_total/ { g += $2 }
      /^omnibus_spread_delivered_total/ { d += $2 } /^omnibus_spread_released_total/ { x += $2 }
      /^omnibus_peer_calls_total/ { split($1, a, "\""); c[a[2]] += $2; t += $2 }
      END { printf "cluster-scale: node %s: spread receives %d, group receives %d, delivered %d, released %d; per delivered message: %.2f group receives, %.3f released, %.2f calls on other nodes (", node, r, g, d, x, g / (d ? d : 1), x / (d ? d : 1), t / (d ? d : 1)
            sep = ""; for (op in c) { printf "%s%s %.2f", sep, op, c[op] / (d ? d : 1); sep = ", " }; print ")" }' >&2
  done
}

# SERVE_FLAGS: more flags for every node's `omnibus serve` (an A/B of a
# setting, e.g. SERVE_FLAGS=--follower-apply-delay=-1ns).
#
# SYSCALLS=1: each node's system calls per message, counted by perf stat
# on the kernel's syscall tracepoints over the run but its first 2 and last
# 2 seconds, divided by the messages of that window at the run's rate.
SYSCALL_EVENTS=page-faults,syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync,syscalls:sys_enter_write,syscalls:sys_enter_pwrite64,syscalls:sys_enter_pwritev,syscalls:sys_enter_writev,syscalls:sys_enter_read,syscalls:sys_enter_futex
syscall_counts() {
  local dir=$1 n=$2 rate=$3 i window=$((${DURATION%s} - 4))
  for i in $(seq 1 "$n"); do
    awk -F, -v node="$i" -v msgs="$(awk -v r="$rate" -v w="$window" 'BEGIN { print r * w }')" '
      $3 ~ /^(syscalls:sys_enter_|page-faults)/ { sub("syscalls:sys_enter_", "", $3); out = out sprintf("%s%s %.3f", sep, $3, $1 / (msgs ? msgs : 1)); sep = ", " }
      END { print "cluster-scale: node " node ": system calls per message: " out }' "$dir/syscalls-node$i" >&2
  done
}

# run NODES GROUPS: one measurement; writes "rate cpu_per_msg_list" to
# $WORK/result.
run() {
  local n=$1 groups=$2 dir="$WORK/n$1-g$2${ROUND:+-r$ROUND}" q=$(($1 * ${QUEUES_PER_NODE:-$1})) peers="" i
  if [ "$SCENARIO" = partitioned ]; then q=0; fi
  mkdir -p "$dir"
  for i in $(seq 1 "$n"); do peers="$peers${peers:+,}$i=127.0.0.1:$(port 0 "$i")"; done
  {
    echo '{"UserConfig":{"Namespaces":[{"Name":"scale","Queues":['
    for i in $(seq 0 $((q - 1))); do
      [ "$i" -gt 0 ] && echo ','
      echo "{\"Name\":\"s$i\",\"Properties\":{\"LockDuration\":\"PT1M\",\"MaxDeliveryCount\":10}}"
    done
    echo ']}],"Logging":{"Type":"Console"}}}'
  } >"$dir/Config.json"
  "$BIN/omnibus" cluster init --node-id 1 --data "$dir/node1" >/dev/null
  for i in $(seq 1 "$n"); do
    for h in "$CG_CPU" "$CG_ACCT"; do mkdir -p "$h/omnibus-scale-$i"; done
    echo -1 >"$CG_CPU/omnibus-scale-$i/cpu.cfs_quota_us"
    echo "$PERIOD" >"$CG_CPU/omnibus-scale-$i/cpu.cfs_period_us"
    echo "$QUOTA" >"$CG_CPU/omnibus-scale-$i/cpu.cfs_quota_us"
    local extra=()
    if [ "$i" -gt 1 ]; then
      extra=(--join-token "$("$BIN/omnibus" cluster token --data "$dir/node1" --addr "127.0.0.1:$(port 0 1)" --node-id "$i" \
        --key-name "$KEYNAME" --key "$KEY" --timeout 60s)")
    fi
    bash -c 'echo $$ >'"$CG_CPU/omnibus-scale-$i/cgroup.procs"'; echo $$ >'"$CG_ACCT/omnibus-scale-$i/cgroup.procs"'; exec "$@"' -- \
      "$BIN/omnibus" serve --node-id "$i" --peers "$peers" --groups "$groups" --data "$dir/node$i" --config "$dir/Config.json" \
      --amqp-addr "127.0.0.1:$(port 1 "$i")" --amqps-addr - --http-addr "127.0.0.1:$(port 2 "$i")" --https-addr - \
      --metrics-addr "127.0.0.1:$(port 3 "$i")" --key-name "$KEYNAME" --key "$KEY" --log-level warn \
      --debug-addr "127.0.0.1:$(port 4 "$i")" "${extra[@]}" ${SERVE_FLAGS:-} >"$dir/node$i.log" 2>&1 &
    PIDS+=($!)
    if [ "$i" = 1 ]; then sleep 1; fi
  done
  # Ready once every queue is there, through node 1 (a follower proxies
  # HTTP to the leader; a routed node asks the queue's group).
  local auth deadline=$((SECONDS + 120))
  auth="Authorization: $("$BIN/omnibus" token --key-name "$KEYNAME" --key "$KEY")"
  for i in $(seq 0 $((q - 1))); do
    until curl -s -H "$auth" "http://127.0.0.1:$(port 2 1)/s$i" | grep -q QueueDescription; do
      [ $SECONDS -lt $deadline ] || { echo "cluster-scale: queue s$i never appeared" >&2; KEEP=1; exit 1; }
      sleep 0.5
    done
  done
  if [ "$SCENARIO" = partitioned ]; then create_partitioned "$deadline" "$auth"; fi
  # Every data group led by its preferred leader, node ((g-1) mod n) + 1
  # (one transfer a second per node): a transfer under load fails the
  # sends under way, and the load generator does not reconnect.
  if [ "$groups" -gt 0 ]; then
    until status_json "$dir" |
      python3 -c '
import json, sys
n, g = int(sys.argv[1]), int(sys.argv[2])
led = {}
for m in json.load(sys.stdin):
    for gs in m.get("groups") or []:
        if gs.get("serving"):
            led[gs["group"]] = m["id"]
sys.exit(0 if all(led.get(x) == (x - 1) % n + 1 for x in range(1, g + 1)) else 1)' "$n" "$groups"; do
      [ $SECONDS -lt $deadline ] || { echo "cluster-scale: the data groups never went to their preferred leaders" >&2; KEEP=1; exit 1; }
      sleep 0.5
    done
  fi
  # CLIENTS=leader with one group: every generator on its one leader.
  local oneLeader=""
  if [ "$groups" = 0 ] && [ "${CLIENTS:-}" = leader ]; then
    until oneLeader=$(status_json "$dir" |
      python3 -c '
import json, sys
led = [m["id"] for m in json.load(sys.stdin) if m.get("state") == "StateLeader" and m.get("serving")]
print(led[0]) if led else sys.exit(1)'); do
      [ $SECONDS -lt $deadline ] || { echo "cluster-scale: the one group never had a leader" >&2; KEEP=1; exit 1; }
      sleep 0.5
    done
  fi
  sleep 2
  local before=() after=() b
  local gen=(--duration "$((${DURATION%s} + ${WARMUP%s}))s" --warmup "$WARMUP")
  if [ -n "${BACKLOG:-}" ]; then gen+=(--max-backlog "$BACKLOG"); fi
  local bpids=()
  if [ "$SCENARIO" = partitioned ]; then
    status_commits "$dir" >"$dir/commits-before"
    local urls=""
    for i in $(seq 1 "$n"); do urls="$urls${urls:+,}amqp://127.0.0.1:$(port 1 "$i")"; done
    "$BIN/omnibus-tools" bench --scenario both --queue p --url "$urls" --connections $((n * ${CLIENTS_PER_NODE:-$n})) \
      --partition-keys "$KEYS" --size "$SIZE" "${gen[@]}" --quiet --pass "$KEY" --json "$dir/b0.json" >"$dir/b0.out" 2>&1 &
    bpids+=($!)
    q=1
  fi
  for i in $(seq 0 $((q - 1))); do
    [ "$SCENARIO" = partitioned ] && break
    local node=$((((i + i / n) % n) + 1))
    if [ "${CLIENTS:-}" = leader ]; then node=${oneLeader:-$(((i % n) + 1))}; fi
    "$BIN/omnibus-tools" bench --scenario both --queue "s$i" --url "amqp://127.0.0.1:$(port 1 "$node")" --size "$SIZE" \
      "${gen[@]}" --quiet --pass "$KEY" --json "$dir/b$i.json" >"$dir/b$i.out" 2>&1 &
    bpids+=($!)
  done
  sleep "${WARMUP%s}"
  for i in $(seq 1 "$n"); do before+=("$(cat "$CG_ACCT/omnibus-scale-$i/cpuacct.usage")"); done
  status_commits "$dir" >"$dir/measured-before" || true
  local fresh
  fresh=$(fresh_logs "$dir" "$n" "$groups")
  if [ -n "$fresh" ]; then
    echo "cluster-scale: n=$n groups=$groups: logs still writing fresh segments when the measurement began (a cluster's first minute; raise WARMUP):" $fresh >&2
  fi
  if [ "${SYSCALLS:-}" = 1 ]; then
    local window=$((${DURATION%s} - 4))
    for i in $(seq 1 "$n"); do
      (sleep 2 && perf stat -x, -e "$SYSCALL_EVENTS" -p "${PIDS[$((i - 1))]}" -o "$dir/syscalls-node$i" -- sleep "$window") &
    done
  fi
  if [ "${PROFILE:-}" = 1 ]; then
    for i in $(seq 1 "$n"); do
      curl -s -o "$WORK/profile-n$n-g$groups${ROUND:+-r$ROUND}-node$i.pb.gz" "http://127.0.0.1:$(port 4 "$i")/debug/pprof/profile?seconds=${PROFILE_SECONDS:-8}" &
    done
  fi
  local fail=0
  for b in "${bpids[@]}"; do wait "$b" || fail=1; done
  for i in $(seq 1 "$n"); do after+=("$(cat "$CG_ACCT/omnibus-scale-$i/cpuacct.usage")"); done
  status_commits "$dir" >"$dir/measured-after" || true
  if [ $fail != 0 ]; then
    echo "cluster-scale: a load generator failed:" >&2
    for f in "$dir"/b*.out; do grep -H -i -m3 "error\|fail" "$f" >&2 || true; done
    KEEP=1
    exit 1
  fi
  if [ "$SCENARIO" = partitioned ]; then
    status_commits "$dir" >"$dir/commits-after"
    grep -h "verified\|partitions" "$dir/b0.out" | sed "s/^/cluster-scale: n=$n groups=$groups: /" >&2
    check_spread "$dir" "$groups" || { KEEP=1; exit 1; }
    [ "$groups" -gt 0 ] && spread_costs "$n"
  fi
  (python3 - "$dir" "$q" "${before[*]}" "${after[*]}" <<'EOF'
import json, sys
d, q = sys.argv[1], int(sys.argv[2])
before = [int(x) for x in sys.argv[3].split()]
after = [int(x) for x in sys.argv[4].split()]
rate = msgs = 0
lives = []
for i in range(q):
    r = json.load(open(f"{d}/b{i}.json"))
    rate += r["sendRate"] + r["recvRate"]
    msgs += r["sent"] + r["received"]
    lives.append(r["e2eLatency"]["p50ms"])
cpu = ["%.1f" % ((a - b) / 1e3 / max(msgs, 1)) for a, b in zip(after, before)]
print("%.0f %s" % (rate, ",".join(cpu)))
# The Raft entries the load's groups committed over the measurement (the
# one group's, or the data groups' together): how many messages each
# carried tells how well the groups batch.
def commits(name):
    try:
        return {int(g): int(c) for g, c in (line.split() for line in open(f"{d}/measured-{name}") if line.strip())}
    except (OSError, ValueError):
        return None
b, a = commits("before"), commits("after")
if b and a:
    entries = sum(a[g] - b.get(g, 0) for g in a)
    print(f"cluster-scale: {d.rsplit('/', 1)[-1]}: {entries} Raft entries over the measurement, "
          f"{msgs / max(entries, 1):.0f} messages sent or received per entry", file=sys.stderr)
# How long the messages lived from send to delivery (the median of each
# generator's): past three quarters of a follower's hold (1.5 s by
# default) a message costs its followers an apply.
print(f"cluster-scale: {d.rsplit('/', 1)[-1]}: messages lived {min(lives):.0f}-{max(lives):.0f} ms "
      f"from send to delivery (each generator's median)", file=sys.stderr)
EOF
  ) >"$WORK/result"
  if [ "${SYSCALLS:-}" = 1 ]; then syscall_counts "$dir" "$n" "$(cut -d' ' -f1 "$WORK/result")"; fi
  # Each node's metrics at the end, for a look afterwards (KEEP=1).
  for i in $(seq 1 "$n"); do curl -s -o "$dir/metrics-node$i" "http://127.0.0.1:$(port 3 "$i")/metrics" || true; done
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  PIDS=()
  sleep 1
}

if [ "$SCENARIO" = partitioned ]; then
  printf '%s\n' "cluster-scale: each node held to $CPU cores (cpu.cfs_quota_us $QUOTA per $PERIOD), one partitioned queue (16 partitions)," \
    "one bench --scenario both over ${CLIENTS_PER_NODE:-n} connections per node, partition keys $KEYS, ${SIZE} B, $DURATION after a warm-up of $WARMUP; $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
else
  printf '%s\n' "cluster-scale: each node held to $CPU cores (cpu.cfs_quota_us $QUOTA per $PERIOD), ${QUEUES_PER_NODE:-n} queues per node," \
    "one bench --scenario both per queue, ${SIZE} B, $DURATION after a warm-up of $WARMUP; $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
fi
printf '| %-6s | %-7s | %-22s | %-34s | %-6s |\n' nodes groups "send+receive msg/s" "CPU µs per message, node by node" ratio
printf '|%s|%s|%s|%s|%s|\n' -------- --------- ------------------------ ------------------------------------ --------
# measure_one N and measure_groups N: one run of each kind, its rate left
# in $one or $many (measure_one prints its row; the data groups' row waits
# for the pair's ratio).
measure_one() {
  echo "load: $(uptime)" >&2
  run "$1" 0
  read -r one cpu1 <"$WORK/result"
  printf '| %-6s | %-7s | %-22s | %-34s | %-6s |\n' "$1" "1" "$one" "$cpu1" "1.00"
}
measure_groups() {
  echo "load: $(uptime)" >&2
  run "$1" "$1"
  read -r many cpun <"$WORK/result"
}

# median FORMAT NUMBER...: the median of the numbers, printed with FORMAT.
median() {
  local f=$1
  shift
  printf '%s\n' "$@" | sort -g | awk -v f="$f" '{ v[NR] = $1 } END { printf f, (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

ROUNDS=${ROUNDS:-1}
for n in $NODES; do
  ones=() manys=() ratios=()
  for r in $(seq 1 "$ROUNDS"); do
    one="" many=""
    if [ "$ROUNDS" -gt 1 ]; then ROUND=$r; fi
    if [ "${ONLY:-}" != groups ] && [ $((r % 2)) = 1 ]; then measure_one "$n"; ones+=("$one"); fi
    if [ "${ONLY:-}" != one ]; then measure_groups "$n"; manys+=("$many"); fi
    if [ "${ONLY:-}" != groups ] && [ $((r % 2)) = 0 ]; then measure_one "$n"; ones+=("$one"); fi
    [ "${ONLY:-}" = one ] && continue
    ratio=-
    if [ -n "$one" ]; then ratio=$(awk -v a="$many" -v b="$one" 'BEGIN { printf "%.2f", a / b }'); ratios+=("$ratio"); fi
    printf '| %-6s | %-7s | %-22s | %-34s | %-6s |\n' "$n" "$n" "$many" "$cpun" "$ratio"
  done
  if [ "$ROUNDS" -gt 1 ]; then
    printf '| %-6s | %-7s | %-22s | %-34s | %-6s |\n' "$n" "median" \
      "${ones[*]:+1: $(median %.0f "${ones[@]}")}${ones[*]:+${manys[*]:+, }}${manys[*]:+$n: $(median %.0f "${manys[@]}")}" "of $ROUNDS rounds" \
      "$([ ${#ratios[@]} -gt 0 ] && median %.2f "${ratios[@]}" || echo -)"
  fi
done
