#!/usr/bin/env bash
# prometheus.sh: a Prometheus for the local stack (make up MONITOR=1) that
# scrapes the services demo.sh starts and loads deploy/monitoring/rules.yml,
# so an operator can query a demo sale and see which alerts it raised.
#
#   deploy/prometheus.sh up | down | status
#
# It listens on 127.0.0.1:$FLASHSALE_PROMETHEUS_PORT (deploy/stack.env),
# keeps its data under .stack/prometheus/ and scrapes the admin listeners
# demo.sh uses: gateways from 127.0.0.1:8081, order services from
# 127.0.0.1:8091, +2 per instance: one of each, two with FLASHSALE_CLUSTER=1,
# and DEMO_GATEWAYS gateways when it is set (as for demo.sh).
# The binary is Debian's prometheus package, which deploy/stack.sh up
# installs with the other servers.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
# shellcheck source=deploy/stackenv.sh
source "$ROOT/deploy/stackenv.sh"
STACK="${FLASHSALE_STACK_DIR:-$ROOT/.stack}"
DIR="$STACK/prometheus"
PID="$DIR/prometheus.pid"
LOG="$DIR/prometheus.log"
PORT="$FLASHSALE_PROMETHEUS_PORT"
HOST=127.0.0.1
WAIT="${FLASHSALE_STACK_WAIT:-60}"
CLUSTER="${FLASHSALE_CLUSTER:-${FLASHSALE_REDIS_CLUSTER:-0}}"

die() {
	echo "prometheus: $*" >&2
	exit 1
}
note() { echo "prometheus: $*" >&2; }

running() {
	[[ -s "$PID" ]] || return 1
	local pid
	pid="$(<"$PID")"
	[[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- prometheus
}

INSTANCES=1
case "$CLUSTER" in 1 | true | yes) INSTANCES=2 ;; esac
GATEWAYS="${DEMO_GATEWAYS:-$INSTANCES}"

# targets FIRST_PORT COUNT: a file_sd list of the instances' admin addresses.
targets() {
	local i sep=""
	printf '[{"targets": ['
	for ((i = 0; i < $2; i++)); do
		printf '%s"%s:%d"' "$sep" "$HOST" $(($1 + 2 * i))
		sep=", "
	done
	printf ']}]\n'
}

up() {
	[[ "$GATEWAYS" =~ ^[1-4]$ ]] || die "DEMO_GATEWAYS=$GATEWAYS: want 1 to 4, as demo.sh"
	command -v prometheus >/dev/null 2>&1 ||
		die "not installed: deploy/stack.sh up installs it as root (or: sudo apt-get install -y --no-install-recommends prometheus)"
	if running; then
		note "running on http://$HOST:$PORT (pid $(<"$PID"))"
		return 0
	fi
	(exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null &&
		die "port $PORT is taken by another process (set FLASHSALE_PROMETHEUS_PORT)"
	mkdir -p "$DIR/targets" "$DIR/data"
	# The configuration and rules are copied at each start: edit them in
	# deploy/monitoring/, then restart (down, up).
	cp "$ROOT/deploy/monitoring/prometheus.yml" "$ROOT/deploy/monitoring/rules.yml" "$DIR/"
	targets 8081 "$GATEWAYS" >"$DIR/targets/gateway.json"
	targets 8091 "$INSTANCES" >"$DIR/targets/ordersvc.json"
	promtool check config "$DIR/prometheus.yml" >"$LOG" 2>&1 || {
		cat "$LOG" >&2
		die "configuration does not check"
	}
	nohup prometheus --config.file="$DIR/prometheus.yml" --storage.tsdb.path="$DIR/data" \
		--storage.tsdb.retention.time=7d --web.listen-address="$HOST:$PORT" \
		</dev/null >>"$LOG" 2>&1 9>&- &
	echo $! >"$PID"
	local deadline=$((SECONDS + WAIT))
	until curl -fsS "http://$HOST:$PORT/-/ready" >/dev/null 2>&1; do
		if ! running || ((SECONDS >= deadline)); then
			tail -n 30 "$LOG" >&2 || true
			die "did not become ready on $HOST:$PORT within ${WAIT}s"
		fi
		sleep 0.2
	done
	note "ready on http://$HOST:$PORT, scraping $(tr -d '\n' <"$DIR/targets/gateway.json") and $(tr -d '\n' <"$DIR/targets/ordersvc.json")"
}

down() {
	running || return 0
	local pid deadline=$((SECONDS + WAIT))
	pid="$(<"$PID")"
	kill -TERM "$pid"
	while kill -0 "$pid" 2>/dev/null; do
		((SECONDS < deadline)) || die "pid $pid did not stop within ${WAIT}s"
		sleep 0.2
	done
	rm -f "$PID"
}

status() {
	if running; then
		echo "prometheus running  http://$HOST:$PORT  pid $(<"$PID")"
	else
		echo "prometheus stopped"
		return 3
	fi
}

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
*) die "usage: deploy/prometheus.sh up|down|status" ;;
esac
