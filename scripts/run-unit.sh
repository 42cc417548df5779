#!/usr/bin/env bash
# run-unit.sh DIR NAME... -- runs Check unit-test programs from the repo root
# and prints "unit: N passed, N failed" for them together.
set -u
cd "$(dirname "$0")/.."
dir=$1; shift
pass=0; fail=0; bad=()
export CK_FORK=no            # one process: sanitizers see every leak
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for name in "$@"; do
	out=$("$dir/$name" 2>&1); rc=$?
	line=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks: ' | tail -n 1)
	checks=$(printf '%s' "$line" | sed -nE 's/.*Checks: ([0-9]+).*/\1/p')
	failures=$(printf '%s' "$line" | sed -nE 's/.*Failures: ([0-9]+).*/\1/p')
	errors=$(printf '%s' "$line" | sed -nE 's/.*Errors: ([0-9]+).*/\1/p')
	checks=${checks:-0}; failures=${failures:-0}; errors=${errors:-0}
	f=$((failures + errors))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # crashed or sanitizer report
	pass=$((pass + checks - (f > checks ? checks : f)))
	fail=$((fail + f))
	if [ "$f" -ne 0 ]; then
		bad+=("$name")
		printf '%s\n' "$out" | tail -n 40
	fi
	printf '  %-28s %s\n' "$name" "${line:-no summary (exit $rc)}"
done
[ "${#bad[@]}" -eq 0 ] || echo "  failing: ${bad[*]}"
echo "unit ($dir): $pass passed, $fail failed"
[ "$fail" -eq 0 ]
