#!/usr/bin/env bash
# run.sh: the benchmark in one command (`make bench`). It starts ordersvc and
# the gateway the way deploy/demo.sh does (same binaries from `make build`,
# same development secrets in .stack/dev.env), on ports and a topic of their
# own so a demo running beside it is not disturbed, then runs
# benchmarks/cmd/bench, which starts each baseline itself. Extra arguments go
# to bench (e.g. -shoppers 20000 -only sold-out/bare,sold-out/gateway).
# Everything it starts stops when it exits.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
stack="${FLASHSALE_STACK_DIR:-$root/.stack}"
bin="$root/bin"
out="$root/benchmarks/out"
mkdir -p "$out/logs" "$out/bin"

for b in gateway ordersvc; do
	if [[ ! -x "$bin/$b" ]]; then
		echo "run.sh: $bin/$b is missing: run make build (make bench does)" >&2
		exit 1
	fi
done

# Development secrets and service helpers shared with deploy/demo.sh.
# shellcheck source=deploy/services.sh
source "$root/deploy/services.sh"
# shellcheck source=deploy/stackenv.sh
source "$root/deploy/stackenv.sh"
load_dev_env "$stack"

echo "run.sh: building the baseline and bench commands into $out/bin" >&2
GO=${GO:-go} # make passes its own: sudo drops Go from PATH
"$GO" build -o "$out/bin/baseline" ./benchmarks/cmd/baseline
"$GO" build -o "$out/bin/bench" ./benchmarks/cmd/bench

gw_port="${BENCH_GATEWAY_PORT:-18080}"
os_port="${BENCH_ORDERSVC_PORT:-18090}"
export FLASHSALE_ORDERS_TOPIC=flash-sale-orders-bench
export FLASHSALE_DLQ_TOPIC=flash-sale-orders-bench.dlq
export FLASHSALE_CONSUMER_GROUP=ordersvc-bench
export FLASHSALE_ORDERSVC_ADDR="127.0.0.1:$os_port"
export FLASHSALE_ORDERSVC_ADMIN_ADDR="127.0.0.1:$((os_port + 1))"

# The bench's own topics, created as the stack creates the demo's (the
# one-node stack: replication factor 1), so the first purchases do not wait
# for auto-creation and a leader election.
"$stack/bin/kafka-admin" topics -bootstrap "${FLASHSALE_KAFKA_BROKERS:-127.0.0.1:$FLASHSALE_KAFKA_PORT}" \
	-topics "$FLASHSALE_ORDERS_TOPIC,$FLASHSALE_DLQ_TOPIC" -partitions "$FLASHSALE_KAFKA_PARTITIONS" \
	-replication-factor 1 -min-insync-replicas 1 >&2

echo "run.sh: starting ordersvc and gateway (logs in $out/logs)" >&2
refuse_taken ordersvc "$os_port" $((os_port + 1))
refuse_taken gateway "$gw_port" $((gw_port + 1))
start_service "$out/logs/ordersvc.log" "$bin/ordersvc" serve
wait_ready ordersvc "http://127.0.0.1:$((os_port + 1))/readyz" "$out/logs/ordersvc.log"
# Every shopper of the crowd comes from 127.0.0.1: the per-IP limit would
# measure the limiter, not the purchase path. The per-user limit stays on.
start_service "$out/logs/gateway.log" env FLASHSALE_GATEWAY_ADDR="127.0.0.1:$gw_port" \
	FLASHSALE_GATEWAY_ADMIN_ADDR="127.0.0.1:$((gw_port + 1))" \
	FLASHSALE_CATALOG_REFRESH=200ms FLASHSALE_LIMIT_PURCHASE_IP=off "$bin/gateway"
gw_pid="${service_pids[-1]}"
wait_ready gateway "http://127.0.0.1:$((gw_port + 1))/readyz" "$out/logs/gateway.log"

"$out/bin/bench" -gateway "http://127.0.0.1:$gw_port" -admin "http://127.0.0.1:$((os_port + 1))" \
	-gateway-pid "$gw_pid" -baseline-bin "$out/bin/baseline" -out "$out" "$@"
