#!/usr/bin/env bash
# check.sh -- everything `make check` runs, in order, ending with one summary
# line "check: N passed, N failed" (tests and gates counted together).
set -u
cd "$(dirname "$0")/.."
export PATH="$PWD/tests/node_modules/.bin:$PATH"
# 2 s a target, after its seed corpus: a smoke run of each of the 28 targets.  At 5 s the
# runs alone were 176 s of CPU (1.26 s of CPU a second under ASan), a tenth of the whole
# check on a machine it keeps saturated; `make fuzz` runs 60 s each, `make fuzz-long` 600 s.
FUZZ_SECONDS=${FUZZ_SECONDS:-2}
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

# node_files NAME CONCURRENCY FILE...: each test file in its own `node --test`,
# CONCURRENCY at a time, started in the order given (node --test itself starts
# the files it is given in name order: here the slow ones go first, so that no
# lane runs alone long after the others).  Each file's output is printed whole
# when it ends; then "NAME: N passed, N failed", summed over the files (a file
# that ended badly without a summary counts as one failure), also left in
# nf_pass and nf_fail.
node_files() {
	local name=$1 conc=$2; shift 2
	local dir i=0 file fp ff rc=0 r
	nf_pass=0; nf_fail=0
	if [ "$#" -eq 0 ]; then echo "$name: 0 passed, 0 failed"; return 0; fi
	dir=$(mktemp -d)
	for file in "$@"; do i=$((i + 1)); printf '%s %s\n' "$i" "$file"; done > "$dir/list"
	TEST_CONSENTD_BIN="$PWD/build/consentd-asan" xargs -P "$conc" -L 1 -a "$dir/list" bash -c \
	    'node --test "$2" > "$0/$1.log" 2>&1; echo "$?" > "$0/$1.rc"; flock "$0/lock" cat "$0/$1.log"' "$dir" &
	local xp=$!
	# NF_PIDFILE: where xargs's pid is kept while it runs (add_lane sends it SIGUSR1).
	[ -n "${NF_PIDFILE:-}" ] && echo "$xp" > "$NF_PIDFILE"
	wait "$xp"
	[ -n "${NF_PIDFILE:-}" ] && rm -f "$NF_PIDFILE"
	for ((i = 1; i <= $#; i++)); do
		fp=$(sed -nE 's/^# pass ([0-9]+)/\1/p' "$dir/$i.log" 2>/dev/null | tail -n 1)
		ff=$(sed -nE 's/^# fail ([0-9]+)/\1/p' "$dir/$i.log" 2>/dev/null | tail -n 1)
		r=$(cat "$dir/$i.rc" 2>/dev/null || echo 1)
		if [ "$r" -ne 0 ]; then rc=1; [ "${ff:-0}" -eq 0 ] && ff=1; fi
		nf_pass=$((nf_pass + ${fp:-0})); nf_fail=$((nf_fail + ${ff:-0}))
	done
	rm -rf "$dir"
	echo "$name: $nf_pass passed, $nf_fail failed"
	return "$rc"
}
# slow_first "NAME..." FILE...: the FILEs whose names (less .test.js) are among
# NAMEs first, in that order (the slowest first, each measured alone), then the
# others in the order given.
slow_first() {
	local names=" $1 " n f b; shift
	for n in $names; do for f in "$@"; do b=${f##*/}; [ "${b%.test.js}" = "$n" ] && echo "$f"; done; done
	for f in "$@"; do b=${f##*/}; case "$names" in *" ${b%.test.js} "*) ;; *) echo "$f" ;; esac; done
}
# The PostgreSQL backend, two nodes behind a round-robin balancer on one database
# (tests/lib/consentd.js TEST_DB/TEST_NODES): the files of scripts/pg-pass.list,
# which says what they cover and what is left out.  These run with prepared
# statements off (what PgBouncer < 1.21 in transaction mode needs);
# pg_nodes.test.js and pg_copy.test.js (in the integration step) hold the
# multi-node properties themselves and run them on (the default).  The HTTP
# files one at a time until the rest is done (PG_CONCURRENCY=2 shortens the pass,
# the longest step at ~1,050 s, but on a fresh Debian 12 two at a time failed
# retention twice: before deb8456, and at c6fb0c0 with 'fetch failed' from its
# IdP), the slowest first; then the browser files one at a time
# (a browser test's 5 s provider token must not reach its 2 s refresh margin under
# load).
pg_env() { export CONSENTD_DATABASE_PREPARED_STATEMENTS=false TEST_DB=pg TEST_NODES=2; }
# The two files that wait out a server's minute (key_reload: the nodes' 60 s key reload;
# dpop: the client key set's once-a-minute refetch): a step of their own beside the pass,
# since they sleep through it and add no load; one file at a time in the pass they were
# 146 of its 528 s (docs/BENCHMARKS.md, "make check").
PG_MINUTE="tests/pg/key_reload.test.js tests/integration/dpop.test.js"
pg_minute_tests() {
	pg_env
	node_files "postgresql (minute waits)" 1 $PG_MINUTE
}
pg_tests() {
	local rc=0 p f
	pg_env
	NF_PIDFILE=$pg_lanes node_files "postgresql (http)" "${PG_CONCURRENCY:-1}" $(slow_first \
	    "vault_attacks consent_attacks approval_attacks admin_pages admin_bulk" \
	    $(grep -v '^#' scripts/pg-pass.list | grep -v '^tests/e2e/' | grep -vxF "${PG_MINUTE// /$'\n'}")) || rc=1
	p=$nf_pass; f=$nf_fail
	node_files "postgresql (browser)" 1 $(grep -v '^#' scripts/pg-pass.list | grep '^tests/e2e/') || rc=1
	echo "postgresql: $((p + nf_pass)) passed, $((f + nf_fail)) failed"
	return "$rc"
}
fuzz_tests() {
	make -s -j1 $(ls tests/fuzz/fuzz_*.c 2>/dev/null | sed -E 's|tests/fuzz/(.*)\.c|build/fuzz/\1|') &&
	bash scripts/run-fuzz.sh "$FUZZ_SECONDS" \
	    $(ls tests/fuzz/fuzz_*.c 2>/dev/null | sed -E 's|tests/fuzz/(.*)\.c|\1|')
}
# Side by side (#29 item 9): the integration and PostgreSQL files mostly wait on
# their IdPs, receivers and timers (every file picks its own free ports and
# directories), so they run beside each other and beside the CPU-bound unit
# suites, the fuzz targets' build and run and the deploy step; the browser tests
# follow the integration step.  No test asserts timing, so a loaded machine
# changes how long, not what.  The integration and PostgreSQL files need only
# the two servers: they start as soon as those are built, beside the unit
# tests' build and the lint.
integration_tests() {
	# Three files at a time (INTEGRATION_CONCURRENCY), the slowest first: they wait out
	# provider token lifetimes, a JWKS refetch minute, retry schedules.
	node_files integration "${INTEGRATION_CONCURRENCY:-3}" $(slow_first \
	    "presets subject_cache dpop consent_attacks config_check pg_nodes proxy approval_attacks \
	    audit crash backup admin_bulk vault_attacks admin_pages errors devrun events hostile health" \
	    tests/integration/*.test.js)
}
# The browser files one at a time.
e2e_tests() {
	node_files e2e 1 $(slow_first "admin a11y vault me person_pages approval" tests/e2e/*.test.js)
}
pg_lanes=$(mktemp -u)   # the PostgreSQL pass's xargs pid while its HTTP files run
build_all() {
	local rc=0
	make -s -j"$(nproc)" build/consentd build/consentd-asan || rc=1
	bg "integration (pg, 2 nodes)" pg_tests
	bg "integration (pg, minute waits)" pg_minute_tests
	bg "integration" integration_tests
	make -s -j"$(nproc)" build-tests || rc=1
	return "$rc"
}
gate "build (-Werror)" build_all
gate "lint" bash scripts/lint.sh
bg "unit" make -s unit
bg "unit (asan+ubsan)" make -s unit-asan
# The store's unit suite again on PostgreSQL (a throw-away server, as tests/lib/pg.js starts it).
bg "unit (store on postgresql)" bash scripts/run-store-pg.sh build/asan/tests
bg "fuzz (${FUZZ_SECONDS}s each, with its build)" fuzz_tests
# make install, the systemd unit, the man pages and the Debian package: built, installed
# with dpkg -i, upgraded and purged on this machine (about 20 s; docs/deploy.md).
bg "deploy (install, .deb)" bash scripts/test-deploy.sh
bg_done "integration"
gate "sql on both engines" python3 scripts/pg-sql-check.py
# The browser files as soon as the integration files are done (not after the unit
# suites): beside them, the extra load failed timing-bound tests on a fresh Debian 12
# (proxy's flood at 40c8cc1; deadlines of CIMD and AuthZEN fetches before, since
# mended).  Run in the background, and reported in the summary's order.
bg "e2e (chromium)" e2e_tests
bg_done "e2e (chromium)"
bg_done "unit"
bg_done "unit (asan+ubsan)"
bg_done "unit (store on postgresql)"
bg_done "deploy (install, .deb)"
bg_done "fuzz (${FUZZ_SECONDS}s each, with its build)"
# Every other step is done: the PostgreSQL pass's HTTP files, if any are left, go on
# two at a time -- GNU xargs runs one more command at once for each SIGUSR1.  Its
# slowest, timing-bound files (vault_attacks) went first; the browser files stay one
# at a time.
add_lane() {
	local p
	p=$(cat "$pg_lanes" 2>/dev/null) || return 0
	[ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = xargs ] && kill -USR1 "$p" 2>/dev/null
	return 0
}
add_lane
bg_done "integration (pg, 2 nodes)"
bg_done "integration (pg, minute waits)"
rm -f "$pg_lanes"
echo
echo "== summary ($(( $(date +%s) - t0 ))s)"
printf '  %s\n' "${steps[@]}"
echo "check: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
