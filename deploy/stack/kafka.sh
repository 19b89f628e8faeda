#!/usr/bin/env bash
# kafka.sh: the local stack's one-node Apache Kafka (KRaft, node id 1, one
# combined broker+controller) on FLASHSALE_KAFKA_PORT: controller on +1,
# replication factor 1. The node itself is kafka-node.sh's.
#
#   deploy/stack/kafka.sh start | stop | status | pid
#
# start waits until the broker answers and the flash-sale topics have a
# leader for every partition; stop is a controlled shutdown (SIGTERM);
# pid prints the broker's process id (fault tests freeze and kill it).
set -euo pipefail
# shellcheck source=deploy/stack/kafka-node.sh
source "$(dirname "${BASH_SOURCE[0]}")/kafka-node.sh"

kafka_running() {
	kafka_node_running single && kafka_probe "$(kafka_bootstrap single)" 1 5s
}

# cmd_start waits for the broker and its topics even when the node was
# already running: a start interrupted after the JVM came up (Ctrl-C) left
# a broker without the stack's topics, which the next start skipped.
cmd_start() {
	kafka_prepare
	kafka_node_running single || kafka_node_start single "$(kafka_cluster_id single)"
	kafka_wait "$(kafka_bootstrap single)" 1 single
	kafka_topics "$(kafka_bootstrap single)" 1 1
}

cmd_stop() { kafka_node_stop single; }

cmd_status() {
	if [[ -x "$KAFKA_ADMIN" ]] && kafka_running; then
		printf '%-9s running  %s:%s  pid %s  bootstrap.servers=%s  (Apache Kafka, KRaft, 1 node)\n' kafka "$HOST" "$KAFKA_PORT" \
			"$(<"$(kafka_pidfile single)")" "$(kafka_bootstrap single)"
	else
		printf '%-9s stopped  %s:%s\n' kafka "$HOST" "$KAFKA_PORT"
		return 1
	fi
}

cmd_pid() {
	kafka_node_running single || die "kafka is not running"
	cat "$(kafka_pidfile single)"
}

component_main kafka "$@"
