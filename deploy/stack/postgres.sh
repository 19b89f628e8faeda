#!/usr/bin/env bash
# postgres.sh: the local stack's PostgreSQL on FLASHSALE_PG_PORT, its own
# cluster (initdb -U flashsale -A trust) with the database flashsale.
#
#   deploy/stack/postgres.sh start | stop | status | wipe
#
# The server refuses to run as root, so as root every PostgreSQL program
# runs as the postgres user, and the data goes outside the stack folder
# when that user cannot reach it (pg_resolve). wipe stops the server and
# deletes its data wherever it is.
set -euo pipefail
# shellcheck source=deploy/stack/packages.sh
source "$(dirname "${BASH_SOURCE[0]}")/packages.sh"

PG_PORT="$FLASHSALE_PG_PORT"
PG_USER=flashsale
PG_DB=flashsale
# PG_BASE (data, socket, log) is resolved lazily by pg_resolve: it may have
# to live outside $STACK when the postgres user cannot reach $STACK.
PG_BASE=""

pg_fallback_base() {
	# Keyed by the stack folder (which defaults to <repo>/.stack), so two
	# stacks never share a cluster. Only root uses it, so it lives where
	# only root writes: under /tmp, a name anyone could guess and plant a
	# symbolic link at, root's chown and chmod would have followed it (and
	# a /tmp on tmpfs loses the cluster at a reboot).
	local h
	h="$(printf '%s' "$STACK" | sha256sum | cut -c1-8)"
	echo "/var/lib/flashsale/pg-$(id -u)-$h"
}

# as_pg runs a PostgreSQL program as the postgres user when we are root
# (the server refuses to run as root), from / so its cwd is reachable.
as_pg() {
	if is_root; then
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

# pg_own DIR: a folder for the server's data that only postgres reaches.
# A symbolic link is refused: chown and chmod would follow it.
pg_own() {
	[[ ! -L "$1" ]] || die "$1 is a symbolic link; refusing to hand it to the postgres user"
	mkdir -p "$1"
	chown postgres:postgres "$1"
	chmod 700 "$1"
}

# pg_create_base: PG_BASE for a new cluster: the stack folder, unless as
# root the postgres user cannot reach it (a home folder of mode 700).
pg_create_base() {
	local primary="$1" fallback="$2"
	mkdir -p "$primary"
	is_root || return 0
	pg_own "$primary"
	if ! as_pg test -x "$primary" -a -w "$primary"; then
		rmdir "$primary" 2>/dev/null || true
		PG_BASE="$fallback"
		note "postgres user cannot reach $primary; PostgreSQL data goes to $PG_BASE instead"
		pg_own "$PG_BASE"
	fi
}

# pg_resolve sets PG_BASE: the existing cluster if there is one, else (when
# CREATE is "create") a new folder the server's user can reach.
pg_resolve() {
	local create="${1:-}" primary="$STACK/postgres" fallback
	fallback="$(pg_fallback_base)"
	if [[ -f "$primary/data/PG_VERSION" ]]; then
		PG_BASE="$primary"
	elif [[ -f "$fallback/data/PG_VERSION" ]]; then
		PG_BASE="$fallback"
	else
		PG_BASE="$primary"
		if [[ "$create" == create ]]; then pg_create_base "$primary" "$fallback"; fi
	fi
	PG_DATA="$PG_BASE/data"
	PG_SOCK="$PG_BASE/sock"
	PG_LOG="$PG_BASE/postgres.log"
	if ((${#PG_SOCK} > 100)); then
		die "unix socket folder $PG_SOCK is too long for PostgreSQL (max ~100 chars); set FLASHSALE_STACK_DIR to a shorter path"
	fi
}

# pg_bin picks the binaries matching an existing cluster, else the newest.
pg_bin() {
	local ver bin
	if [[ -f "$PG_DATA/PG_VERSION" ]]; then
		ver="$(<"$PG_DATA/PG_VERSION")"
		bin="/usr/lib/postgresql/$ver/bin"
		[[ -x "$bin/postgres" ]] ||
			die "cluster in $PG_DATA is PostgreSQL $ver but $bin is not installed; install postgresql-$ver or run: deploy/stack.sh wipe"
		echo "$bin"
		return 0
	fi
	bin="$(pg_bin_dir)"
	[[ -n "$bin" ]] || die "no PostgreSQL server binaries under /usr/lib/postgresql (run: deploy/stack.sh up)"
	echo "$bin"
}

pg_running() {
	pg_resolve
	[[ -f "$PG_DATA/PG_VERSION" ]] || return 1
	as_pg "$(pg_bin)/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1
}

pg_psql() {
	"$(pg_bin)/psql" -X -q -v ON_ERROR_STOP=1 -h "$HOST" -p "$PG_PORT" -U "$PG_USER" "$@"
}

pg_ensure_db() {
	local exists
	exists="$(pg_psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" ||
		die "cannot query PostgreSQL on $HOST:$PG_PORT as $PG_USER"
	if [[ "$exists" != 1 ]]; then
		pg_psql -d postgres -c "CREATE DATABASE $PG_DB" >/dev/null || die "create database $PG_DB failed"
	fi
}

# pg_init BIN: initdb once, and the socket and log the server writes.
pg_init() {
	local bin="$1"
	if [[ ! -f "$PG_DATA/PG_VERSION" ]]; then
		note "initializing PostgreSQL cluster in $PG_DATA"
		as_pg "$bin/initdb" -D "$PG_DATA" -U "$PG_USER" -A trust --encoding=UTF8 --locale=C >"$STACK/initdb.log" 2>&1 || {
			tail_log "$STACK/initdb.log"
			die "initdb failed"
		}
	fi
	if is_root; then
		install -d -o postgres -g postgres -m 700 "$PG_SOCK"
		[[ -e "$PG_LOG" ]] || install -o postgres -g postgres -m 600 /dev/null "$PG_LOG"
	else
		mkdir -p "$PG_SOCK"
	fi
}

cmd_start() {
	local bin
	if pg_running; then
		pg_ensure_db
		return 0
	fi
	[[ -n "$(pg_bin_dir)" ]] || ensure_packages
	pg_resolve create
	bin="$(pg_bin)"
	if port_open "$PG_PORT"; then
		die "port $PG_PORT is taken by a process that is not this stack's PostgreSQL (set FLASHSALE_PG_PORT)"
	fi
	pg_init "$bin"
	# Settings go on the command line so a changed port applies to an
	# existing cluster too. fsync stays on: durability claims are tested.
	# track_commit_timestamp: make bench reads when the last order was
	# committed (pg_xact_commit_timestamp), not when its transaction began.
	# pg_ctl -w waits until the server accepts connections and notices
	# when it dies during startup.
	as_pg "$bin/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t "$WAIT" -s start -o "$(printf '%s ' \
		-p "$PG_PORT" \
		-c listen_addresses="$HOST" \
		-c unix_socket_directories="$PG_SOCK" \
		-c max_connections=200 \
		-c shared_buffers=256MB \
		-c track_commit_timestamp=on \
		-c fsync=on)" </dev/null >/dev/null 2>&1 9>&- || {
		tail_log "$PG_LOG"
		die "postgres did not start on $HOST:$PG_PORT within ${WAIT}s"
	}
	local deadline=$((SECONDS + WAIT))
	until "$bin/pg_isready" -q -h "$HOST" -p "$PG_PORT"; do
		if ((SECONDS >= deadline)); then
			tail_log "$PG_LOG"
			die "postgres started but does not answer on $HOST:$PG_PORT"
		fi
		sleep 0.2
	done
	pg_ensure_db
}

cmd_stop() {
	if ! pg_running; then return 0; fi
	# fast: disconnect clients and shut down with a checkpoint; smart would
	# wait forever for connection pools to go away.
	as_pg "$(pg_bin)/pg_ctl" -D "$PG_DATA" -m fast -w -t "$WAIT" -s stop >/dev/null || {
		tail_log "$PG_LOG"
		die "pg_ctl stop failed"
	}
}

cmd_status() {
	if pg_running && "$(pg_bin)/pg_isready" -q -h "$HOST" -p "$PG_PORT"; then
		printf '%-9s running  %s:%s  data %s  postgres://%s@%s:%s/%s?sslmode=disable\n' \
			postgres "$HOST" "$PG_PORT" "$PG_DATA" "$PG_USER" "$HOST" "$PG_PORT" "$PG_DB"
	else
		printf '%-9s stopped  %s:%s\n' postgres "$HOST" "$PG_PORT"
		return 1
	fi
}

cmd_wipe() {
	cmd_stop
	rm -rf "$STACK/postgres" "$(pg_fallback_base)"
}

component_main postgres "$@"
