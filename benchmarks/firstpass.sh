#!/usr/bin/env bash
# firstpass.sh: what a fresh order service's background passes cost the
# stack, and how much of it comes at once. Starts one order service on the
# local stack beside the sales already there (a demo series leaves the last
# ten minutes' sales open, each with its holders), reads the CPU of it,
# Redis and PostgreSQL from /proc every 100 ms for FIRSTPASS_SECONDS, and
# prints the busiest 500 ms of the three together and each one's total.
# The abandoned-reservation pass starts 5 s in and reads the holders of
# every sale in play (open, or ended within its payment window); compare
# its pace with
#   FLASHSALE_ABANDON_READ_RATE=0 bash benchmarks/firstpass.sh   (unpaced)
#   bash benchmarks/firstpass.sh                                 (default)
# An earlier demo's unpaid orders expiring meanwhile (ten minutes after its
# sale) show as a burst of their own: the timeline is in
# $FLASHSALE_STACK_DIR/logs/firstpass-cpu.txt (100 ms per line: ordersvc,
# Redis, PostgreSQL, in 10 ms ticks).
#   FIRSTPASS_SECONDS  how long to read (default 16)
#   FIRSTPASS_BIN      the ordersvc binary's directory (default bin/)
# FLASHSALE_* settings in the environment reach the order service.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
stack="${FLASHSALE_STACK_DIR:-$root/.stack}"
bin="${FIRSTPASS_BIN:-$root/bin}"
seconds="${FIRSTPASS_SECONDS:-16}"
mkdir -p "$stack/logs"
# shellcheck source=deploy/services.sh
source "$root/deploy/services.sh"
# shellcheck source=deploy/stackenv.sh
source "$root/deploy/stackenv.sh"
load_dev_env "$stack"

# listener PORT: the pid of the process listening on loopback PORT (the
# stack's own Redis and PostgreSQL, not the others a host may run).
listener() { ss -Hltnp "sport = :$1" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2; }
redis=$(listener "$FLASHSALE_REDIS_PORT")
postmaster=$(listener "$FLASHSALE_PG_PORT")
[[ -n "$redis" && -n "$postmaster" ]] || { echo "firstpass: the stack's Redis or PostgreSQL is not running: make up first" >&2; exit 1; }

# sample: "ordersvc redis postgres", CPU ticks (1/100 s) used so far. For
# PostgreSQL, the postmaster's own and its exited children's (cutime,
# cstime), and its live children's: a backend that exits keeps counting.
sample() {
	local children
	children=$(pgrep -P "$postmaster" | sed 's#.*#/proc/&/stat#')
	# shellcheck disable=SC2086 # one path per child
	awk -v o="/proc/$ordersvc/stat" -v r="/proc/$redis/stat" -v pm="/proc/$postmaster/stat" '
		FILENAME == o { os += $14 + $15; next }
		FILENAME == r { rs += $14 + $15; next }
		FILENAME == pm { ps += $14 + $15 + $16 + $17; next }
		{ ps += $14 + $15 }
		END { print os + 0, rs + 0, ps + 0 }' "/proc/$ordersvc/stat" "/proc/$redis/stat" "/proc/$postmaster/stat" $children 2>/dev/null
}

# No readiness wait: the pass starts 5 s after the service does, ready or
# not, and the reading must include its start.
refuse_taken ordersvc 8090 8091
start_service "$stack/logs/firstpass-ordersvc.log" env FLASHSALE_ORDERSVC_ADDR=127.0.0.1:8090 \
	FLASHSALE_ORDERSVC_ADMIN_ADDR=127.0.0.1:8091 "$bin/ordersvc" serve
ordersvc="${service_pids[-1]}" # env execs the service: its pid
out="$stack/logs/firstpass-cpu.txt"
{
	read -r po pr pp < <(sample)
	for _ in $(seq 1 $((seconds * 10))); do
		sleep 0.1
		read -r o r p < <(sample)
		echo "$((o - po)) $((r - pr)) $((p - pp))"
		po=$o pr=$r pp=$p
	done
} >"$out"
kill -0 "$ordersvc" 2>/dev/null || { echo "firstpass: the order service exited early: see $stack/logs/firstpass-ordersvc.log" >&2; exit 1; }
awk -v seconds="$seconds" -v load="$(cut -d' ' -f1-3 /proc/loadavg)" '
	{ o[NR] = $1; r[NR] = $2; p[NR] = $3; to += $1; tr += $2; tp += $3 }
	END {
		for (i = 5; i <= NR; i++) {
			s = 0
			for (j = i - 4; j <= i; j++) s += o[j] + r[j] + p[j]
			if (s > best) { best = s; at = i }
		}
		printf "firstpass: %ss read (%s load)\n", seconds, load
		printf "  busiest 500 ms: %d ms of CPU (ordersvc, Redis and PostgreSQL), ending %.1f s in\n", best * 10, at / 10
		printf "  totals: ordersvc %d ms, Redis %d ms, PostgreSQL %d ms\n", to * 10, tr * 10, tp * 10
	}' "$out"
