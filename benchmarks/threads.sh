#!/usr/bin/env bash
# threads.sh: the CPU each thread of one process used while a command ran,
# summed by thread name (digits folded, so "C2 CompilerThread0" and "1"
# count together), read from /proc/PID/task/*/stat before and after.
# A Go or pprof profile does not see a JVM's compiler and GC threads, nor
# librdkafka's; this does.
#
#   bash benchmarks/threads.sh kafka -- env DEMO_USERS=10000 bash deploy/demo.sh
#   bash benchmarks/threads.sh 12345 -- sleep 10
#
# PROCESS is a pid or "kafka" (the local stack's one-node broker).
set -euo pipefail

usage() {
	echo "usage: bash benchmarks/threads.sh PID|kafka -- COMMAND [ARGS...]" >&2
	exit 2
}
[[ $# -ge 3 && "$2" == "--" ]] || usage
target="$1"
shift 2
if [[ "$target" == kafka ]]; then
	target="$(pgrep -f 'flashsale.kafka=single' | head -1 || true)"
	[[ -n "$target" ]] || { echo "threads.sh: the local Kafka node is not running (make up)" >&2; exit 1; }
fi
[[ "$target" =~ ^[0-9]+$ && -d "/proc/$target" ]] || { echo "threads.sh: no process $target" >&2; exit 1; }

# snapshot: "tid<TAB>name<TAB>ticks" for every thread (utime + stime).
snapshot() {
	local t stat name rest f
	for t in /proc/"$target"/task/*; do
		stat="$(cat "$t/stat" 2>/dev/null)" || continue
		name="${stat#*(}"
		name="${name%)*}"
		rest="${stat##*) }"
		read -r -a f <<<"$rest"
		printf '%s\t%s\t%d\n' "${t##*/}" "$name" "$((f[11] + f[12]))"
	done
}

before="$(mktemp)"
after="$(mktemp)"
trap 'rm -f "$before" "$after"' EXIT
snapshot >"$before"
status=0
"$@" || status=$?
snapshot >"$after"

hz="$(getconf CLK_TCK)"
awk -F'\t' -v hz="$hz" '
	NR == FNR { was[$1] = $3; next }
	{
		name = $2; gsub(/[0-9]+/, "N", name)
		used[name] += ($3 - ($1 in was ? was[$1] : 0)) * 1000 / hz
	}
	END {
		for (n in used) { total += used[n]; if (used[n] > 0) printf "%8d ms  %s\n", used[n], n | "sort -rn" }
		close("sort -rn")
		printf "%8d ms  every thread (threads that ended during the command are not counted)\n", total
	}' "$before" "$after"
exit "$status"
