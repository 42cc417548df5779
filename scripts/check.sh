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

# A step run in the background: its output goes to a log, reported by bg_done
# in the order the summary lists it (bg NAME COMMAND...; bg_done NAME).
declare -A bg_pid bg_log bg_t
bg() {
	local name=$1; shift
	bg_log[$name]=$(mktemp)
	bg_t[$name]=$(date +%s)
	( "$@"; echo "$?" > "${bg_log[$name]}.rc"; date +%s > "${bg_log[$name]}.end" ) \
	    > "${bg_log[$name]}" 2>&1 &
	bg_pid[$name]=$!
}
bg_done() {
	local name=$1 rc secs
	wait "${bg_pid[$name]}"
	rc=$(cat "${bg_log[$name]}.rc" 2>/dev/null || echo 1)
	secs=$(( $(cat "${bg_log[$name]}.end" 2>/dev/null || date +%s) - bg_t[$name] ))
	echo "== $name (beside the steps above): ${secs}s, done $(( $(date +%s) - bg_t[$name] ))s after it began"
	cat "${bg_log[$name]}"
	tally "$name" "${bg_log[$name]}" "$rc" "$secs"
	rm -f "${bg_log[$name]}" "${bg_log[$name]}.rc" "${bg_log[$name]}.end"
}

gate "build (-Werror)" make -s -j"$(nproc)" build-tests
gate "lint" bash scripts/lint.sh
node_tests() {   # node_tests DIR [FILES AT ONCE]
	local dir=$1 conc=${2:-1} log; log=$(mktemp)
	if ! ls "$dir"/*.test.js >/dev/null 2>&1; then echo "no tests in $dir"; echo "0 passed, 0 failed"; return 0; fi
	TEST_CONSENTD_BIN="$PWD/build/consentd-asan" node --test --test-concurrency="$conc" "$dir"/ 2>&1 | tee "$log"
	local rc=${PIPESTATUS[0]}
	local p f
	p=$(sed -nE 's/^# pass ([0-9]+)/\1/p' "$log" | tail -n 1)
	f=$(sed -nE 's/^# fail ([0-9]+)/\1/p' "$log" | tail -n 1)
	rm -f "$log"
	echo "$(basename "$dir"): ${p:-0} passed, ${f:-0} failed"
	return "$rc"
}
# The PostgreSQL backend, two nodes behind a round-robin balancer on one database
# (tests/lib/consentd.js TEST_DB/TEST_NODES): the files of scripts/pg-pass.list,
# which says what they cover and what is left out.  These run with prepared
# statements off (what PgBouncer < 1.21 in transaction mode needs);
# pg_nodes.test.js and pg_copy.test.js (in the integration step) hold the
# multi-node properties themselves and run them on (the default).  One file at
# a time (PG_CONCURRENCY): two at once beside the integration step made a
# "receiver down" test's freed port another file's, and a browser test's
# short-lived provider token reach its refresh margin under load.
pg_tests() {
	local log; log=$(mktemp)
	CONSENTD_DATABASE_PREPARED_STATEMENTS=false TEST_DB=pg TEST_NODES=2 \
	    TEST_CONSENTD_BIN="$PWD/build/consentd-asan" node --test \
	    --test-concurrency="${PG_CONCURRENCY:-1}" $(grep -v '^#' scripts/pg-pass.list) 2>&1 \
	    | tee "$log"
	local rc=${PIPESTATUS[0]}
	local p f
	p=$(sed -nE 's/^# pass ([0-9]+)/\1/p' "$log" | tail -n 1)
	f=$(sed -nE 's/^# fail ([0-9]+)/\1/p' "$log" | tail -n 1)
	rm -f "$log"
	echo "postgresql: ${p:-0} passed, ${f:-0} failed"
	return "$rc"
}
fuzz_tests() {
	make -s -j1 $(ls tests/fuzz/fuzz_*.c 2>/dev/null | sed -E 's|tests/fuzz/(.*)\.c|build/fuzz/\1|') &&
	bash scripts/run-fuzz.sh "$FUZZ_SECONDS" \
	    $(ls tests/fuzz/fuzz_*.c 2>/dev/null | sed -E 's|tests/fuzz/(.*)\.c|\1|')
}
# Side by side (#29 item 9): the integration and PostgreSQL files mostly wait on
# their IdPs, receivers and timers (every file picks its own free ports and
# directories), so they run two at a time each, beside the CPU-bound unit
# suites and the fuzz targets' build and run; the browser tests follow.
# No test asserts timing, so a loaded machine changes how long, not what.
bg "integration (pg, 2 nodes)" pg_tests
bg "unit" make -s unit
bg "unit (asan+ubsan)" make -s unit-asan
# The store's unit suite again on PostgreSQL (a throw-away server, as tests/lib/pg.js starts it).
bg "unit (store on postgresql)" bash scripts/run-store-pg.sh build/asan/tests
bg "fuzz (${FUZZ_SECONDS}s each, with its build)" fuzz_tests
step "integration" node_tests tests/integration "${INTEGRATION_CONCURRENCY:-2}"
bg_done "unit"
bg_done "unit (asan+ubsan)"
bg_done "unit (store on postgresql)"
gate "sql on both engines" python3 scripts/pg-sql-check.py
step "e2e (chromium)" node_tests tests/e2e
# make install, the systemd unit, the man pages and the Debian package: built, installed
# with dpkg -i, upgraded and purged on this machine (about 20 s; docs/deploy.md).
step "deploy (install, .deb)" bash scripts/test-deploy.sh
bg_done "fuzz (${FUZZ_SECONDS}s each, with its build)"
bg_done "integration (pg, 2 nodes)"
echo
echo "== summary ($(( $(date +%s) - t0 ))s)"
printf '  %s\n' "${steps[@]}"
echo "check: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
