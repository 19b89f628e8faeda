#!/usr/bin/env bash
# Local development stack of flashsale: Redis, PostgreSQL and Apache Kafka
# (KRaft), each bound to 127.0.0.1 with its data, log and pid files under
# one folder. This script only dispatches: each server is one script of
# deploy/stack/ (redis.sh, redis-cluster.sh, postgres.sh, kafka.sh,
# kafka-cluster.sh; packages.sh installs what is missing; lib.sh is what
# they share), which can also be run on its own.
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

# stack_env KEY: KEY's line in deploy/stack.env, for the usage text (the
# environment may override the value in use).
stack_env() { sed -n "s/^$1=//p" "$ROOT/deploy/stack.env"; }

usage() {
	cat <<USAGE
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
  FLASHSALE_REDIS_PORT         [$(stack_env FLASHSALE_REDIS_PORT)]
  FLASHSALE_PG_PORT            [$(stack_env FLASHSALE_PG_PORT)]
  FLASHSALE_KAFKA_PORT         one-node Kafka's client port; controller +1, proxied listener +2/+3 [$(stack_env FLASHSALE_KAFKA_PORT)]
  FLASHSALE_KAFKA_CLUSTER_PORT first client port of the 3-node Kafka cluster; controllers +10,
                               proxied listeners +20/+30 [$(stack_env FLASHSALE_KAFKA_CLUSTER_PORT)]
  FLASHSALE_KAFKA_PARTITIONS   partitions of the flash-sale topics and of auto-created ones [$(stack_env FLASHSALE_KAFKA_PARTITIONS)]
  FLASHSALE_KAFKA_HEAP         JVM heap flags of each Kafka node [-Xms256m -Xmx1g]
  FLASHSALE_KAFKA_JVM_FLAGS    other JVM flags of each Kafka node [-XX:TieredStopAtLevel=1]
  FLASHSALE_KAFKA_WAIT         seconds to wait for Kafka to list its brokers [120]
  KAFKA_HOME                   an Apache Kafka 4.x distribution to run instead of Maven Central's jars
  FLASHSALE_STACK_WAIT         seconds to wait for a service to answer [60]
  FLASHSALE_CLUSTER            1: up, status and down include the Redis Cluster and the Kafka
                               cluster [0] (FLASHSALE_REDIS_CLUSTER is read too)
  FLASHSALE_REDIS_CLUSTER_PORT first of the 6 cluster node ports [$(stack_env FLASHSALE_REDIS_CLUSTER_PORT)]; each node's
                               cluster bus is its port + 10000 (port - 10000 above 55535)
USAGE
}

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=deploy/stack/lib.sh
source "$HERE/stack/lib.sh"

# The services in the order up starts them; down stops them in reverse.
SERVICES=(redis postgres kafka)
CLUSTER_SERVICES=(redis-cluster kafka-cluster)

# svc SERVICE COMMAND [ARGS...]: run one service's script.
svc() {
	local name="$1"
	shift
	case "$name" in
	redis | postgres | kafka | redis-cluster | kafka-cluster) ;;
	pg) name=postgres ;;
	*) die "unknown service '$name' (redis, postgres, kafka, redis-cluster or kafka-cluster)" ;;
	esac
	bash "$HERE/stack/$name.sh" "$@"
}

status_all() {
	local rc=0 s
	for s in "${SERVICES[@]}"; do svc "$s" status || rc=3; done
	for s in "${CLUSTER_SERVICES[@]}"; do
		if cluster_wanted || svc "$s" any-running; then svc "$s" status || rc=3; fi
	done
	return "$rc"
}

# status_up: the status after up. What up started must answer; a cluster up
# was not asked for, left running by an earlier run (a node of it perhaps
# killed by a fault test that was interrupted), is reported, and does not
# fail an up that does not need it.
status_up() {
	local rc=0 s
	for s in "${SERVICES[@]}"; do svc "$s" status || rc=3; done
	for s in "${CLUSTER_SERVICES[@]}"; do
		if cluster_wanted; then
			svc "$s" status || rc=3
		elif svc "$s" any-running; then
			svc "$s" status || note "$s is left from an earlier run and not healthy; not needed now (deploy/stack.sh restart $s, or stop $s)"
		fi
	done
	return "$rc"
}

stop_all() {
	svc kafka stop
	svc kafka-cluster stop
	svc redis stop
	svc redis-cluster stop
	svc postgres stop
}

# need_service COMMAND SERVICE: the usage line when SERVICE is missing.
need_service() {
	[[ -n "$2" ]] || die "usage: deploy/stack.sh $1 redis|postgres|kafka|redis-cluster|kafka-cluster"
}

# need_node COMMAND ID: a Kafka cluster node id.
need_node() {
	[[ "$2" =~ ^[1-3]$ ]] || die "usage: deploy/stack.sh $1 1|2|3"
}

# started SERVICE: the status line after a start, for the reader; a broker
# still replaying its log after a crash may answer it slowly, which must
# not turn a good start into a failure.
started() { svc "$1" status || note "$1 started; its status check did not answer yet"; }

main() {
	local cmd="${1:-}" name="${2:-}" s
	case "$cmd" in
	up)
		lock
		bash "$HERE/stack/packages.sh" check # only checks when everything is there
		for s in "${SERVICES[@]}"; do svc "$s" start; done
		if cluster_wanted; then
			for s in "${CLUSTER_SERVICES[@]}"; do svc "$s" start; done
		fi
		status_up
		;;
	down)
		[[ -d "$STACK" ]] || return 0
		lock
		stop_all
		;;
	status) status_all ;;
	start)
		need_service "$cmd" "$name"
		lock
		svc "$name" start
		started "$name"
		;;
	stop)
		need_service "$cmd" "$name"
		lock
		svc "$name" stop
		;;
	restart)
		need_service "$cmd" "$name"
		lock
		svc "$name" stop
		svc "$name" start
		started "$name"
		;;
	redis-kill-master)
		lock
		svc redis-cluster kill-master "$name"
		;;
	kafka-kill-node | kafka-start-node)
		need_node "$cmd" "$name"
		lock
		svc kafka-cluster "${cmd#kafka-}" "$name"
		;;
	wipe)
		if [[ -d "$STACK" ]]; then
			lock
			stop_all
		fi
		svc postgres wipe # its data may live outside $STACK
		rm -rf "$STACK"
		note "wiped $STACK"
		;;
	-h | --help | help) usage ;;
	*)
		usage >&2
		exit 2
		;;
	esac
}

main "$@"
