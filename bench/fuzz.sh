#!/bin/sh
# fuzz.sh runs every fuzz target of the module (every `func FuzzX(f
# *testing.F)` in a _test.go file), one after another, each for FUZZTIME
# (default 5m), and prints a table of target, package, executions and
# result. It runs all of them even when one fails and exits 1 at the end
# if any failed. A failing input is written by go test to the package's
# testdata/fuzz/FuzzX/ directory (keep it there as a regression case);
# the table names it.
#
# Environment: GO (default go), FUZZTIME (a duration such as 5m, or Nx),
# FUZZFLAGS (more flags for go test, e.g. "-parallel 1"), FUZZLOGS (the
# directory for each target's full output, default bin/fuzz).
set -u

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-5m}
FUZZFLAGS=${FUZZFLAGS:-}
FUZZLOGS=${FUZZLOGS:-bin/fuzz}

cd "$(dirname "$0")/.." || exit 2
mkdir -p "$FUZZLOGS" || exit 2

# One line per target: "./pkg FuzzName", in a stable order.
targets=$(git ls-files '*_test.go' 2>/dev/null || find . -name '*_test.go' -not -path './.git/*')
list=$(for f in $targets; do
	sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*\*testing\.F).*/\1/p' "$f" |
		while read -r name; do echo "./$(dirname "$f") $name"; done
done | sed 's|^\./\./|./|' | sort)
if [ -z "$list" ]; then
	echo "fuzz.sh: no fuzz targets found" >&2
	exit 2
fi
n=$(echo "$list" | wc -l)
echo "fuzz.sh: $n targets, $FUZZTIME each"

table=""
failed=0
i=0
echo "$list" | {
	while read -r pkg name; do
		i=$((i + 1))
		log="$FUZZLOGS/$(echo "$pkg" | tr / _ | sed 's/^\._//')-$name.log"
		echo "[$i/$n] $name ($pkg) ..."
		start=$(date +%s)
		# shellcheck disable=SC2086
		$GO test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" $FUZZFLAGS "$pkg" >"$log" 2>&1
		rc=$?
		secs=$(($(date +%s) - start))
		# The last progress line carries the total: "fuzz: elapsed: 5m0s, execs: 123 (...)".
		execs=$(sed -n 's/.*execs: \([0-9]*\).*/\1/p' "$log" | tail -n 1)
		[ -n "$execs" ] || execs="-"
		if [ $rc -eq 0 ]; then
			result="ok"
		else
			failed=$((failed + 1))
			input=$(sed -n 's/.*Failing input written to \([^ ]*\).*/\1/p' "$log" | tail -n 1)
			if [ -n "$input" ]; then
				result="FAIL: $pkg/$input"
			else
				result="FAIL (exit $rc, see $log)"
			fi
			tail -n 30 "$log"
		fi
		echo "    $execs execs in ${secs}s: $result"
		table="$table$(printf '%-28s %-14s %12s  %s' "$name" "$pkg" "$execs" "$result")
"
	done
	echo
	printf '%-28s %-14s %12s  %s\n' TARGET PACKAGE EXECS RESULT
	printf '%s' "$table"
	echo
	if [ $failed -gt 0 ]; then
		echo "fuzz.sh: $failed of $n targets failed (logs in $FUZZLOGS)"
		exit 1
	fi
	echo "fuzz.sh: all $n targets passed (logs in $FUZZLOGS)"
}
