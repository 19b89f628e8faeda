#!/usr/bin/env bash
# idle.sh: what the stack costs at rest. Starts one order service and one
# gateway on the local stack as deploy/demo.sh does, lets them settle, and
# prints the CPU each process of the stack used over IDLE_SECONDS with
# nothing to sell: the background work a sale competes with (catalog
# refreshes, stock polls, the consumer's empty fetches, lag reads).
#   IDLE_SECONDS  how long to measure (default 20)
#   IDLE_BIN      the gateway and ordersvc binaries' directory (default
#                 bin/; run twice to compare two builds)
# Every Kafka JVM of the checkout counts: stop the three-node cluster
# (deploy/stack.sh stop kafka-cluster) unless it is the one measured.
# FLASHSALE_* settings in the environment reach both services; the
# gateway's catalog refresh is the demo's 200 ms unless set.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
stack="${FLASHSALE_STACK_DIR:-$root/.stack}"
bin="${IDLE_BIN:-$root/bin}"
seconds="${IDLE_SECONDS:-20}"
mkdir -p "$stack/logs"
# shellcheck source=deploy/services.sh
source "$root/deploy/services.sh"
# shellcheck source=deploy/stackenv.sh
source "$root/deploy/stackenv.sh"
load_dev_env "$stack"

start_service "$stack/logs/idle-ordersvc.log" env FLASHSALE_ORDERSVC_ADDR=127.0.0.1:8090 \
	FLASHSALE_ORDERSVC_ADMIN_ADDR=127.0.0.1:8091 "$bin/ordersvc" serve
wait_ready ordersvc http://127.0.0.1:8091/readyz "$stack/logs/idle-ordersvc.log"
start_service "$stack/logs/idle-gateway.log" env FLASHSALE_CATALOG_REFRESH="${FLASHSALE_CATALOG_REFRESH:-200ms}" \
	FLASHSALE_GATEWAY_ADMIN_ADDR=127.0.0.1:8081 "$bin/gateway"
wait_ready gateway http://127.0.0.1:8081/readyz "$stack/logs/idle-gateway.log"
sleep 5 # the first passes (catalog, abandoned reservations) are not rest

# cpu NAME: CPU ticks (1/100 s) used so far by this checkout's processes
# whose command line matches NAME's pattern.
declare -A pattern=([gateway]="$bin/gateway" [ordersvc]="$bin/ordersvc serve" [kafka]="kafka.Kafka"
	[redis]="redis-server" [postgres]="postgres")
cpu() {
	local sum=0 pid
	for pid in $(pgrep -f -- "${pattern[$1]}"); do
		[[ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" == "$root"* ]] || continue
		sum=$((sum + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
	done
	echo "$sum"
}
declare -A before
for c in "${!pattern[@]}"; do before[$c]=$(cpu "$c"); done
sleep "$seconds"
echo "idle for ${seconds}s ($(cut -d' ' -f1-3 /proc/loadavg) load): CPU per second of rest"
for c in gateway ordersvc kafka redis postgres; do
	printf '  %-9s %5d ms/s\n' "$c" $(((($(cpu "$c") - before[$c]) * 10) / seconds))
done
