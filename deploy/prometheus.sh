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

# The stack's settings (ROOT, STACK, HOST, WAIT, CLUSTER, the ports) and
# helpers (die, note, port_open, pid_alive, wait_gone, tail_log).
# shellcheck source=deploy/stack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/stack/lib.sh"
DIR="$STACK/prometheus"
PID="$DIR/prometheus.pid"
LOG="$DIR/prometheus.log"
PORT="$FLASHSALE_PROMETHEUS_PORT"

running() { pid_alive "$PID" prometheus; }

INSTANCES=1
cluster_wanted && INSTANCES=2
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
	port_open "$PORT" &&
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
	until curl -fsS --max-time 2 "http://$HOST:$PORT/-/ready" >/dev/null 2>&1; do
		if ! running || ((SECONDS >= deadline)); then
			tail_log "$LOG"
			die "did not become ready on $HOST:$PORT within ${WAIT}s"
		fi
		sleep 0.2
	done
	note "ready on http://$HOST:$PORT, scraping $(tr -d '\n' <"$DIR/targets/gateway.json") and $(tr -d '\n' <"$DIR/targets/ordersvc.json")"
}

down() {
	running || return 0
	local pid
	pid="$(<"$PID")"
	kill -TERM "$pid"
	wait_gone "$pid" "$WAIT" || die "prometheus (pid $pid) did not stop within ${WAIT}s"
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
