# shellcheck shell=bash
# stackenv.sh: source it to export deploy/stack.env's settings, each unless
# the environment already sets it.
_stackenv_file="$(dirname "${BASH_SOURCE[0]}")/stack.env"
while IFS='=' read -r _k _v; do
	[[ "$_k" =~ ^FLASHSALE_[A-Z0-9_]+$ ]] || continue
	if [[ -z "${!_k:-}" ]]; then export "$_k=$_v"; fi
done <"$_stackenv_file"
unset _k _v _stackenv_file
