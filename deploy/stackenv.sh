# shellcheck shell=bash
# stackenv.sh: source it to export deploy/stack.env's settings, each unless
# the environment already sets it.
_stackenv_file="$(dirname "${BASH_SOURCE[0]}")/stack.env"
while IFS='=' read -r _k _v; do
	[[ "$_k" =~ ^FLASHSALE_[A-Z0-9_]+$ ]] || continue
	if [[ -z "${!_k:-}" ]]; then export "$_k=$_v"; fi
done <"$_stackenv_file"
unset _k _v _stackenv_file

# The services' and the load generator's addresses of the single-node
# stack, from its ports, unless set: their built-in defaults are the
# default ports, so a stack moved to other ports (FLASHSALE_REDIS_PORT and
# the rest, deploy/README.md) was reached at the default ones, another
# stack's or a foreign process's. The cluster shape sets Redis and Kafka
# itself.
export FLASHSALE_REDIS_ADDR="${FLASHSALE_REDIS_ADDR:-127.0.0.1:$FLASHSALE_REDIS_PORT}"
export FLASHSALE_KAFKA_BROKERS="${FLASHSALE_KAFKA_BROKERS:-127.0.0.1:$FLASHSALE_KAFKA_PORT}"
export FLASHSALE_PG_DSN="${FLASHSALE_PG_DSN:-postgres://flashsale@127.0.0.1:$FLASHSALE_PG_PORT/flashsale?sslmode=disable}"
