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

# Development secrets: random, generated once, kept under .stack/ (never committed).
env_file="$stack/dev.env"
if [[ ! -f "$env_file" ]]; then
	umask 077
	{
		echo "FLASHSALE_JWT_HS256_KEY=$(head -c 48 /dev/urandom | base64 | tr -d '\n/+=')"
		echo "FLASHSALE_GATE_KEY=$(head -c 48 /dev/urandom | base64 | tr -d '\n/+=')"
		echo "FLASHSALE_ADMIN_TOKEN=$(head -c 24 /dev/urandom | base64 | tr -d '\n/+=')"
	} >"$env_file"
fi
set -a
# shellcheck disable=SC1090
source "$env_file"
set +a

pids=()
stop_services() {
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_services EXIT

wait_ready() { # name url log
	for _ in $(seq 1 300); do
		if curl -fsS "$2" >/dev/null 2>&1; then return 0; fi
		sleep 0.1
	done
	echo "demo: $1 did not become ready at $2; last log lines:" >&2
	tail -n 30 "$3" >&2
	exit 1
}

echo "demo: starting ordersvc and gateway (logs in $stack/logs)"
"$bin/ordersvc" serve >"$stack/logs/ordersvc.log" 2>&1 &
pids+=($!)
wait_ready ordersvc "http://127.0.0.1:8091/readyz" "$stack/logs/ordersvc.log"
# The load generator plays the load balancer: it reports each shopper's
# address in X-Forwarded-For, which the gateway believes only from loopback.
FLASHSALE_CATALOG_REFRESH=200ms FLASHSALE_TRUSTED_PROXIES=127.0.0.1/32 "$bin/gateway" >"$stack/logs/gateway.log" 2>&1 &
pids+=($!)
wait_ready gateway "http://127.0.0.1:8081/readyz" "$stack/logs/gateway.log"

echo "demo: flash sale of ${DEMO_STOCK:-10000} units to ${DEMO_USERS:-500000} shoppers"
# shellcheck disable=SC2086
"$bin/loadtest" -users "${DEMO_USERS:-500000}" -stock "${DEMO_STOCK:-10000}" -items "${DEMO_ITEMS:-1}" \
	-out "$root/loadtest/out" ${DEMO_ARGS:-}
