# shellcheck shell=bash
# lib.sh: what every script of the local stack shares, sourced by each of
# them: the settings and paths (ports from deploy/stack.env), messages,
# process checks and the stack's lock. It defines functions only.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
# The ports (deploy/stack.env), unless the environment sets them.
# shellcheck source=deploy/stackenv.sh
source "$ROOT/deploy/stackenv.sh"

HOST=127.0.0.1
STACK="${FLASHSALE_STACK_DIR:-$ROOT/.stack}"
WAIT="${FLASHSALE_STACK_WAIT:-60}"
CLUSTER="${FLASHSALE_CLUSTER:-${FLASHSALE_REDIS_CLUSTER:-0}}"

# Paths of each component, declared here once: the scripts and the
# package check (packages.sh) share them.
# shellcheck disable=SC2034 # used by the scripts that source this file
REDIS_DIR="$STACK/redis"
# shellcheck disable=SC2034
CLUSTER_DIR="$STACK/redis-cluster"
# shellcheck disable=SC2034
KAFKA_ROOT="$STACK/kafka"
# shellcheck disable=SC2034
KAFKA_POM="$ROOT/deploy/kafka/pom.xml"
# shellcheck disable=SC2034
KAFKA_ADMIN="$STACK/bin/kafka-admin"

die() {
	echo "stack: error: $*" >&2
	exit 1
}
note() { echo "stack: $*" >&2; }
is_root() { [[ "$(id -u)" -eq 0 ]]; }

cluster_wanted() { [[ "$CLUSTER" == 1 || "$CLUSTER" == true || "$CLUSTER" == yes ]]; }

# tail_log prints the end of a server log after a failure.
tail_log() {
	local log="$1"
	if [[ -r "$log" ]]; then
		echo "---- last lines of $log ----" >&2
		tail -n 30 "$log" >&2 || true
		echo "----" >&2
	else
		echo "(no log at $log)" >&2
	fi
}

# port_open succeeds when something accepts TCP connections on 127.0.0.1:$1.
port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# proc_running PID: the process exists and is not a zombie. A daemonized
# server's parent is PID 1, which in a container may reap it only seconds
# after it exited.
proc_running() {
	kill -0 "$1" 2>/dev/null || return 1
	! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

# pid_alive PIDFILE NAME: the pid in PIDFILE runs and its command line
# contains NAME, so a recycled pid is never mistaken for our server.
pid_alive() {
	local pidfile="$1" name="$2" pid
	[[ -s "$pidfile" ]] || return 1
	pid="$(<"$pidfile")"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	proc_running "$pid" || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$name"
}

# wait_gone PID SECONDS waits for a process to exit.
wait_gone() {
	local pid="$1" deadline=$((SECONDS + $2))
	while proc_running "$pid"; do
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

# lock: one stack command at a time per folder (two concurrent starts would
# race on initdb and pid files). deploy/stack.sh takes it once and the
# component scripts it runs inherit it (STACK_LOCK_HELD); a component
# script run on its own takes it itself. Servers must not inherit fd 9
# (see the 9>&- on each), or they would hold the lock forever.
lock() {
	[[ "${STACK_LOCK_HELD:-}" == "$STACK" ]] && return 0
	mkdir -p "$STACK"
	if [[ -e "$STACK/.lock" && ! -w "$STACK/.lock" ]]; then
		die "$STACK/.lock belongs to $(stat -c %U "$STACK/.lock") (an earlier run as another user, e.g. sudo make demo?); run as that user, or: sudo chown -R $(id -un) $STACK"
	fi
	exec 9>"$STACK/.lock"
	flock -w "$((WAIT * 3))" 9 || die "another stack command holds $STACK/.lock"
	export STACK_LOCK_HELD="$STACK"
}

# component_main NAME CMD [ARGS...]: the entry point of a component script
# (deploy/stack/NAME.sh): runs its function cmd_CMD (dashes read as
# underscores), under the lock unless CMD only looks.
component_main() {
	local name="$1" cmd="${2:-}" fn
	shift 2 || shift $#
	fn="cmd_${cmd//-/_}"
	if [[ -z "$cmd" ]] || ! declare -F "$fn" >/dev/null; then
		echo "usage: deploy/stack/$name.sh $(declare -F | awk '$3 ~ /^cmd_/ { c = substr($3, 5); gsub("_", "-", c); printf "%s%s", sep, c; sep = "|" }')" >&2
		exit 2
	fi
	case "$cmd" in
	status | running | any-running) ;;
	*) lock ;;
	esac
	"$fn" "$@"
}
