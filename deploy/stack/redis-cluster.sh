#!/usr/bin/env bash
# redis-cluster.sh: the local Redis Cluster (FLASHSALE_CLUSTER=1), three
# masters and three replicas on FLASHSALE_REDIS_CLUSTER_PORT and the five
# ports after it.
#
#   deploy/stack/redis-cluster.sh start | stop | status | kill-master [PORT] | any-running
#
# start after a kill brings back the dead nodes once their replicas took
# over; they rejoin as replicas. kill-master SIGKILLs one master (PORT, or
# the first found) and prints its port.
#
# Six redis-server processes from the same binary as the single node, each
# in its own folder (redis-cluster/<port>), no persistence either: a node
# that restarts comes back empty. Only nodes.conf (the cluster's own map of
# who owns which slots) survives a restart, so a killed master that is
# started again learns that its replica took over and rejoins as a replica
# of it instead of serving its empty memory as the truth.
set -euo pipefail
# shellcheck source=deploy/stack/packages.sh
source "$(dirname "${BASH_SOURCE[0]}")/packages.sh"

CLUSTER_PORT="$FLASHSALE_REDIS_CLUSTER_PORT"
CLUSTER_NODES=6 # 3 masters, 3 replicas

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

rc_role() { # PORT: master or slave
	rc_cli "$1" info replication | tr -d '\r' | sed -n 's/^role://p'
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
		--save "" --appendonly no --maxmemory 0 --maxmemory-policy noeviction \
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

# rc_all_settled LIVE DEAD...: rc_settled for every dead node.
rc_all_settled() {
	local live="$1" p
	shift
	for p in "$@"; do rc_settled "$live" "$p" || return 1; done
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

# rc_heal DEAD...: bring dead nodes back only once their slots have a live
# master again: a master restarted empty before its replica took over would
# be followed by that replica, and the slots' data would be gone.
rc_heal() {
	local live="$1" p deadline=$((SECONDS + WAIT))
	shift
	until rc_covered "$live" && rc_all_settled "$live" "$@"; do
		if ((SECONDS >= deadline)); then
			note "slots still uncovered after ${WAIT}s; starting the dead nodes anyway"
			break
		fi
		sleep 0.2
	done
	for p in "$@"; do rc_node_start "$p"; done
}

# rc_unformed PORT...: no live node has a slot: a create interrupted before
# it assigned them (a start would wait for a cluster that never forms).
rc_unformed() {
	local p
	for p in "$@"; do
		[[ "$(rc_info_field "$p" cluster_slots_assigned)" == 0 ]] || return 1
	done
}

cmd_start() {
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
	if rc_unformed "${alive[@]}"; then
		note "redis-cluster: its creation was interrupted (no node has a slot); creating it again"
		rc_create
		return 0
	fi
	if ((${#dead[@]} > 0)); then rc_heal "${alive[0]}" "${dead[@]}"; fi
	rc_wait_healthy
}

cmd_stop() {
	local p
	for p in $(rc_ports); do rc_node_stop "$p"; done
}

cmd_status() {
	local p role rc=0
	for p in $(rc_ports); do
		if rc_node_running "$p" && [[ "$(rc_cli "$p" ping)" == PONG ]]; then
			role="$(rc_role "$p")"
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

# any-running: some cluster node of this stack runs (status then includes
# the cluster even without FLASHSALE_CLUSTER=1).
cmd_any_running() {
	local p
	for p in $(rc_ports); do rc_node_running "$p" && return 0; done
	return 1
}

# kill-master [PORT]: SIGKILL one master (no SHUTDOWN, no goodbye to the
# cluster), as a crashed machine would; print its port.
cmd_kill_master() {
	local port="${1:-}" p pid
	if [[ -z "$port" ]]; then
		for p in $(rc_ports); do
			if rc_node_running "$p" && [[ "$(rc_role "$p")" == master ]]; then
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

component_main redis-cluster "$@"
