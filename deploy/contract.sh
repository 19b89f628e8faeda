#!/usr/bin/env bash
# make contract: schemathesis fuzzes the running gateway and order service
# from the OpenAPI document they serve (pkg/openapi/openapi.yaml), one run
# per listener with its credential; any 5xx or answer that does not
# conform fails. Installs schemathesis into a venv under .stack/ when
# missing. The services run on free ports (tools/harness) against the
# local stack (make up). CONTRACT_EXAMPLES (default 50) bounds the cases
# per operation; the JUnit reports land in .stack/contract/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
stack=${FLASHSALE_STACK_DIR:-$root/.stack}
venv=$stack/schemathesis
GO=${GO:-go}
version=4.32.5

# The venv is made again when its schemathesis is not the pinned version.
if [[ ! -x $venv/bin/schemathesis ]] || [[ "$("$venv/bin/pip" show schemathesis 2>/dev/null | sed -n 's/^Version: //p')" != "$version" ]]; then
	if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
		if [[ $(id -u) == 0 ]]; then
			apt-get update -qq >/dev/null
			apt-get install -y -qq python3-venv >/dev/null
		else
			echo "contract: python3 cannot make a venv; install Debian's python3-venv (sudo apt-get update && sudo apt-get install python3-venv) and run again" >&2
			exit 1
		fi
	fi
	echo "contract: installing schemathesis $version into $venv"
	rm -rf "$venv"
	python3 -m venv "$venv"
	"$venv/bin/pip" install -q "schemathesis==$version"
fi

reports=$stack/contract
rm -rf "$reports"
mkdir -p "$reports"
cd e2e
SCHEMATHESIS=$venv/bin/schemathesis \
	CONTRACT_EXAMPLES=${CONTRACT_EXAMPLES:-50} \
	CONTRACT_REPORTS=$reports \
	"$GO" test -tags contract -count=1 -run '^TestSchemathesis$' -v -timeout 30m ./contract/
