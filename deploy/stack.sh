#!/usr/bin/env bash
# Local development stack of flashsale: Redis, PostgreSQL and Apache Kafka
# (KRaft, deploy/kafka.sh), each bound to 127.0.0.1 with its data, log and
# pid files under one folder.
#
#   deploy/stack.sh up | down | status | wipe
#   deploy/stack.sh start | stop | restart  redis | postgres | kafka | redis-cluster | kafka-cluster
#   deploy/stack.sh redis-kill-master [PORT] | kafka-kill-node ID | kafka-start-node ID
#
# With FLASHSALE_CLUSTER=1, up also starts the scaled-out shape: a Redis
# Cluster of 3 masters and 3 replicas and a Kafka cluster of 3 nodes
# (make up CLUSTER=1).
#
# Every command is idempotent. See deploy/README.md.
set -euo pipefail

usage() {
	cat <<'EOF'
usage: deploy/stack.sh COMMAND [SERVICE]

  up                      install missing packages, start every service, wait until each answers
  down                    stop every service gracefully
  status                  show each service (exit 3 when one is not running)
  start|stop|restart SVC  control one service: redis, postgres, kafka, redis-cluster or
                          kafka-cluster (start redis-cluster after a kill: brings back the dead
                          nodes once their replicas took over; they rejoin as replicas; start
                          kafka-cluster: starts the nodes that are not running)
  redis-kill-master [PORT] SIGKILL one cluster master (PORT, or the first master found) and
                          print its port; for failover tests
  kafka-kill-node ID      SIGKILL Kafka cluster node ID (1..3) and print its pid
  kafka-start-node ID     start Kafka cluster node ID again without waiting (start kafka-cluster
                          starts every dead node and waits for all three)
  wipe                    down, then delete the data folder

environment (defaults in brackets; the ports' defaults are deploy/stack.env's):
  FLASHSALE_STACK_DIR          data, logs and pid files [<repo>/.stack]
  FLASHSALE_REDIS_PORT         [16379]
  FLASHSALE_PG_PORT            [15432]
  FLASHSALE_KAFKA_PORT         one-node Kafka's client port; controller +1, proxied listener +2/+3 [19092]
  FLASHSALE_KAFKA_CLUSTER_PORT first client port of the 3-node Kafka cluster; controllers +10,
                               proxied listeners +20/+30 [19101]
  FLASHSALE_KAFKA_PARTITIONS   partitions of the flash-sale topics and of auto-created ones [12]
  FLASHSALE_KAFKA_HEAP         JVM heap flags of each Kafka node [-Xms256m -Xmx1g]
  KAFKA_HOME                   an Apache Kafka 4.x distribution to run instead of Maven Central's jars
  FLASHSALE_STACK_WAIT         seconds to wait for a service to answer [60]
  FLASHSALE_CLUSTER            1: up, status and down include the Redis Cluster and the Kafka
                               cluster [0] (FLASHSALE_REDIS_CLUSTER is read too)
  FLASHSALE_REDIS_CLUSTER_PORT first of the 6 cluster node ports [17001]; each node's
                               cluster bus is its port + 10000 (port - 10000 above 55535)
EOF
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
# The ports (deploy/stack.env), unless the environment sets them.
# shellcheck source=deploy/stackenv.sh
source "$ROOT/deploy/stackenv.sh"
STACK="${FLASHSALE_STACK_DIR:-$ROOT/.stack}"
REDIS_PORT="$FLASHSALE_REDIS_PORT"
PG_PORT="$FLASHSALE_PG_PORT"
WAIT="${FLASHSALE_STACK_WAIT:-60}"
CLUSTER="${FLASHSALE_CLUSTER:-${FLASHSALE_REDIS_CLUSTER:-0}}"
CLUSTER_PORT="$FLASHSALE_REDIS_CLUSTER_PORT"
CLUSTER_NODES=6 # 3 masters, 3 replicas
HOST=127.0.0.1
PG_USER=flashsale
PG_DB=flashsale

REDIS_DIR="$STACK/redis"
REDIS_PID="$REDIS_DIR/redis.pid"
REDIS_LOG="$REDIS_DIR/redis.log"
CLUSTER_DIR="$STACK/redis-cluster"
# PG_BASE (data, socket, log) is resolved lazily by pg_resolve: it may have to
# live outside $STACK when the postgres user cannot reach $STACK.
PG_BASE=""

die() {
	echo "stack: error: $*" >&2
	exit 1
}
note() { echo "stack: $*" >&2; }
is_root() { [[ "$(id -u)" -eq 0 ]]; }

# tail_log prints the end of a server log after a failure.
tail_log() {
	local log="$1"
	if [[ -r "$log" ]]; then
		echo "---- last lines of $log ----" >&2
		tail -n 30 "$log" >&2 || true
		echo "----" >&2
	else
		echo "(no log at $log)" >&2
	fi
}

# port_open succeeds when something accepts TCP connections on 127.0.0.1:$1.
port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# proc_running PID: the process exists and is not a zombie. A daemonized
# server's parent is PID 1, which in a container may reap it only seconds
# after it exited.
proc_running() {
	kill -0 "$1" 2>/dev/null || return 1
	! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

# pid_alive PIDFILE NAME: the pid in PIDFILE runs and its command line
# contains NAME, so a recycled pid is never mistaken for our server.
pid_alive() {
	local pidfile="$1" name="$2" pid
	[[ -s "$pidfile" ]] || return 1
	pid="$(<"$pidfile")"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	proc_running "$pid" || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$name"
}

# wait_gone PID SECONDS waits for a process to exit.
wait_gone() {
	local pid="$1" deadline=$((SECONDS + $2))
	while proc_running "$pid"; do
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

# ---------------------------------------------------------------- packages

pg_bin_dir() {
	# Newest installed PostgreSQL server, or nothing.
	local initdb
	initdb="$(printf '%s\n' /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)"
	if [[ -x "$initdb" ]]; then dirname "$initdb"; fi
}

find_go() {
	if command -v go >/dev/null 2>&1; then
		command -v go
	elif [[ -x /usr/local/go/bin/go ]]; then # sudo drops it from PATH
		echo /usr/local/go/bin/go
	fi
}

ensure_packages() {
	local missing=()
	if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
		missing+=(redis-server)
	fi
	[[ -n "$(pg_bin_dir)" ]] || missing+=(postgresql)
	# curl: readiness checks of the services in demo.sh
	command -v curl >/dev/null 2>&1 || missing+=(curl)
	# prometheus: promtool checks and tests the alert rules (make test);
	# make up MONITOR=1 runs the server (deploy/prometheus.sh)
	command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
	# a JRE for Apache Kafka, Maven to fetch its jars (deploy/kafka.sh)
	local kp
	for kp in $(kafka_packages); do missing+=("$kp"); done
	# chromium: the browser tests of the sale page and dashboard (chromedp,
	# no driver). Optional without root: those tests then skip and say why.
	local optional=()
	[[ -x /usr/bin/chromium ]] || optional+=(chromium)
	if ! is_root && ((${#optional[@]} > 0)); then
		note "browser tests will skip; to run them: sudo apt-get install -y --no-install-recommends ${optional[*]}"
	elif ((${#optional[@]} > 0)); then
		missing+=("${optional[@]}")
	fi
	if ((${#missing[@]} > 0)); then
		if ! is_root; then
			die "missing packages; install them with: sudo apt-get install -y --no-install-recommends ${missing[*]}"
		fi
		command -v apt-get >/dev/null 2>&1 || die "missing packages (${missing[*]}) and no apt-get to install them"
		local log="$STACK/apt.log"
		mkdir -p "$STACK"
		note "installing ${missing[*]} (apt-get, log in $log)"
		apt-get update >"$log" 2>&1 || {
			tail_log "$log"
			die "apt-get update failed"
		}
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >>"$log" 2>&1 || {
			tail_log "$log"
			die "apt-get install ${missing[*]} failed"
		}
		command -v redis-server >/dev/null 2>&1 || die "redis-server still missing after install"
		[[ -n "$(pg_bin_dir)" ]] || die "PostgreSQL server binaries still missing after install"
		java_ok || die "java 17 or newer still missing after install"
	fi
	[[ -n "$(find_go)" ]] || die "go not found; install Go 1.26 or newer from https://go.dev/dl/ (it builds kafka-admin and the services)"
	command -v gcc >/dev/null 2>&1 ||
		die "gcc not found; install it with: sudo apt-get install -y gcc (confluent-kafka-go needs cgo)"
}

# ---------------------------------------------------------------- redis

redis_running() { pid_alive "$REDIS_PID" redis-server; }

redis_start() {
	if redis_running; then return 0; fi
	command -v redis-server >/dev/null 2>&1 || ensure_packages
	if port_open "$REDIS_PORT"; then
		die "port $REDIS_PORT is taken by a process that is not this stack's Redis (set FLASHSALE_REDIS_PORT)"
	fi
	mkdir -p "$REDIS_DIR"
	rm -f "$REDIS_PID"
	# No config file, so nothing from Debian's /etc/redis or its system
	# instance on 6379 applies. No persistence on purpose: a restart loses
	# every key, which the fault tests rely on.
	redis-server --port "$REDIS_PORT" --bind "$HOST" --protected-mode no \
		--save "" --appendonly no --maxmemory 0 \
		--daemonize yes --pidfile "$REDIS_PID" --logfile "$REDIS_LOG" --dir "$REDIS_DIR" \
		</dev/null >/dev/null 2>&1 9>&- || {
		tail_log "$REDIS_LOG"
		die "redis-server failed to start"
	}
	local deadline=$((SECONDS + WAIT))
	until [[ "$(redis-cli -h "$HOST" -p "$REDIS_PORT" ping 2>/dev/null)" == PONG ]]; do
		if ((SECONDS >= deadline)); then
			tail_log "$REDIS_LOG"
			die "redis did not answer PING on $HOST:$REDIS_PORT within ${WAIT}s"
		fi
		sleep 0.1
	done
}

redis_stop() {
	if ! redis_running; then
		rm -f "$REDIS_PID"
		return 0
	fi
	local pid
	pid="$(<"$REDIS_PID")"
	redis-cli -h "$HOST" -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
	if ! wait_gone "$pid" 10; then
		kill -TERM "$pid" 2>/dev/null || true
		wait_gone "$pid" 10 || {
			note "redis (pid $pid) ignored SHUTDOWN and SIGTERM; killing it"
			kill -KILL "$pid" 2>/dev/null || true
			wait_gone "$pid" 5 || die "redis (pid $pid) does not die"
		}
	fi
	rm -f "$REDIS_PID"
}

redis_status() {
	if redis_running && [[ "$(redis-cli -h "$HOST" -p "$REDIS_PORT" ping 2>/dev/null)" == PONG ]]; then
		printf '%-9s running  %s:%s  pid %s  redis://%s:%s\n' redis "$HOST" "$REDIS_PORT" "$(<"$REDIS_PID")" "$HOST" "$REDIS_PORT"
	else
		printf '%-9s stopped  %s:%s\n' redis "$HOST" "$REDIS_PORT"
		return 1
	fi
}

# ---------------------------------------------------------------- redis cluster
#
# Six redis-server processes from the same binary as the single node, each
# in its own folder (redis-cluster/<port>), no persistence either: a node
# that restarts comes back empty. Only nodes.conf (the cluster's own map of
# who owns which slots) survives a restart, so a killed master that is
# started again learns that its replica took over and rejoins as a replica
# of it instead of serving its empty memory as the truth.

rc_ports() { seq "$CLUSTER_PORT" $((CLUSTER_PORT + CLUSTER_NODES - 1)); }

# rc_bus_port PORT: the node's cluster bus port. Redis' default is port +
# 10000, which does not exist above 55535; those ports count down instead.
rc_bus_port() {
	if (($1 + 10000 <= 65535)); then echo $(($1 + 10000)); else echo $(($1 - 10000)); fi
}

rc_cli() { # PORT ARGS...
	local port="$1"
	shift
	redis-cli -h "$HOST" -p "$port" "$@" 2>/dev/null
}

rc_node_running() { pid_alive "$CLUSTER_DIR/$1/redis.pid" redis-server; }

rc_info_field() { # PORT FIELD: one field of CLUSTER INFO
	rc_cli "$1" cluster info | tr -d '\r' | sed -n "s/^$2://p"
}

rc_node_start() { # PORT
	local port="$1" dir="$CLUSTER_DIR/$1" bus
	if rc_node_running "$port"; then return 0; fi
	bus="$(rc_bus_port "$port")"
	if port_open "$port"; then
		die "port $port is taken by a process that is not this stack's Redis Cluster node (set FLASHSALE_REDIS_CLUSTER_PORT)"
	fi
	if port_open "$bus"; then
		die "cluster bus port $bus of node $port is taken (set FLASHSALE_REDIS_CLUSTER_PORT)"
	fi
	mkdir -p "$dir"
	# A replica's full sync leaves the master's snapshot in dump.rdb even
	# with --save "", and redis-server loads any dump.rdb it finds: a node
	# restarted on it would come back with stale keys (and `cluster create`
	# refuses a node with keys). No persistence means starting empty.
	rm -f "$dir/redis.pid" "$dir/dump.rdb"
	# A small node timeout makes failover quick (a master is declared
	# failed after 2 s). Replicas always stand for election however long
	# their link was down (validity factor 0): with no persistence there is
	# no better copy to wait for. Partial coverage keeps the slots of the
	# live masters serving while one master is failing over.
	redis-server --port "$port" --bind "$HOST" --protected-mode no \
		--save "" --appendonly no --maxmemory 0 \
		--cluster-enabled yes --cluster-config-file nodes.conf --cluster-port "$bus" \
		--cluster-node-timeout 2000 --cluster-replica-validity-factor 0 \
		--cluster-require-full-coverage no \
		--daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir" \
		</dev/null >/dev/null 2>&1 9>&- || {
		tail_log "$dir/redis.log"
		die "redis-server (cluster node $port) failed to start"
	}
	local deadline=$((SECONDS + WAIT))
	until [[ "$(rc_cli "$port" ping)" == PONG ]]; do
		if ((SECONDS >= deadline)); then
			tail_log "$dir/redis.log"
			die "cluster node did not answer PING on $HOST:$port within ${WAIT}s"
		fi
		sleep 0.1
	done
}

rc_node_stop() { # PORT
	local port="$1" pidfile="$CLUSTER_DIR/$1/redis.pid" pid
	if ! rc_node_running "$port"; then
		rm -f "$pidfile"
		return 0
	fi
	pid="$(<"$pidfile")"
	rc_cli "$port" shutdown nosave >/dev/null || true
	if ! wait_gone "$pid" 10; then
		kill -KILL "$pid" 2>/dev/null || true
		wait_gone "$pid" 5 || die "cluster node $port (pid $pid) does not die"
	fi
	rm -f "$pidfile"
}

# rc_healthy PORT: the node sees the whole cluster: every slot served, six
# nodes known, and (for a replica) its link to the master up.
rc_healthy() {
	local port="$1" info
	info="$(rc_cli "$port" cluster info | tr -d '\r')" || return 1
	grep -qx 'cluster_state:ok' <<<"$info" || return 1
	grep -qx 'cluster_slots_ok:16384' <<<"$info" || return 1
	grep -qx "cluster_known_nodes:$CLUSTER_NODES" <<<"$info" || return 1
	local repl
	repl="$(rc_cli "$port" info replication | tr -d '\r')" || return 1
	if grep -qx 'role:slave' <<<"$repl"; then
		grep -qx 'master_link_status:up' <<<"$repl" || return 1
	fi
	# No node is still flagged failed or suspected (a restarted node is
	# known again). The flags are the third field; "nofailover" is not one.
	local nodes
	nodes="$(rc_cli "$port" cluster nodes)" || return 1
	! awk '$3 ~ /(^|,)fail\??(,|$)/ { found = 1 } END { exit !found }' <<<"$nodes"
}

rc_all_healthy() {
	local p
	for p in $(rc_ports); do
		rc_node_running "$p" && rc_healthy "$p" || return 1
	done
	# three masters with slots, each with one replica
	local masters
	masters="$(rc_cli "$CLUSTER_PORT" cluster nodes | awk '$3 ~ /master/ && NF > 8' | wc -l)"
	[[ "$masters" -eq 3 ]]
}

rc_wait_healthy() {
	local deadline=$((SECONDS + WAIT)) p
	until rc_all_healthy; do
		if ((SECONDS >= deadline)); then
			for p in $(rc_ports); do
				echo "---- node $p: $(rc_info_field "$p" cluster_state)" >&2
				rc_cli "$p" cluster nodes >&2 || true
			done
			die "redis cluster not healthy within ${WAIT}s (try: deploy/stack.sh restart redis-cluster)"
		fi
		sleep 0.2
	done
}

# rc_covered PORT: a live node reports every slot served by a live master
# (the failover of a killed master is over).
rc_covered() {
	[[ "$(rc_info_field "$1" cluster_state)" == ok && "$(rc_info_field "$1" cluster_slots_ok)" == 16384 ]]
}

# rc_settled LIVE DEAD: node LIVE no longer counts on the dead node DEAD as a
# master: it is a replica, or the cluster agreed it failed (flag "fail", not
# the suspicion "fail?"). Right after a SIGKILL the survivors still report
# every slot ok until cluster-node-timeout passes, so rc_covered alone would
# let an empty master back before its replica took over.
rc_settled() {
	local flags
	flags="$(rc_cli "$1" cluster nodes | tr -d '\r' | awk -v a="$HOST:$2@" 'index($2, a) == 1 { print $3 }')"
	[[ -z "$flags" || "$flags" == *slave* || ",$flags," == *,fail,* ]]
}

rc_create() {
	local p addrs=()
	for p in $(rc_ports); do
		rc_node_stop "$p"
		rm -f "$CLUSTER_DIR/$p/nodes.conf"
		rc_node_start "$p"
		addrs+=("$HOST:$p")
	done
	note "creating redis cluster on ${addrs[*]} (3 masters, 3 replicas)"
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
		>"$CLUSTER_DIR/create.log" 2>&1 || {
		tail_log "$CLUSTER_DIR/create.log"
		die "redis-cli --cluster create failed"
	}
	rc_wait_healthy
}

# all_settled LIVE DEAD...: rc_settled for every dead node.
all_settled() {
	local live="$1" p
	shift
	for p in "$@"; do rc_settled "$live" "$p" || return 1; done
}

redis-cluster_running() { rc_all_healthy; }

redis-cluster_start() {
	command -v redis-server >/dev/null 2>&1 || ensure_packages
	mkdir -p "$CLUSTER_DIR"
	if rc_all_healthy; then return 0; fi
	local p alive=() dead=()
	for p in $(rc_ports); do
		if rc_node_running "$p"; then alive+=("$p"); else dead+=("$p"); fi
	done
	if ((${#alive[@]} == 0)); then
		# Nothing survives a full stop (no persistence), so a full start is
		# a fresh cluster: no stale nodes.conf to reconcile.
		rc_create
		return 0
	fi
	if ((${#dead[@]} > 0)); then
		# Bring dead nodes back only once their slots have a live master
		# again: a master restarted empty before its replica took over would
		# be followed by that replica, and the slots' data would be gone.
		local deadline=$((SECONDS + WAIT))
		until rc_covered "${alive[0]}" && all_settled "${alive[0]}" "${dead[@]}"; do
			if ((SECONDS >= deadline)); then
				note "slots still uncovered after ${WAIT}s; starting the dead nodes anyway"
				break
			fi
			sleep 0.2
		done
		for p in "${dead[@]}"; do rc_node_start "$p"; done
	fi
	rc_wait_healthy
}

redis-cluster_stop() {
	local p
	for p in $(rc_ports); do rc_node_stop "$p"; done
}

redis-cluster_status() {
	local p role rc=0
	for p in $(rc_ports); do
		if rc_node_running "$p" && [[ "$(rc_cli "$p" ping)" == PONG ]]; then
			role="$(rc_cli "$p" info replication | tr -d '\r' | sed -n 's/^role://p')"
			printf '%-9s running  %s:%s  pid %s  %s, cluster %s\n' redis-cl "$HOST" "$p" \
				"$(<"$CLUSTER_DIR/$p/redis.pid")" "${role/slave/replica}" "$(rc_info_field "$p" cluster_state)"
		else
			printf '%-9s stopped  %s:%s\n' redis-cl "$HOST" "$p"
			rc=1
		fi
	done
	if ((rc == 0)) && ! rc_all_healthy; then
		note "redis cluster is running but not healthy (failover in progress, or run: deploy/stack.sh start redis-cluster)"
		rc=1
	fi
	echo "FLASHSALE_REDIS_ADDR=$(rc_ports | sed "s/^/$HOST:/" | paste -sd,)"
	return "$rc"
}

# rc_any_running: some cluster node of this stack runs.
rc_any_running() {
	local p
	for p in $(rc_ports); do rc_node_running "$p" && return 0; done
	return 1
}

# rc_kill_master [PORT]: SIGKILL one master (no SHUTDOWN, no goodbye to the
# cluster), as a crashed machine would; print its port.
rc_kill_master() {
	local port="${1:-}" p pid
	if [[ -z "$port" ]]; then
		for p in $(rc_ports); do
			if rc_node_running "$p" && [[ "$(rc_cli "$p" info replication | tr -d '\r' | sed -n 's/^role://p')" == master ]]; then
				port="$p"
				break
			fi
		done
		[[ -n "$port" ]] || die "no running cluster master"
	fi
	rc_node_running "$port" || die "cluster node $port is not running"
	pid="$(<"$CLUSTER_DIR/$port/redis.pid")"
	kill -KILL "$pid"
	wait_gone "$pid" 10 || die "cluster node $port (pid $pid) survived SIGKILL"
	echo "$port"
}

# ---------------------------------------------------------------- postgres

pg_fallback_base() {
	# Keyed by the stack folder (which defaults to <repo>/.stack), so two
	# stacks never share a cluster.
	local h
	h="$(printf '%s' "$STACK" | sha256sum | cut -c1-8)"
	echo "/tmp/flashsale-pg-$(id -u)-$h"
}

# as_pg runs a PostgreSQL program as the postgres user when we are root
# (the server refuses to run as root), from / so its cwd is reachable.
as_pg() {
	if is_root; then
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

# pg_resolve sets PG_BASE: the existing cluster if there is one, else (when
# CREATE is "create") a new folder the server's user can reach.
pg_resolve() {
	local create="${1:-}" primary="$STACK/postgres" fallback
	fallback="$(pg_fallback_base)"
	if [[ -f "$primary/data/PG_VERSION" ]]; then
		PG_BASE="$primary"
	elif [[ -f "$fallback/data/PG_VERSION" ]]; then
		PG_BASE="$fallback"
	else
		PG_BASE="$primary"
		if [[ "$create" == create ]]; then
			mkdir -p "$primary"
			if is_root; then
				chown postgres:postgres "$primary"
				chmod 700 "$primary"
				if ! as_pg test -x "$primary" -a -w "$primary"; then
					rmdir "$primary" 2>/dev/null || true
					PG_BASE="$fallback"
					note "postgres user cannot reach $primary; PostgreSQL data goes to $PG_BASE instead"
					mkdir -p "$PG_BASE"
					chown postgres:postgres "$PG_BASE"
					chmod 700 "$PG_BASE"
				fi
			fi
		fi
	fi
	PG_DATA="$PG_BASE/data"
	PG_SOCK="$PG_BASE/sock"
	PG_LOG="$PG_BASE/postgres.log"
	if ((${#PG_SOCK} > 100)); then
		die "unix socket folder $PG_SOCK is too long for PostgreSQL (max ~100 chars); set FLASHSALE_STACK_DIR to a shorter path"
	fi
}

# pg_bin picks the binaries matching an existing cluster, else the newest.
pg_bin() {
	local ver bin
	if [[ -f "$PG_DATA/PG_VERSION" ]]; then
		ver="$(<"$PG_DATA/PG_VERSION")"
		bin="/usr/lib/postgresql/$ver/bin"
		[[ -x "$bin/postgres" ]] ||
			die "cluster in $PG_DATA is PostgreSQL $ver but $bin is not installed; install postgresql-$ver or run: deploy/stack.sh wipe"
		echo "$bin"
		return 0
	fi
	bin="$(pg_bin_dir)"
	[[ -n "$bin" ]] || die "no PostgreSQL server binaries under /usr/lib/postgresql (run: deploy/stack.sh up)"
	echo "$bin"
}

pg_running() {
	pg_resolve
	[[ -f "$PG_DATA/PG_VERSION" ]] || return 1
	as_pg "$(pg_bin)/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1
}

pg_start() {
	local bin
	if pg_running; then
		pg_ensure_db
		return 0
	fi
	[[ -n "$(pg_bin_dir)" ]] || ensure_packages
	pg_resolve create
	bin="$(pg_bin)"
	if port_open "$PG_PORT"; then
		die "port $PG_PORT is taken by a process that is not this stack's PostgreSQL (set FLASHSALE_PG_PORT)"
	fi
	if [[ ! -f "$PG_DATA/PG_VERSION" ]]; then
		note "initializing PostgreSQL cluster in $PG_DATA"
		as_pg "$bin/initdb" -D "$PG_DATA" -U "$PG_USER" -A trust --encoding=UTF8 --locale=C >"$STACK/initdb.log" 2>&1 || {
			tail_log "$STACK/initdb.log"
			die "initdb failed"
		}
	fi
	if is_root; then
		install -d -o postgres -g postgres -m 700 "$PG_SOCK"
		[[ -e "$PG_LOG" ]] || install -o postgres -g postgres -m 600 /dev/null "$PG_LOG"
	else
		mkdir -p "$PG_SOCK"
	fi
	# Settings go on the command line so a changed port applies to an
	# existing cluster too. fsync stays on: durability claims are tested.
	# pg_ctl -w waits until the server accepts connections and notices
	# when it dies during startup.
	as_pg "$bin/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t "$WAIT" -s start -o "$(printf '%s ' \
		-p "$PG_PORT" \
		-c listen_addresses="$HOST" \
		-c unix_socket_directories="$PG_SOCK" \
		-c max_connections=200 \
		-c shared_buffers=256MB \
		-c fsync=on)" </dev/null >/dev/null 2>&1 9>&- || {
		tail_log "$PG_LOG"
		die "postgres did not start on $HOST:$PG_PORT within ${WAIT}s"
	}
	local deadline=$((SECONDS + WAIT))
	until "$bin/pg_isready" -q -h "$HOST" -p "$PG_PORT"; do
		if ((SECONDS >= deadline)); then
			tail_log "$PG_LOG"
			die "postgres started but does not answer on $HOST:$PG_PORT"
		fi
		sleep 0.2
	done
	pg_ensure_db
}

pg_psql() {
	"$(pg_bin)/psql" -X -q -v ON_ERROR_STOP=1 -h "$HOST" -p "$PG_PORT" -U "$PG_USER" "$@"
}

pg_ensure_db() {
	local exists
	exists="$(pg_psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" ||
		die "cannot query PostgreSQL on $HOST:$PG_PORT as $PG_USER"
	if [[ "$exists" != 1 ]]; then
		pg_psql -d postgres -c "CREATE DATABASE $PG_DB" >/dev/null || die "create database $PG_DB failed"
	fi
}

pg_stop() {
	if ! pg_running; then return 0; fi
	# fast: disconnect clients and shut down with a checkpoint; smart would
	# wait forever for connection pools to go away.
	as_pg "$(pg_bin)/pg_ctl" -D "$PG_DATA" -m fast -w -t "$WAIT" -s stop >/dev/null || {
		tail_log "$PG_LOG"
		die "pg_ctl stop failed"
	}
}

pg_status() {
	if pg_running && "$(pg_bin)/pg_isready" -q -h "$HOST" -p "$PG_PORT"; then
		printf '%-9s running  %s:%s  data %s  postgres://%s@%s:%s/%s?sslmode=disable\n' \
			postgres "$HOST" "$PG_PORT" "$PG_DATA" "$PG_USER" "$HOST" "$PG_PORT" "$PG_DB"
	else
		printf '%-9s stopped  %s:%s\n' postgres "$HOST" "$PG_PORT"
		return 1
	fi
}

# ---------------------------------------------------------------- kafka

# shellcheck source=deploy/kafka.sh
source "$ROOT/deploy/kafka.sh"

# ---------------------------------------------------------------- commands

SERVICES=(redis postgres kafka)

cluster_wanted() { [[ "$CLUSTER" == 1 || "$CLUSTER" == true || "$CLUSTER" == yes ]]; }

service_do() { # ACTION SERVICE
	case "$2" in
	redis) "redis_$1" ;;
	postgres | pg) "pg_$1" ;;
	kafka) "kafka_$1" ;;
	redis-cluster) "redis-cluster_$1" ;;
	kafka-cluster) "kafka-cluster_$1" ;;
	*) die "unknown service '$2' (redis, postgres, kafka, redis-cluster or kafka-cluster)" ;;
	esac
}

status_all() {
	local rc=0 s
	for s in "${SERVICES[@]}"; do service_do status "$s" || rc=3; done
	if cluster_wanted || rc_any_running; then
		redis-cluster_status || rc=3
	fi
	if cluster_wanted || kafka_any_cluster_node_running; then
		kafka-cluster_status || rc=3
	fi
	return "$rc"
}

lock() {
	# One stack command at a time per folder: two concurrent "up"s would
	# race on initdb and pid files. Servers started below must not inherit
	# fd 9 (see the 9>&- on each), or they would hold the lock forever.
	mkdir -p "$STACK"
	exec 9>"$STACK/.lock"
	flock -w "$((WAIT * 3))" 9 || die "another deploy/stack.sh holds $STACK/.lock"
}

main() {
	local cmd="${1:-}" svc="${2:-}"
	case "$cmd" in
	up)
		lock
		ensure_packages # only checks when everything is there
		if redis_running && pg_running && kafka_running; then
			pg_ensure_db
		else
			redis_start
			pg_start
			kafka_start
		fi
		if cluster_wanted; then
			redis-cluster_start
			kafka-cluster_start
		fi
		status_all
		;;
	down)
		[[ -d "$STACK" ]] || return 0
		lock
		kafka_stop
		kafka-cluster_stop
		redis_stop
		redis-cluster_stop
		pg_stop
		;;
	status)
		status_all
		;;
	start | stop)
		[[ -n "$svc" ]] || die "usage: deploy/stack.sh $cmd redis|postgres|kafka|redis-cluster|kafka-cluster"
		lock
		service_do "$cmd" "$svc"
		# start waited until the service answered; the status line is for
		# the reader, and a broker still replaying its log after a crash may
		# answer it slowly, which must not turn a good start into a failure.
		[[ "$cmd" == stop ]] || service_do status "$svc" || note "$svc started; its status check did not answer yet"
		;;
	restart)
		[[ -n "$svc" ]] || die "usage: deploy/stack.sh restart redis|postgres|kafka|redis-cluster|kafka-cluster"
		lock
		service_do stop "$svc"
		service_do start "$svc"
		service_do status "$svc" || note "$svc started; its status check did not answer yet"
		;;
	redis-kill-master)
		lock
		rc_kill_master "$svc"
		;;
	kafka-kill-node)
		[[ "$svc" =~ ^[1-3]$ ]] || die "usage: deploy/stack.sh kafka-kill-node 1|2|3"
		lock
		kafka_kill_node "$svc"
		;;
	kafka-start-node)
		[[ "$svc" =~ ^[1-3]$ ]] || die "usage: deploy/stack.sh kafka-start-node 1|2|3"
		lock
		kafka_node_start "cluster-$svc" "$(kafka_cluster_id cluster)"
		;;
	wipe)
		local fallback
		fallback="$(pg_fallback_base)"
		if [[ -d "$STACK" ]]; then
			lock
			kafka_stop
			kafka-cluster_stop
			redis_stop
			redis-cluster_stop
			pg_stop
			rm -rf "$STACK"
		fi
		rm -rf "$fallback"
		note "wiped $STACK"
		;;
	-h | --help | help)
		usage
		;;
	*)
		usage >&2
		exit 2
		;;
	esac
}

main "$@"
