#!/usr/bin/env bash
# run-store-pg.sh [DIR] -- the store's unit tests on PostgreSQL: starts a
# throw-away PostgreSQL 15 as tests/lib/pg.js does (a fresh cluster in a
# temporary directory, reachable only through a Unix socket there, no TCP;
# PostgreSQL refuses root, so as root initdb and the server run as user
# postgres), runs the store's suites, DIR/test_store, DIR/test_store_authz,
# DIR/test_store_mcp, DIR/test_store_standing, DIR/test_store_approval and
# DIR/test_store_audit_feed
# (default DIR build/asan/tests), through scripts/run-unit.sh with
# CONSENTD_TEST_DATABASE_URL naming its database (each picks the engine from
# it), and stops the server by its pid and
# removes the directory at the end, whatever happened.
# TEST_PG_BIN overrides the server's binaries (default /usr/lib/postgresql/15/bin).
set -u
cd "$(dirname "$0")/.." || exit 1
dir_tests=${1:-build/asan/tests}
pg_bin=${TEST_PG_BIN:-/usr/lib/postgresql/15/bin}
suites="test_store test_store_authz test_store_mcp test_store_standing test_store_approval test_store_audit_feed"
for t in $suites; do
	[ -x "$dir_tests/$t" ] || { echo "run-store-pg: no $dir_tests/$t (make $dir_tests/$t)"; exit 1; }
done
[ -x "$pg_bin/initdb" ] || { echo "run-store-pg: no PostgreSQL server binaries in $pg_bin (TEST_PG_BIN)"; exit 1; }

tmp=$(mktemp -d /tmp/consentd-storepg-XXXXXX)
pid=""
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
stop() {
	if [ -n "$pid" ]; then
		as_pg "$pg_bin/pg_ctl" -D "$tmp/data" stop -m fast -w -t 30 >/dev/null 2>&1
		if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null; fi
		for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
	fi
	rm -rf "$tmp"
}
trap stop EXIT
trap 'exit 130' INT TERM HUP

chmod 755 "$tmp"
[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$tmp"
as_pg "$pg_bin/initdb" -D "$tmp/data" -U postgres --auth=trust -E UTF8 --locale=C >"$tmp/initdb.log" 2>&1 \
	|| { cat "$tmp/initdb.log"; echo "run-store-pg: initdb failed"; exit 1; }
as_pg "$pg_bin/pg_ctl" -D "$tmp/data" -o "-c listen_addresses='' -c unix_socket_directories=$tmp -c fsync=on" \
	-l "$tmp/log" start -w -t 60 >/dev/null \
	|| { cat "$tmp/log"; echo "run-store-pg: the server did not start"; exit 1; }
pid=$(head -n 1 "$tmp/data/postmaster.pid")
"$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -d "postgresql:///postgres?host=$tmp&user=postgres" -c 'CREATE DATABASE consentd' \
	|| { echo "run-store-pg: CREATE DATABASE failed"; exit 1; }

CONSENTD_TEST_DATABASE_URL="postgresql:///consentd?host=$tmp&user=postgres" \
	bash scripts/run-unit.sh "$dir_tests" $suites
