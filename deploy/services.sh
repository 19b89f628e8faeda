# shellcheck shell=bash
# services.sh: shared by demo.sh and benchmarks/run.sh (source it): the
# development secrets and starting/stopping the two services.

# load_dev_env STACK_DIR: export the development secrets, generating them
# once, random, under the git-ignored stack folder (never committed).
load_dev_env() {
	local env_file="$1/dev.env"
	if [[ ! -f "$env_file" ]]; then
		mkdir -p "$1"
		(
			umask 077
			{
				echo "FLASHSALE_JWT_HS256_KEY=$(head -c 48 /dev/urandom | base64 | tr -d '\n/+=')"
				echo "FLASHSALE_GATE_KEY=$(head -c 48 /dev/urandom | base64 | tr -d '\n/+=')"
				echo "FLASHSALE_ADMIN_TOKEN=$(head -c 24 /dev/urandom | base64 | tr -d '\n/+=')"
			} >"$env_file"
		)
	fi
	set -a
	# shellcheck disable=SC1090
	source "$env_file"
	set +a
}

# Services started with start_service stop (SIGTERM, then wait) on exit.
service_pids=()
stop_services() {
	for pid in "${service_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${service_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_services EXIT

# start_service LOG CMD...: run CMD in the background, output to LOG.
start_service() {
	local log="$1"
	shift
	"$@" >"$log" 2>&1 &
	service_pids+=($!)
}

# refuse_taken NAME PORT...: exit when something already listens on one of
# the loopback ports NAME is about to take: a service left over from an
# aborted run would answer in the new one's place (the new one failing to
# bind), or, with SO_REUSEPORT, share its port.
# A demo killed with SIGKILL leaves its services running; the message names
# the process when ss can tell (root, or the same user), so it can be stopped.
refuse_taken() {
	local name="$1" p pid who
	shift
	for p in "$@"; do
		if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			pid=$(ss -Hltnp "sport = :$p" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2 || true)
			who=""
			if [[ -n "$pid" ]]; then
				who=" (pid $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-120 | sed 's/ *$//'); kill $pid)"
			fi
			echo "services: something already listens on 127.0.0.1:$p, where $name would (a $name left from an earlier run?); stop it first$who" >&2
			exit 1
		fi
	done
}

# wait_ready NAME URL LOG: wait up to 30 s for URL to answer 2xx, while the
# service started last is alive (not a leftover answering in its place).
wait_ready() {
	local pid="${service_pids[-1]}"
	for _ in $(seq 1 300); do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "$1 exited before it was ready; last log lines:" >&2
			tail -n 30 "$3" >&2
			exit 1
		fi
		if curl -fsS --max-time 2 "$2" >/dev/null 2>&1; then return 0; fi
		sleep 0.1
	done
	echo "$1 did not become ready at $2; last log lines:" >&2
	tail -n 30 "$3" >&2
	exit 1
}
