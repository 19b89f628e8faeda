#!/usr/bin/env bash
# kafka-cluster.sh: the local three-node Apache Kafka cluster
# (FLASHSALE_CLUSTER=1), node ids 1..3, each a combined broker+controller:
# clients on FLASHSALE_KAFKA_CLUSTER_PORT and the two ports after it,
# controllers +10; replication factor 3, min.insync.replicas 2, no unclean
# leader election. The nodes themselves are kafka-node.sh's.
#
#   deploy/stack/kafka-cluster.sh start | stop | status | any-running
#   deploy/stack/kafka-cluster.sh kill-node ID | start-node ID | pid ID
#
# start starts every node that is not running and waits for all three;
# kill-node SIGKILLs node ID (as a crashed machine) and prints its pid;
# start-node starts node ID again without waiting.
set -euo pipefail
# shellcheck source=deploy/stack/kafka-node.sh
source "$(dirname "${BASH_SOURCE[0]}")/kafka-node.sh"

kafka_cluster_names() {
	local i
	for i in $(seq 1 "$KAFKA_CLUSTER_NODES"); do echo "cluster-$i"; done
}

kafka_node_id() { # ID: checks a node id given on the command line
	[[ "${1:-}" =~ ^[1-3]$ ]] || die "node id '${1:-}': want 1, 2 or 3"
}

kafka_cluster_running() {
	local n
	for n in $(kafka_cluster_names); do kafka_node_running "$n" || return 1; done
	# 5 s: a node just back answers its first requests slowly on 2 busy cores
	kafka_probe "$(kafka_bootstrap cluster)" "$KAFKA_CLUSTER_NODES" 5s
}

# start: every node that is not running (all three at once on a first
# start: each waits for a quorum of controllers), then wait until the
# three are registered and create the topics.
cmd_start() {
	local n names=()
	kafka_prepare
	mapfile -t names < <(kafka_cluster_names)
	for n in "${names[@]}"; do kafka_node_start "$n" "$(kafka_cluster_id cluster)"; done
	kafka_wait "$(kafka_bootstrap cluster)" "$KAFKA_CLUSTER_NODES" "${names[@]}"
	kafka_topics "$(kafka_bootstrap cluster)" 3 2
}

cmd_stop() {
	local n pids=()
	# In parallel, 20 s each: a node's controlled shutdown asks the
	# controller quorum to move its leaderships, and once two of the three
	# are going the quorum is gone, so the last ones wait for it in vain
	# (one by one, the last node waits the same way). Nothing acknowledged
	# is lost by the SIGKILL that follows: it is in the page cache.
	for n in $(kafka_cluster_names); do
		kafka_node_stop "$n" 20 &
		pids+=($!)
	done
	for n in "${pids[@]}"; do wait "$n" || die "stopping a kafka cluster node failed"; done
}

cmd_status() {
	local n rc=0 client
	for n in $(kafka_cluster_names); do
		read -r client _ <<<"$(kafka_node_ports "$n")"
		if kafka_node_running "$n"; then
			printf '%-9s running  %s:%s  pid %s  node %s\n' kafka-cl "$HOST" "$client" "$(<"$(kafka_pidfile "$n")")" "${n#cluster-}"
		else
			printf '%-9s stopped  %s:%s  node %s\n' kafka-cl "$HOST" "$client" "${n#cluster-}"
			rc=1
		fi
	done
	if ((rc == 0)) && ! kafka_cluster_running; then
		note "kafka cluster nodes run but do not list $KAFKA_CLUSTER_NODES brokers yet (starting, or a node is cut off)"
		rc=1
	fi
	echo "FLASHSALE_KAFKA_BROKERS=$(kafka_bootstrap cluster)"
	return "$rc"
}

cmd_any_running() {
	local n
	for n in $(kafka_cluster_names); do kafka_node_running "$n" && return 0; done
	return 1
}

cmd_kill_node() { # ID
	kafka_node_id "${1:-}"
	local name="cluster-$1" pid
	kafka_node_running "$name" || die "kafka cluster node $1 is not running"
	pid="$(<"$(kafka_pidfile "$name")")"
	kill -KILL "$pid"
	wait_gone "$pid" 10 || die "kafka node $name (pid $pid) survived SIGKILL"
	echo "$pid"
}

cmd_start_node() { # ID
	kafka_node_id "${1:-}"
	kafka_node_start "cluster-$1" "$(kafka_cluster_id cluster)"
}

cmd_pid() { # ID
	kafka_node_id "${1:-}"
	kafka_node_running "cluster-$1" || die "kafka cluster node $1 is not running"
	cat "$(kafka_pidfile "cluster-$1")"
}

component_main kafka-cluster "$@"
