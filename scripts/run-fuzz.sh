#!/usr/bin/env bash
# run-fuzz.sh SECONDS NAME... -- runs each libFuzzer target for SECONDS on its
# seed corpus (read-only) plus a scratch corpus; crashes land in build/fuzz/artifacts/.
set -u
cd "$(dirname "$0")/.."
secs=$1; shift
pass=0; fail=0
mkdir -p build/fuzz/artifacts
for name in "$@"; do
	scratch=$(mktemp -d)
	seeds=tests/fuzz/corpus/$name
	[ -d "$seeds" ] || seeds=
	out=$(./build/fuzz/"$name" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix=build/fuzz/artifacts/"$name"- -print_final_stats=1 \
		"$scratch" $seeds 2>&1); rc=$?
	rm -rf "$scratch"
	runs=$(printf '%s\n' "$out" | sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p')
	if [ "$rc" -eq 0 ]; then
		pass=$((pass + 1)); printf '  %-24s ok, %s executions in %ss\n' "$name" "${runs:-?}" "$secs"
	else
		fail=$((fail + 1)); printf '%s\n' "$out" | tail -n 30; printf '  %-24s FAILED (exit %s)\n' "$name" "$rc"
	fi
done
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
