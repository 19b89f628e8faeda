#!/usr/bin/env bash
# demo.sh: run one flash sale end to end on the local stack and print the
# report. `make demo` calls it after `make up` and `make build`.
#   DEMO_USERS (default 500000) shoppers, DEMO_STOCK (default 10000) units,
#   DEMO_ITEMS (default 1), DEMO_ARGS extra loadtest flags.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
stack="${FLASHSALE_STACK_DIR:-$root/.stack}"
bin="$root/bin"
mkdir -p "$stack/logs"

# Development secrets (random, generated once under .stack/) and the
# helpers that start and stop the services, shared with benchmarks/run.sh.
# shellcheck source=deploy/services.sh
source "$root/deploy/services.sh"
load_dev_env "$stack"

echo "demo: starting ordersvc and gateway (logs in $stack/logs)"
start_service "$stack/logs/ordersvc.log" "$bin/ordersvc" serve
wait_ready ordersvc "http://127.0.0.1:8091/readyz" "$stack/logs/ordersvc.log"
# The load generator plays the load balancer: it reports each shopper's
# address in X-Forwarded-For, which the gateway believes only from loopback.
start_service "$stack/logs/gateway.log" env FLASHSALE_CATALOG_REFRESH=200ms FLASHSALE_TRUSTED_PROXIES=127.0.0.1/32 "$bin/gateway"
wait_ready gateway "http://127.0.0.1:8081/readyz" "$stack/logs/gateway.log"

echo "demo: flash sale of ${DEMO_STOCK:-10000} units to ${DEMO_USERS:-500000} shoppers"
# shellcheck disable=SC2086
"$bin/loadtest" -users "${DEMO_USERS:-500000}" -stock "${DEMO_STOCK:-10000}" -items "${DEMO_ITEMS:-1}" \
	-out "$root/loadtest/out" ${DEMO_ARGS:-}
