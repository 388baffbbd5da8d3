# Sourced by compare.sh: start and stop a private RabbitMQ on loopback.
#
# The node lives entirely under $RMQ_DIR with its own epmd, ports and
# cookie, so it neither needs nor disturbs a system-wide RabbitMQ. It is
# started through /usr/lib/rabbitmq/bin/rabbitmq-server, not the /usr/sbin
# wrapper, which switches HOME (and with it the CLI's Erlang cookie).

RMQ_BIN=/usr/lib/rabbitmq/bin

rmq_install() {
	if [ -x "$RMQ_BIN/rabbitmq-server" ]; then return 0; fi
	echo "== installing rabbitmq-server from Debian packages"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null
	# The package starts a system node; we run our own.
	if command -v systemctl >/dev/null 2>&1; then systemctl stop rabbitmq-server 2>/dev/null || true; fi
}

# rmq_env exports what the server and the CLI tools need to find our node.
rmq_env() {
	export HOME="$RMQ_DIR/home"
	export RABBITMQ_MNESIA_BASE="$RMQ_DIR/mnesia"
	export RABBITMQ_LOG_BASE="$RMQ_DIR/log"
	export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
	export RABBITMQ_NODE_PORT="$RMQ_PORT"
	export RABBITMQ_DIST_PORT="$RMQ_DIST_PORT"
	export RABBITMQ_NODENAME="omnibus-bench@localhost"
	export RABBITMQ_ENABLED_PLUGINS_FILE="$RMQ_DIR/enabled_plugins"
	export RABBITMQ_CONFIG_FILE="$RMQ_DIR/rabbitmq.conf"
	export RABBITMQ_PID_FILE="$RMQ_DIR/rabbitmq.pid"
	export ERL_EPMD_PORT="$RMQ_EPMD_PORT"
}

# rmq_start starts epmd and the node and waits until the management API
# answers. It sets RMQ_EPMD_PID and RMQ_PID (the server script's PID).
# RMQ_PREFIX, an array, if set, prefixes the node's command (compare.sh
# pins the node to the broker's CPUs with it; Erlang then starts one
# scheduler per CPU it may use).
rmq_start() {
	mkdir -p "$RMQ_DIR/home" "$RMQ_DIR/mnesia" "$RMQ_DIR/log"
	echo '[rabbitmq_amqp1_0,rabbitmq_management].' >"$RMQ_DIR/enabled_plugins"
	cat >"$RMQ_DIR/rabbitmq.conf" <<-EOF
		listeners.tcp.default = 127.0.0.1:$RMQ_PORT
		management.tcp.ip = 127.0.0.1
		management.tcp.port = $RMQ_MGMT_PORT
		# The bench fills queues with hundreds of thousands of messages.
		vm_memory_high_watermark.relative = 0.6
		disk_free_limit.absolute = 1GB
	EOF
	(
		rmq_env
		exec epmd -port "$RMQ_EPMD_PORT"
	) >"$RMQ_DIR/epmd.log" 2>&1 &
	RMQ_EPMD_PID=$!
	(
		rmq_env
		exec ${RMQ_PREFIX[@]+"${RMQ_PREFIX[@]}"} "$RMQ_BIN/rabbitmq-server"
	) >"$RMQ_DIR/server.log" 2>&1 &
	RMQ_PID=$!
	local i
	for i in $(seq 1 120); do
		if curl -fsS -u guest:guest "http://127.0.0.1:$RMQ_MGMT_PORT/api/overview" >/dev/null 2>&1; then
			return 0
		fi
		if ! kill -0 "$RMQ_PID" 2>/dev/null; then break; fi
		sleep 0.5
	done
	echo "RabbitMQ did not start; its log:" >&2
	tail -30 "$RMQ_DIR/server.log" >&2
	return 1
}

# rmq_beam_pid prints the PID of the node's Erlang VM (beam.smp), the
# process that does RabbitMQ's work, a descendant of RMQ_PID.
rmq_beam_pid() {
	pgrep -f "beam.*-home $RMQ_DIR/home" | head -1
}

# rmq_api METHOD PATH [BODY] calls the management API.
rmq_api() {
	curl -fsS -u guest:guest -X "$1" -H 'content-type: application/json' \
		${3:+--data "$3"} "http://127.0.0.1:$RMQ_MGMT_PORT/api$2" >/dev/null
}

# rmq_queue NAME TYPE declares a durable queue of TYPE (classic, quorum).
rmq_queue() {
	rmq_api PUT "/queues/%2F/$1" "{\"durable\":true,\"auto_delete\":false,\"arguments\":{\"x-queue-type\":\"$2\"}}"
}

# rmq_delete NAME deletes a queue and its messages.
rmq_delete() { rmq_api DELETE "/queues/%2F/$1" || true; }

# rmq_version prints the RabbitMQ and Erlang versions.
rmq_version() {
	curl -fsS -u guest:guest "http://127.0.0.1:$RMQ_MGMT_PORT/api/overview" |
		sed -n 's/.*"rabbitmq_version":"\([^"]*\)".*"erlang_version":"\([^"]*\)".*/RabbitMQ \1, Erlang \2/p'
}

# rmq_stop stops the node (TERM to beam.smp, the server script's child)
# and then epmd, each by PID.
rmq_stop() {
	if [ -n "${RMQ_PID:-}" ]; then
		local beam
		beam=$(pgrep -P "$RMQ_PID" 2>/dev/null || true)
		if [ -n "$beam" ]; then kill -TERM $beam 2>/dev/null || true; fi
		kill -TERM "$RMQ_PID" 2>/dev/null || true
		local i
		for i in $(seq 1 60); do
			if ! kill -0 "$RMQ_PID" 2>/dev/null && { [ -z "$beam" ] || ! kill -0 $beam 2>/dev/null; }; then break; fi
			sleep 0.5
		done
		if [ -n "$beam" ]; then kill -KILL $beam 2>/dev/null || true; fi
		kill -KILL "$RMQ_PID" 2>/dev/null || true
		RMQ_PID=
	fi
	if [ -n "${RMQ_EPMD_PID:-}" ]; then
		kill -TERM "$RMQ_EPMD_PID" 2>/dev/null || true
		RMQ_EPMD_PID=
	fi
}
