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

# Development secrets: the same file deploy/demo.sh uses, created the same way.
env_file="$stack/dev.env"
if [[ ! -f "$env_file" ]]; then
	mkdir -p "$stack"
	umask 077
	{
		echo "FLASHSALE_JWT_HS256_KEY=$(head -c 48 /dev/urandom | base64 | tr -d '\n/+=')"
		echo "FLASHSALE_GATE_KEY=$(head -c 48 /dev/urandom | base64 | tr -d '\n/+=')"
		echo "FLASHSALE_ADMIN_TOKEN=$(head -c 24 /dev/urandom | base64 | tr -d '\n/+=')"
	} >"$env_file"
	umask 022
fi
set -a
# shellcheck disable=SC1090
source "$env_file"
set +a

echo "run.sh: building the baseline and bench commands into $out/bin" >&2
go build -o "$out/bin/baseline" ./benchmarks/cmd/baseline
go build -o "$out/bin/bench" ./benchmarks/cmd/bench

gw_port="${BENCH_GATEWAY_PORT:-18080}"
os_port="${BENCH_ORDERSVC_PORT:-18090}"
export FLASHSALE_ORDERS_TOPIC=flash-sale-orders-bench
export FLASHSALE_DLQ_TOPIC=flash-sale-orders-bench.dlq
export FLASHSALE_CONSUMER_GROUP=ordersvc-bench
export FLASHSALE_ORDERSVC_ADDR="127.0.0.1:$os_port"
export FLASHSALE_ORDERSVC_ADMIN_ADDR="127.0.0.1:$((os_port + 1))"

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
	echo "run.sh: $1 did not become ready at $2; last log lines:" >&2
	tail -n 30 "$3" >&2
	exit 1
}

echo "run.sh: starting ordersvc and gateway (logs in $out/logs)" >&2
"$bin/ordersvc" serve >"$out/logs/ordersvc.log" 2>&1 &
pids+=($!)
wait_ready ordersvc "http://127.0.0.1:$((os_port + 1))/readyz" "$out/logs/ordersvc.log"
# Every shopper of the crowd comes from 127.0.0.1: the per-IP limit would
# measure the limiter, not the purchase path. The per-user limit stays on.
FLASHSALE_GATEWAY_ADDR="127.0.0.1:$gw_port" FLASHSALE_GATEWAY_ADMIN_ADDR="127.0.0.1:$((gw_port + 1))" \
	FLASHSALE_CATALOG_REFRESH=200ms FLASHSALE_LIMIT_PURCHASE_IP=off \
	"$bin/gateway" >"$out/logs/gateway.log" 2>&1 &
gw_pid=$!
pids+=("$gw_pid")
wait_ready gateway "http://127.0.0.1:$((gw_port + 1))/readyz" "$out/logs/gateway.log"

"$out/bin/bench" -gateway "http://127.0.0.1:$gw_port" -admin "http://127.0.0.1:$((os_port + 1))" \
	-gateway-pid "$gw_pid" -baseline-bin "$out/bin/baseline" -out "$out" "$@"
