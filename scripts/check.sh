#!/usr/bin/env bash
# check.sh -- everything `make check` runs, in order, ending with one summary
# line "check: N passed, N failed" (tests and gates counted together).
set -u
cd "$(dirname "$0")/.."
export PATH="$PWD/tests/node_modules/.bin:$PATH"
# 5 s a target keeps the step near 90 s with 18 targets; `make fuzz-long` runs 600 s each.
FUZZ_SECONDS=${FUZZ_SECONDS:-5}
total_pass=0; total_fail=0; steps=()
t0=$(date +%s)

# Adds a step's "N passed, N failed" line (the last such line of its output).
tally() {
	local name=$1 log=$2 rc=$3 secs=${4:-} line p f
	line=$(grep -oE '[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	p=$(printf '%s' "$line" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
	f=$(printf '%s' "$line" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
	p=${p:-0}; f=${f:-0}
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
	steps+=("$(printf '%-26s %4s passed %4s failed%s' "$name" "$p" "$f" "${secs:+  (${secs}s)}")")
}

step() {   # step NAME COMMAND...
	local name=$1; shift
	local log; log=$(mktemp)
	echo "== $name"
	local t; t=$(date +%s)
	# A pipeline, not a process substitution: it waits for its tee alone (a bare
	# `wait` would also wait for the PostgreSQL pass running in the background).
	"$@" 2>&1 | tee "$log"
	local rc=${PIPESTATUS[0]}
	tally "$name" "$log" "$rc" "$(( $(date +%s) - t ))"
	rm -f "$log"
}

gate() {   # a step that is one check: pass or fail
	local name=$1; shift
	echo "== $name"
	if "$@"; then total_pass=$((total_pass + 1)); steps+=("$(printf '%-26s %4s passed %4s failed' "$name" 1 0)")
	else total_fail=$((total_fail + 1)); steps+=("$(printf '%-26s %4s passed %4s failed' "$name" 0 1)"); fi
}

gate "build (-Werror)" make -s -j"$(nproc)" build-tests
gate "fuzz build" make -s -j"$(nproc)" $(ls tests/fuzz/fuzz_*.c 2>/dev/null | sed -E 's|tests/fuzz/(.*)\.c|build/fuzz/\1|')
gate "lint" bash scripts/lint.sh
step "unit" make -s unit
step "unit (asan+ubsan)" make -s unit-asan
node_tests() {   # node_tests DIR [FILES AT ONCE]
	local dir=$1 conc=${2:-1}
	if ! ls "$dir"/*.test.js >/dev/null 2>&1; then echo "no tests in $dir"; echo "0 passed, 0 failed"; return 0; fi
	TEST_CONSENTD_BIN="$PWD/build/consentd-asan" node --test --test-concurrency="$conc" "$dir"/ 2>&1 | tee /tmp/consentd-node-$$.log
	local rc=${PIPESTATUS[0]}
	local p f
	p=$(sed -nE 's/^# pass ([0-9]+)/\1/p' /tmp/consentd-node-$$.log | tail -n 1)
	f=$(sed -nE 's/^# fail ([0-9]+)/\1/p' /tmp/consentd-node-$$.log | tail -n 1)
	rm -f /tmp/consentd-node-$$.log
	echo "$(basename "$dir"): ${p:-0} passed, ${f:-0} failed"
	return "$rc"
}
# The PostgreSQL backend, two nodes behind a round-robin balancer on one database
# (tests/lib/consentd.js TEST_DB/TEST_NODES): the files of scripts/pg-pass.list,
# which says what they cover and what is left out.  These run with prepared
# statements off (what PgBouncer < 1.21 in transaction mode needs);
# pg_nodes.test.js and pg_copy.test.js (in the integration step) hold the
# multi-node properties themselves and run them on (the default).
pg_tests() {
	local t; t=$(date +%s)
	CONSENTD_DATABASE_PREPARED_STATEMENTS=false TEST_DB=pg TEST_NODES=2 \
	    TEST_CONSENTD_BIN="$PWD/build/consentd-asan" node --test \
	    --test-concurrency=1 $(grep -v '^#' scripts/pg-pass.list) 2>&1 \
	    | tee /tmp/consentd-pg-$$.log
	local rc=${PIPESTATUS[0]}
	local p f
	p=$(sed -nE 's/^# pass ([0-9]+)/\1/p' /tmp/consentd-pg-$$.log | tail -n 1)
	f=$(sed -nE 's/^# fail ([0-9]+)/\1/p' /tmp/consentd-pg-$$.log | tail -n 1)
	rm -f /tmp/consentd-pg-$$.log
	echo "postgresql: ${p:-0} passed, ${f:-0} failed"
	echo "$(( $(date +%s) - t ))" > "$pg_log.secs"
	return "$rc"
}
# The PostgreSQL pass runs beside the integration, e2e, fuzz and deploy steps (the
# integration step mostly waits on its IdPs, receivers and timers, and so does the
# pass), and is reported once they are done.
pg_log=$(mktemp)
pg_t0=$(date +%s)
pg_tests > "$pg_log" 2>&1 &
pg_pid=$!
# Two integration files at a time: they mostly wait on their IdPs, receivers and timers
# (every file picks its own free ports and directories), so the step takes about half as
# long; the browser tests stay one at a time.
step "integration" node_tests tests/integration "${INTEGRATION_CONCURRENCY:-2}"
gate "sql on both engines" python3 scripts/pg-sql-check.py
# The fuzz targets (each a fixed FUZZ_SECONDS on one core) run beside the browser
# tests and the deploy step, and are reported after them: nearly two minutes less.
fuzz_log=$(mktemp)
fuzz_tests() {
	local t rc; t=$(date +%s)
	bash scripts/run-fuzz.sh "$FUZZ_SECONDS" \
	    $(ls tests/fuzz/fuzz_*.c 2>/dev/null | sed -E 's|tests/fuzz/(.*)\.c|\1|')
	rc=$?
	echo "$(( $(date +%s) - t ))" > "$fuzz_log.secs"
	return "$rc"
}
fuzz_tests > "$fuzz_log" 2>&1 &
fuzz_pid=$!
step "e2e (chromium)" node_tests tests/e2e
# make install, the systemd unit, the man pages and the Debian package: built, installed
# with dpkg -i, upgraded and purged on this machine (about 20 s; docs/deploy.md).
step "deploy (install, .deb)" bash scripts/test-deploy.sh
wait "$fuzz_pid"
fuzz_rc=$?
fuzz_secs=$(cat "$fuzz_log.secs" 2>/dev/null || echo "?")
echo "== fuzz (${FUZZ_SECONDS}s each), beside e2e and deploy: ${fuzz_secs}s"
cat "$fuzz_log"
tally "fuzz (${FUZZ_SECONDS}s each)" "$fuzz_log" "$fuzz_rc" "$fuzz_secs"
rm -f "$fuzz_log" "$fuzz_log.secs"
wait "$pg_pid"
pg_rc=$?
pg_secs=$(cat "$pg_log.secs" 2>/dev/null || echo "?")
echo "== integration (pg, 2 nodes), beside the steps above: ${pg_secs}s of its own, done $(( $(date +%s) - pg_t0 ))s after it began"
cat "$pg_log"
tally "integration (pg, 2 nodes)" "$pg_log" "$pg_rc" "$pg_secs"
rm -f "$pg_log" "$pg_log.secs"

echo
echo "== summary ($(( $(date +%s) - t0 ))s)"
printf '  %s\n' "${steps[@]}"
echo "check: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
