# shellcheck shell=bash
# kafka-node.sh: one Apache Kafka node of the local stack, sourced by
# kafka.sh (the one-node Kafka) and kafka-cluster.sh (three nodes). It
# defines functions only.
#
# The broker is Apache Kafka itself in KRaft mode (no ZooKeeper), run by
# Java 17 from the jars Maven Central serves for org.apache.kafka:kafka_2.13
# (deploy/kafka/pom.xml pins the version), or from a distribution named by
# KAFKA_HOME. Nodes are named "single" (the one-node stack, node id 1) or
# "cluster-N" (N = 1..3).
#
# Every node also has a listener named PROXIED, bound on client port +2
# (single) or +20 (cluster) and advertised on +3 or +30, where nothing
# listens unless a fault test puts a TCP proxy there: a client that
# bootstraps through the proxies is told to use them for every broker, so a
# network fault can sit between it and one broker (toxiproxy; see faults/).
# Services and tests use the plain listener.

# shellcheck source=deploy/stack/packages.sh
source "$(dirname "${BASH_SOURCE[0]}")/packages.sh"

# Ports and partitions come from deploy/stack.env (lib.sh loads it).
KAFKA_PORT="$FLASHSALE_KAFKA_PORT"
KAFKA_CLUSTER_PORT="$FLASHSALE_KAFKA_CLUSTER_PORT"
KAFKA_PARTITIONS="$FLASHSALE_KAFKA_PARTITIONS"
# 2 cores and 24 GiB: a node of the local stack needs little heap (its
# data lives in the page cache, not the heap); four of them run during
# make test. Production brokers get 6 GiB (deploy/README.md).
KAFKA_HEAP="${FLASHSALE_KAFKA_HEAP:--Xms256m -Xmx1g}"
# The JIT stops at C1. On a machine where the broker shares two cores with
# everything a sale runs, C2's compiler thread cost 300-1,600 ms of CPU per
# 10,000-order demo, still after many demos (it kept recompiling), more
# than the request handlers' 450 ms. C1's code is a little slower in the
# handlers but its compiles are done within the first sale; broker CPU
# while selling fell from a median of about 690 to 410 ms
# (benchmarks/README.md, "The broker's JIT"). A production broker on its
# own cores keeps the JVM's default: FLASHSALE_KAFKA_JVM_FLAGS=' '.
KAFKA_JVM_FLAGS="${FLASHSALE_KAFKA_JVM_FLAGS:--XX:TieredStopAtLevel=1}"
KAFKA_WAIT="${FLASHSALE_KAFKA_WAIT:-120}"
KAFKA_CLUSTER_NODES=3

# ------------------------------------------------------------ installation

# kafka_libs: the folder whose jars make the broker's classpath.
kafka_libs() {
	if [[ -n "${KAFKA_HOME:-}" ]]; then
		echo "$KAFKA_HOME/libs"
	else
		echo "$KAFKA_ROOT/libs"
	fi
}

# kafka_jars: make sure the classpath is there. From Maven Central once per
# version of deploy/kafka/pom.xml (a stamp of its hash marks a complete
# copy; Maven's own ~/.m2 cache makes a changed pom download only what
# changed).
kafka_jars() {
	if [[ -n "${KAFKA_HOME:-}" ]]; then
		compgen -G "$KAFKA_HOME/libs/kafka_2.13-*.jar" >/dev/null ||
			die "KAFKA_HOME=$KAFKA_HOME has no libs/kafka_2.13-*.jar (point it at an Apache Kafka 4.x distribution, or unset it to use Maven Central's jars)"
		return 0
	fi
	kafka_jars_cached && return 0
	command -v mvn >/dev/null 2>&1 || ensure_packages
	local tmp="$KAFKA_ROOT/libs.tmp" log="$KAFKA_ROOT/maven.log"
	mkdir -p "$KAFKA_ROOT"
	rm -rf "$tmp"
	note "fetching the Kafka broker's jars with Maven ($(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$KAFKA_POM"); log in $log)"
	mvn -B -q -f "$KAFKA_POM" dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="$tmp" >"$log" 2>&1 || {
		tail_log "$log"
		die "mvn could not fetch the Kafka jars (Maven Central reachable? see $log)"
	}
	compgen -G "$tmp/kafka_2.13-*.jar" >/dev/null || die "mvn finished but $tmp has no kafka_2.13 jar"
	touch "$tmp/.pom-$(kafka_pom_hash)"
	rm -rf "$KAFKA_ROOT/libs"
	mv "$tmp" "$KAFKA_ROOT/libs"
}

# kafka_admin_build: deploy/kafka (probe, topic creation) as a binary,
# rebuilt when its sources or the topic package it uses change.
kafka_admin_build() {
	local go
	if [[ -x "$KAFKA_ADMIN" ]] && [[ -z "$(find "$ROOT/deploy/kafka" "$ROOT/tools/kafkatopic" \( -name '*.go' -o -name go.mod \) -newer "$KAFKA_ADMIN" 2>/dev/null)" ]]; then
		return 0
	fi
	go="$(find_go)"
	[[ -n "$go" ]] || ensure_packages
	go="$(find_go)"
	mkdir -p "$STACK/bin"
	note "building deploy/kafka (kafka-admin; the first build links librdkafka and takes about a minute)"
	(cd "$ROOT" && "$go" build -o "$KAFKA_ADMIN" ./deploy/kafka) >"$STACK/kafka-admin-build.log" 2>&1 || {
		tail_log "$STACK/kafka-admin-build.log"
		[[ -x "$KAFKA_ADMIN" ]] || die "go build ./deploy/kafka failed"
		note "go build ./deploy/kafka failed; using the previously built $KAFKA_ADMIN"
	}
}

# kafka_prepare: everything a node needs before it starts.
kafka_prepare() {
	java_ok || ensure_packages
	kafka_jars
	kafka_admin_build
}

# ------------------------------------------------------------ one node

kafka_dir() { echo "$KAFKA_ROOT/$1"; }
kafka_pidfile() { echo "$KAFKA_ROOT/$1/kafka.pid"; }
kafka_node_running() { pid_alive "$(kafka_pidfile "$1")" "flashsale.kafka=$1 "; }

# kafka_node_ports NAME: client controller proxied-bind proxied-advertised
kafka_node_ports() {
	case "$1" in
	single) echo "$KAFKA_PORT $((KAFKA_PORT + 1)) $((KAFKA_PORT + 2)) $((KAFKA_PORT + 3))" ;;
	cluster-*)
		local i=$((${1#cluster-} - 1))
		echo "$((KAFKA_CLUSTER_PORT + i)) $((KAFKA_CLUSTER_PORT + 10 + i)) $((KAFKA_CLUSTER_PORT + 20 + i)) $((KAFKA_CLUSTER_PORT + 30 + i))"
		;;
	*) die "unknown kafka node $1" ;;
	esac
}

# kafka_join SEP WORDS...: the words joined by SEP.
kafka_join() {
	local IFS="$1"
	shift
	echo "$*"
}

kafka_voters() { # single | cluster
	if [[ "$1" == single ]]; then
		echo "1@$HOST:$((KAFKA_PORT + 1))"
		return 0
	fi
	local i out=()
	for i in $(seq 1 "$KAFKA_CLUSTER_NODES"); do
		out+=("$i@$HOST:$((KAFKA_CLUSTER_PORT + 10 + i - 1))")
	done
	kafka_join , "${out[@]}"
}

kafka_bootstrap() { # single | cluster
	if [[ "$1" == single ]]; then
		echo "$HOST:$KAFKA_PORT"
		return 0
	fi
	local i out=()
	for i in $(seq 0 $((KAFKA_CLUSTER_NODES - 1))); do out+=("$HOST:$((KAFKA_CLUSTER_PORT + i))"); done
	kafka_join , "${out[@]}"
}

# kafka_write_config NAME: the node's server.properties, written at every
# start so a changed port or setting applies to an existing node.
kafka_write_config() {
	local name="$1" dir id rf isr voters client ctrl pbind padv
	dir="$(kafka_dir "$name")"
	read -r client ctrl pbind padv <<<"$(kafka_node_ports "$name")"
	if [[ "$name" == single ]]; then
		id=1 rf=1 isr=1 voters="$(kafka_voters single)"
	else
		id="${name#cluster-}" rf=3 isr=2 voters="$(kafka_voters cluster)"
	fi
	mkdir -p "$dir/data"
	cat >"$dir/server.properties" <<PROPERTIES
# Written by deploy/stack/kafka-node.sh at every start of node $name; edit it there instead.
process.roles=broker,controller
node.id=$id
controller.quorum.voters=$voters
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://$HOST:$client,PROXIED://$HOST:$pbind,CONTROLLER://$HOST:$ctrl
advertised.listeners=PLAINTEXT://$HOST:$client,PROXIED://$HOST:$padv
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,PROXIED:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data

# Durability: what production uses on three brokers (deploy/README.md).
default.replication.factor=$rf
min.insync.replicas=$isr
unclean.leader.election.enable=false
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr

# The project creates its topics (kafka-admin topics); tests produce to
# topics of their own, which the broker creates with the same partitions.
num.partitions=$KAFKA_PARTITIONS
auto.create.topics.enable=true
offsets.topic.num.partitions=12

# Local only, so tests wait less: a dead node is fenced after 4 s (default
# 9 s), a lagging follower leaves the ISR after 10 s (default 30 s), a new
# consumer group does not wait 3 s for more members.
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=4000
replica.lag.time.max.ms=10000
group.initial.rebalance.delay.ms=0

# Two cores: fewer threads than Kafka's defaults for a big machine.
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=2
PROPERTIES
}

# kafka_format NAME CLUSTER_ID: kafka-storage format, once per node.
kafka_format() {
	local name="$1" cid="$2" dir
	dir="$(kafka_dir "$name")"
	[[ -f "$dir/data/meta.properties" ]] && return 0
	java -cp "$(kafka_libs)/*" -Dlog4j2.configurationFile="$ROOT/deploy/kafka/log4j2.properties" \
		kafka.tools.StorageTool format --ignore-formatted -t "$cid" -c "$dir/server.properties" \
		>"$dir/format.log" 2>&1 || {
		tail_log "$dir/format.log"
		die "kafka-storage format of node $name failed"
	}
}

# kafka_cluster_id SHAPE: a KRaft cluster id (16 random bytes, base64url),
# made once per shape. Like Kafka's own Uuid.randomUuid it never starts with
# '-', which kafka-storage would read as an option (one id in 64 did: a
# fresh clone failed to format its node).
kafka_cluster_id() {
	local f="$KAFKA_ROOT/$1.cluster-id" id
	if [[ ! -s "$f" || "$(<"$f")" == -* ]]; then
		mkdir -p "$KAFKA_ROOT"
		id=-
		while [[ "$id" == -* ]]; do
			id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
		done
		printf '%s' "$id" >"$f"
	fi
	cat "$f"
}

kafka_node_start() { # NAME CLUSTER_ID
	local name="$1" dir pidfile client ctrl pbind padv p
	kafka_node_running "$name" && return 0
	dir="$(kafka_dir "$name")"
	pidfile="$(kafka_pidfile "$name")"
	read -r client ctrl pbind padv <<<"$(kafka_node_ports "$name")"
	for p in "$client" "$ctrl" "$pbind"; do
		if port_open "$p"; then
			die "port $p is taken by a process that is not this stack's Kafka node $name (set FLASHSALE_KAFKA_PORT / FLASHSALE_KAFKA_CLUSTER_PORT)"
		fi
	done
	kafka_write_config "$name"
	kafka_format "$name" "$2"
	rm -f "$pidfile"
	# The log is appended to across starts: past 50 MB it moves aside (one
	# previous log kept) instead of growing for ever.
	if [[ -f "$dir/kafka.log" ]] && (($(stat -c %s "$dir/kafka.log") > 50 * 1024 * 1024)); then
		mv -f "$dir/kafka.log" "$dir/kafka.log.1"
	fi
	# setsid: the node leaves our session, so a Ctrl-C aimed at whatever ran
	# this script does not reach it. It execs in place (we are not a group
	# leader), so $! is the JVM's own pid. The -D marker names the node for
	# pid_alive. GC settings are those of Kafka's own kafka-run-class.sh.
	# shellcheck disable=SC2086
	setsid nohup java $KAFKA_HEAP -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
		-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent $KAFKA_JVM_FLAGS \
		-Djava.awt.headless=true "-Dflashsale.kafka=$name" \
		-Dlog4j2.configurationFile="$ROOT/deploy/kafka/log4j2.properties" -Dkafka.logs.dir="$dir" \
		-cp "$(kafka_libs)/*" kafka.Kafka "$dir/server.properties" \
		</dev/null >>"$dir/kafka.log" 2>&1 9>&- &
	echo $! >"$pidfile"
}

kafka_node_stop() { # NAME [SECONDS to wait for the controlled shutdown, 60]
	local name="$1" grace="${2:-60}" pidfile pid
	pidfile="$(kafka_pidfile "$name")"
	if ! kafka_node_running "$name"; then
		rm -f "$pidfile"
		return 0
	fi
	pid="$(<"$pidfile")"
	# SIGTERM: a controlled shutdown (leadership moves to the other nodes
	# first, the log is flushed and closed cleanly).
	kill -TERM "$pid" 2>/dev/null || true
	if ! wait_gone "$pid" "$grace"; then
		note "kafka node $name (pid $pid) did not exit ${grace}s after SIGTERM; killing it (acknowledged records are in the page cache; the next start recovers the log)"
		kill -KILL "$pid" 2>/dev/null || true
		wait_gone "$pid" 5 || die "kafka node $name (pid $pid) does not die"
	fi
	rm -f "$pidfile"
}

# kafka_probe BOOTSTRAP BROKERS TIMEOUT: the cluster lists BROKERS brokers.
kafka_probe() {
	"$KAFKA_ADMIN" probe -bootstrap "$1" -brokers "$2" -timeout "$3" >/dev/null 2>&1
}

# kafka_wait BOOTSTRAP BROKERS NAMES...: until the cluster lists BROKERS
# brokers, failing early when one of the nodes died.
kafka_wait() {
	local bootstrap="$1" brokers="$2" n
	shift 2
	local deadline=$((SECONDS + KAFKA_WAIT))
	until kafka_probe "$bootstrap" "$brokers" 2s; do
		for n in "$@"; do
			if ! kafka_node_running "$n"; then
				tail_log "$(kafka_dir "$n")/kafka.log"
				die "kafka node $n exited during startup"
			fi
		done
		if ((SECONDS >= deadline)); then
			for n in "$@"; do tail_log "$(kafka_dir "$n")/kafka.log"; done
			die "kafka on $bootstrap did not list $brokers broker(s) within ${KAFKA_WAIT}s"
		fi
		sleep 0.5
	done
}

kafka_topics() { # BOOTSTRAP RF MIN_ISR
	local out
	out="$("$KAFKA_ADMIN" topics -bootstrap "$1" -partitions "$KAFKA_PARTITIONS" \
		-replication-factor "$2" -min-insync-replicas "$3" -timeout 60s 2>&1)" || {
		echo "$out" >&2
		die "creating the flash-sale topics on $1 failed"
	}
	grep '^created' <<<"$out" | sed 's/^/stack: /' >&2 || true
}
