#!/usr/bin/env bash
# demo.sh: run one flash sale end to end on the local stack and print the
# report. `make demo` calls it after `make up` and `make build`.
#   DEMO_USERS (default 500000) shoppers, DEMO_STOCK (default 10000) units,
#   DEMO_ITEMS (default 1), DEMO_ARGS extra loadtest flags, DEMO_OUT the
#   report's directory (default loadtest/out), DEMO_GATEWAYS
#   gateway processes sharing port 8080 through SO_REUSEPORT (default 1; 2
#   with FLASHSALE_CLUSTER=1), DEMO_PROFILE a directory for each service's
#   CPU and allocation profiles (gateway-0.pprof, gateway-0.allocs.pprof,
#   ordersvc-0.pprof, ...; default none), DEMO_BIN the directory of the
#   gateway, ordersvc and loadtest binaries (default bin/: two builds
#   compared with benchmarks/cmd/demoruns, 'old:DEMO_BIN=/tmp/old' 'new:'),
#   DEMO_LOGS the services' logs' directory (default .stack/logs, each run
#   overwriting the last; demoruns keeps each run's beside its report).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
stack="${FLASHSALE_STACK_DIR:-$root/.stack}"
bin="${DEMO_BIN:-$root/bin}"
logs="${DEMO_LOGS:-$stack/logs}"
mkdir -p "$logs"

# Development secrets (random, generated once under .stack/) and the
# helpers that start and stop the services, shared with benchmarks/run.sh.
# shellcheck source=deploy/services.sh
source "$root/deploy/services.sh"
# shellcheck source=deploy/stackenv.sh
source "$root/deploy/stackenv.sh"
load_dev_env "$stack"

case "${FLASHSALE_CLUSTER:-${FLASHSALE_REDIS_CLUSTER:-0}}" in
1 | true | yes)
	# The scaled-out shape: the Redis Cluster, each item's stock in
	# DEMO_SHARDS shards, the three-node Kafka cluster (replication factor
	# 3, min.insync.replicas 2), two order services sharing the consumer
	# group and two gateways sharing port 8080 (SO_REUSEPORT).
	base="$FLASHSALE_REDIS_CLUSTER_PORT"
	FLASHSALE_REDIS_ADDR="$(for i in 0 1 2 3 4 5; do printf '127.0.0.1:%d,' $((base + i)); done)"
	export FLASHSALE_REDIS_ADDR="${FLASHSALE_REDIS_ADDR%,}"
	kbase="$FLASHSALE_KAFKA_CLUSTER_PORT"
	export FLASHSALE_KAFKA_BROKERS="127.0.0.1:$kbase,127.0.0.1:$((kbase + 1)),127.0.0.1:$((kbase + 2))"
	instances=2
	shards="${DEMO_SHARDS:-3}"
	;;
*)
	instances=1
	shards="${DEMO_SHARDS:-1}"
	;;
esac

gateways="${DEMO_GATEWAYS:-$instances}"
# profile NAME: the FLASHSALE_CPU_PROFILE and FLASHSALE_ALLOC_PROFILE
# settings of service NAME.
profile() {
	[[ -z "${DEMO_PROFILE:-}" ]] || echo "FLASHSALE_CPU_PROFILE=$DEMO_PROFILE/$1.pprof FLASHSALE_ALLOC_PROFILE=$DEMO_PROFILE/$1.allocs.pprof"
}
[[ -z "${DEMO_PROFILE:-}" ]] || mkdir -p "$DEMO_PROFILE"
# Their admin ports, 8081, 8083, 8085, 8087, stop below the order services' (8091).
[[ "$gateways" =~ ^[1-4]$ ]] || { echo "demo: DEMO_GATEWAYS=$gateways: want 1 to 4 gateway processes" >&2; exit 2; }
echo "demo: starting $instances ordersvc and $gateways gateway (logs in $logs; Redis ${FLASHSALE_REDIS_ADDR:-127.0.0.1:$FLASHSALE_REDIS_PORT}; Kafka ${FLASHSALE_KAFKA_BROKERS:-127.0.0.1:$FLASHSALE_KAFKA_PORT})"
for i in $(seq 0 $((instances - 1))); do
	refuse_taken ordersvc $((8090 + 2 * i)) $((8091 + 2 * i))
	start_service "$logs/ordersvc-$i.log" env $(profile "ordersvc-$i") FLASHSALE_ORDERSVC_ADDR="127.0.0.1:$((8090 + 2 * i))" \
		FLASHSALE_ORDERSVC_ADMIN_ADDR="127.0.0.1:$((8091 + 2 * i))" "$bin/ordersvc" serve
	wait_ready ordersvc "http://127.0.0.1:$((8091 + 2 * i))/readyz" "$logs/ordersvc-$i.log"
done
# With SO_REUSEPORT a gateway left over from an aborted run would silently
# share the port and take part of the traffic: refuse to start beside one.
refuse_taken gateway 8080 $(seq 8081 2 $((8081 + 2 * (gateways - 1))))
# The load generator plays the load balancer: it reports each shopper's
# address in X-Forwarded-For, which the gateway believes only from loopback.
for i in $(seq 0 $((gateways - 1))); do
	start_service "$logs/gateway-$i.log" env $(profile "gateway-$i") FLASHSALE_CATALOG_REFRESH=200ms FLASHSALE_TRUSTED_PROXIES=127.0.0.1/32 \
		FLASHSALE_REUSEPORT="$((gateways > 1))" FLASHSALE_GATEWAY_ADMIN_ADDR="127.0.0.1:$((8081 + 2 * i))" "$bin/gateway"
	wait_ready gateway "http://127.0.0.1:$((8081 + 2 * i))/readyz" "$logs/gateway-$i.log"
done

echo "demo: flash sale of ${DEMO_STOCK:-10000} units to ${DEMO_USERS:-500000} shoppers ($shards stock shard(s) per item)"
# shellcheck disable=SC2086
"$bin/loadtest" -users "${DEMO_USERS:-500000}" -stock "${DEMO_STOCK:-10000}" -items "${DEMO_ITEMS:-1}" \
	-shards "$shards" -out "${DEMO_OUT:-$root/loadtest/out}" ${DEMO_ARGS:-}
