#!/usr/bin/env bash
# make fuzz: every native fuzz target of the workspace (func FuzzXxx in a
# _test.go file), one at a time, each for FUZZTIME (default 10s). go test
# writes an input that fails to the package's testdata/fuzz/FuzzXxx/,
# where it becomes a seed that every later go test runs: commit it with
# the fix. Exits non-zero when any target found a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
GO=${GO:-go}

# the workspace's modules: the Makefile passes its list (read from go.work)
modules=("$@")
if ((${#modules[@]} == 0)); then
	echo "usage: $0 MODULE_DIR... (make fuzz passes the workspace's modules)" >&2
	exit 2
fi

failed=()
ran=0
for m in "${modules[@]}"; do
	# "file:func FuzzName(" for each target of the module
	while IFS= read -r hit; do
		file=${hit%%:*}
		name=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/' <<<"${hit#*:}")
		dir=$(dirname "$file")
		echo "== $dir $name ($FUZZTIME)"
		ran=$((ran + 1))
		if ! (cd "$dir" && "$GO" test -run='^$' -fuzz="^${name}\$" -fuzztime="$FUZZTIME" .); then
			failed+=("$dir $name")
		fi
	done < <(grep -rE --include='*_test.go' -H '^func Fuzz[A-Za-z0-9_]*\(' "$m" | grep -v '/\.stack/' | sort)
done

echo "fuzz: $ran targets, ${#failed[@]} failed"
if ((${#failed[@]})); then
	printf '  %s\n' "${failed[@]}"
	echo "A target that found a failing input wrote it under its package's testdata/fuzz/<target>/ (go test printed the file): fix the code and commit the file, so every go test replays it from now on."
	exit 1
fi
new=$(git status --porcelain -- '*/testdata/fuzz/*' | wc -l)
if ((new)); then
	echo "New corpus files under testdata/fuzz/: commit them (git add) so go test replays them."
fi
