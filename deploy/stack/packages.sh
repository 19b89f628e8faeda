#!/usr/bin/env bash
# packages.sh: what the local stack needs installed, and installing it.
# Run as root it installs what is missing with apt-get; otherwise it prints
# the apt-get line to run. Sourced by the component scripts (which call
# ensure_packages when their server's binary is missing); run on its own
# it checks and installs everything (deploy/stack.sh up does).
#
#   deploy/stack/packages.sh [check]
#
# To add a package: a line in missing_packages (required) or
# optional_packages (tests that skip without it), with the check that says
# it is already here.

set -euo pipefail
# shellcheck source=deploy/stack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# pg_bin_dir: the newest installed PostgreSQL server's bin folder, or nothing.
pg_bin_dir() {
	local initdb
	initdb="$(printf '%s\n' /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)"
	if [[ -x "$initdb" ]]; then dirname "$initdb"; fi
}

find_go() {
	if command -v go >/dev/null 2>&1; then
		command -v go
	elif [[ -x /usr/local/go/bin/go ]]; then # sudo drops it from PATH
		echo /usr/local/go/bin/go
	fi
}

# java_ok: a java of version 17 or newer is on PATH.
java_ok() {
	command -v java >/dev/null 2>&1 || return 1
	local v
	v="$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')"
	[[ "${v%%.*}" =~ ^[0-9]+$ ]] && ((${v%%.*} >= 17))
}

kafka_pom_hash() { sha256sum "$KAFKA_POM" | cut -c1-16; }

# kafka_jars_cached: Maven already copied deploy/kafka/pom.xml's classpath
# (kafka-node.sh stamps a complete copy with the pom's hash).
kafka_jars_cached() { [[ -f "$KAFKA_ROOT/libs/.pom-$(kafka_pom_hash)" ]]; }

# missing_packages: the Debian packages the stack needs and this machine
# lacks, one a line.
missing_packages() {
	if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
		echo redis-server
	fi
	[[ -n "$(pg_bin_dir)" ]] || echo postgresql
	# curl: readiness checks of the services in demo.sh
	command -v curl >/dev/null 2>&1 || echo curl
	# ss: the process on a port (a leftover service named in services.sh,
	# the stack's Redis and PostgreSQL in benchmarks/firstpass.sh)
	command -v ss >/dev/null 2>&1 || echo iproute2
	# a JRE for Apache Kafka; Maven to fetch its jars unless they are
	# cached or KAFKA_HOME has them (kafka-node.sh)
	java_ok || echo default-jre-headless
	if [[ -z "${KAFKA_HOME:-}" ]] && ! kafka_jars_cached && ! command -v mvn >/dev/null 2>&1; then
		echo maven
	fi
	# prometheus: promtool checks and tests the alert rules (make test);
	# make up MONITOR=1 runs the server (deploy/prometheus.sh)
	command -v promtool >/dev/null 2>&1 || echo prometheus
}

# optional_packages: packages whose tests skip, saying why, without them
# (installed as root, named otherwise).
optional_packages() {
	# chromium: the browser tests of the sale page and dashboard (chromedp,
	# no driver)
	[[ -x /usr/bin/chromium ]] || echo chromium
}

# apt_install PACKAGE...: apt-get install as root, the log under the stack.
apt_install() {
	command -v apt-get >/dev/null 2>&1 || die "missing packages ($*) and no apt-get to install them"
	local log="$STACK/apt.log"
	mkdir -p "$STACK"
	note "installing $* (apt-get, log in $log)"
	apt-get update >"$log" 2>&1 || {
		tail_log "$log"
		die "apt-get update failed"
	}
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >>"$log" 2>&1 || {
		tail_log "$log"
		die "apt-get install $* failed"
	}
}

# ensure_packages installs what is missing (as root) or names it; it only
# checks when everything is there.
ensure_packages() {
	local missing=() optional=()
	mapfile -t missing < <(missing_packages)
	mapfile -t optional < <(optional_packages)
	if ((${#missing[@]} > 0)); then
		is_root || die "missing packages; install them with: sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}"
		apt_install "${missing[@]}"
		command -v redis-server >/dev/null 2>&1 || die "redis-server still missing after install"
		[[ -n "$(pg_bin_dir)" ]] || die "PostgreSQL server binaries still missing after install"
		java_ok || die "java 17 or newer still missing after install"
	fi
	# Optional ones in a call of their own, whose failure only costs the
	# tests that need them (it failed the whole install before).
	if ((${#optional[@]} > 0)); then
		if ! is_root; then
			note "browser tests will skip; to run them: sudo apt-get update && sudo apt-get install -y --no-install-recommends ${optional[*]}"
		elif ! (apt_install "${optional[@]}"); then
			note "optional packages (${optional[*]}) not installed: the browser tests will skip"
		fi
	fi
	[[ -n "$(find_go)" ]] || die "go not found; install Go 1.26 or newer from https://go.dev/dl/ (it builds kafka-admin and the services)"
	command -v gcc >/dev/null 2>&1 ||
		die "gcc not found; install it with: sudo apt-get install -y gcc (confluent-kafka-go needs cgo)"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	cmd_check() { ensure_packages; }
	component_main packages "${1:-check}" "${@:2}"
fi
