#!/usr/bin/env bash
# pg-coverage.sh -- `make pg-coverage`: the functions of the store that no flow
# of make check's PostgreSQL pass runs.  Runs the files of scripts/pg-pass.list
# against build/consentd-cov (gcov, -O0) on two nodes on PostgreSQL, as
# scripts/check.sh does with the ASan build, then asks gcov which functions of
# server/store_*.c (the statements of each domain) and of server/store_pg.c
# (the backend) never ran.  server/store.c (the dispatcher) and
# server/store_sqlite.c (the SQLite engine, which the pass does not use) are
# left out.
set -u
cd "$(dirname "$0")/.."
export PATH="$PWD/tests/node_modules/.bin:$PATH"
find build/cov -name '*.gcda' -delete
log=build/cov/pass.log
# shellcheck disable=SC2046
CONSENTD_DATABASE_PREPARED_STATEMENTS=false TEST_DB=pg TEST_NODES=2 \
    TEST_CONSENTD_BIN="$PWD/build/consentd-cov" node --test --test-concurrency=1 \
    $(grep -v '^#' scripts/pg-pass.list) > "$log" 2>&1
rc=$?
grep -E '^# (pass|fail) ' "$log"
echo "store functions no flow of the pass ran (the pass's output: $log):"
none=1
for src in server/store_*.c; do
	[ "$src" = server/store_sqlite.c ] && continue
	out=$(gcov -n -f -o build/cov/server "$src" 2>/dev/null | awk -v f="$(basename "$src")" '
		/^Function / { fn = $2; gsub(/\047/, "", fn) }
		/^Lines executed:0.00% / { if (fn != "") print "  " f ": " fn }
		/^Lines executed:/ { fn = "" }')
	if [ -n "$out" ]; then printf '%s\n' "$out"; none=0; fi
done
[ "$none" -eq 1 ] && echo "  (none)"
exit "$rc"
