#!/usr/bin/env bash
# redis.sh: the local stack's single Redis node on FLASHSALE_REDIS_PORT.
#
#   deploy/stack/redis.sh start | stop | status
#
# No config file, so nothing from Debian's /etc/redis or its system
# instance on 6379 applies. No persistence on purpose: a restart loses
# every key, which the fault tests rely on.
set -euo pipefail
# shellcheck source=deploy/stack/packages.sh
source "$(dirname "${BASH_SOURCE[0]}")/packages.sh"

REDIS_PORT="$FLASHSALE_REDIS_PORT"
REDIS_PID="$REDIS_DIR/redis.pid"
REDIS_LOG="$REDIS_DIR/redis.log"

redis_running() { pid_alive "$REDIS_PID" redis-server; }

redis_ping() { [[ "$(redis-cli -h "$HOST" -p "$REDIS_PORT" ping 2>/dev/null)" == PONG ]]; }

cmd_start() {
	if redis_running; then return 0; fi
	command -v redis-server >/dev/null 2>&1 || ensure_packages
	if port_open "$REDIS_PORT"; then
		die "port $REDIS_PORT is taken by a process that is not this stack's Redis (set FLASHSALE_REDIS_PORT)"
	fi
	mkdir -p "$REDIS_DIR"
	rm -f "$REDIS_PID"
	redis-server --port "$REDIS_PORT" --bind "$HOST" --protected-mode no \
		--save "" --appendonly no --maxmemory 0 --maxmemory-policy noeviction \
		--daemonize yes --pidfile "$REDIS_PID" --logfile "$REDIS_LOG" --dir "$REDIS_DIR" \
		</dev/null >/dev/null 2>&1 9>&- || {
		tail_log "$REDIS_LOG"
		die "redis-server failed to start"
	}
	local deadline=$((SECONDS + WAIT))
	until redis_ping; do
		if ((SECONDS >= deadline)); then
			tail_log "$REDIS_LOG"
			die "redis did not answer PING on $HOST:$REDIS_PORT within ${WAIT}s"
		fi
		sleep 0.1
	done
}

cmd_stop() {
	if ! redis_running; then
		rm -f "$REDIS_PID"
		return 0
	fi
	local pid
	pid="$(<"$REDIS_PID")"
	redis-cli -h "$HOST" -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
	if ! wait_gone "$pid" 10; then
		kill -TERM "$pid" 2>/dev/null || true
		wait_gone "$pid" 10 || {
			note "redis (pid $pid) ignored SHUTDOWN and SIGTERM; killing it"
			kill -KILL "$pid" 2>/dev/null || true
			wait_gone "$pid" 5 || die "redis (pid $pid) does not die"
		}
	fi
	rm -f "$REDIS_PID"
}

cmd_status() {
	if redis_running && redis_ping; then
		printf '%-9s running  %s:%s  pid %s  redis://%s:%s\n' redis "$HOST" "$REDIS_PORT" "$(<"$REDIS_PID")" "$HOST" "$REDIS_PORT"
	else
		printf '%-9s stopped  %s:%s\n' redis "$HOST" "$REDIS_PORT"
		return 1
	fi
}

component_main redis "$@"
