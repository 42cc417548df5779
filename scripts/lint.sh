#!/usr/bin/env bash
# lint.sh -- fails on the C functions STYLE.md bans, anywhere in our C sources.
set -u
cd "$(dirname "$0")/.."
banned='\b(strcpy|strcat|sprintf|vsprintf|strncpy|strtok|atoi|sscanf|gets)[[:space:]]*\('
hits=$(grep -nE "$banned" server/*.c include/*.h tests/unit/*.c tests/unit/*.h tests/fuzz/*.c bench/*.c 2>/dev/null \
	| grep -vE '^\S+:[0-9]+:\s*(/?\*|//)' || true)
if [ -n "$hits" ]; then
	echo "lint: banned functions (use buf.h / strtoll with bounds / str_fmt):"
	echo "$hits"
	echo "lint: FAIL"
	exit 1
fi
# Bounded strings (#13.7): text goes into a fixed array only through str_fmt
# (buf.h), which fails on truncation instead of cutting; snprintf and
# vsnprintf live in buf.c alone.  All of server/ and the fuzz drivers; unit
# tests are held to it where they were converted (the others build expected
# strings, where a cut would only fail the test).
snprintf_files="server/*.c tests/fuzz/*.c
	tests/unit/test_audit.c tests/unit/test_buf.c tests/unit/test_config.c tests/unit/test_dpop.c
	tests/unit/test_events.c tests/unit/test_form.c tests/unit/test_handlers.c tests/unit/test_jws.c tests/unit/test_jwt.c
	tests/unit/test_log.c tests/unit/test_oidc.c tests/unit/test_provider.c tests/unit/test_seal.c
	tests/unit/test_template.c tests/unit/test_ratelimit.c tests/unit/test_metrics.c tests/unit/test_store.c
	tests/unit/test_admin.c tests/unit/test_session.c"
# shellcheck disable=SC2086  # the list is globbed on purpose
hits=$(grep -nE '\bv?snprintf[[:space:]]*\(' $snprintf_files 2>/dev/null \
	| grep -v '^server/buf\.c:' | grep -vE '^\S+:[0-9]+:\s*(/?\*|//)' || true)
if [ -n "$hits" ]; then
	echo "lint: snprintf outside buf.c (use str_fmt, and check its result, or a struct buf):"
	echo "$hits"
	echo "lint: FAIL"
	exit 1
fi
# Route properties (kind, authentication, deferral) are declared in routes.c
# alone: elsewhere no request path is compared with a literal path, no route
# kind or auth class is named (router.c reads them), and no handler calls an
# authentication gate (the router runs the route's, from routes.c's http_gates).
comments='^\S+:[0-9]+:\s*(/?\*|//)'
route_hits=$( {
	grep -nHE '\b(strn?(case)?cmp|strstr)[[:space:]]*\([^;]*"/' $(ls server/*.c | grep -v '^server/routes\.c$')
	grep -nHE '\bROUTE_(PUBLIC|OAUTH|BROWSER|API|AUTH_[A-Z_]+|DEFERRED|GRANT)\b' \
	    $(ls server/*.c | grep -vE '^server/(routes|router|http)\.c$')
	grep -nHE '\bROUTE_(PUBLIC|OAUTH|BROWSER|API|AUTH_[A-Z_]+)\b' server/http.c
	grep -nHE '^[[:space:]]+.*\b(gateway_authenticate|admin_api_authenticate|admin_pages_gate|admin_enter|authenticate)[[:space:]]*\(' \
	    /dev/null $(ls server/*.c | grep -v '^server/routes\.c$')
} 2>/dev/null | grep -vE "$comments" || true)
if [ -n "$route_hits" ]; then
	echo "lint: a route property decided outside routes.c (declare it in the route table):"
	echo "$route_hits"
	echo "lint: FAIL"
	exit 1
fi
# Layers (STYLE.md "Layers", #13.10).  Handlers: X_pages.c, X_api.c, meta.c and
# pages.c (what the person's pages share).  The HTTP side: http.c, router.c,
# routes.c, page.c (what handlers render with), main.c, and the two request
# gates the router runs (client_auth.c, dpop.c).  Every other file is domain,
# store or command: it must not see http.h, not even through a header (the
# compiler's own dependency list says), and only the domain opens a
# transaction or writes an audit entry, never a handler.
handlers=$(ls server/*_pages.c server/*_api.c server/meta.c server/pages.c 2>/dev/null)
http_side="server/http.c server/router.c server/routes.c server/page.c server/main.c server/client_auth.c server/dpop.c"
pkg_cflags=$(pkg-config --cflags libmicrohttpd openssl cjose libcurl sqlite3 jansson inih 2>/dev/null)
layer_hits=""
for f in server/*.c; do
	case " $(echo $handlers) $http_side " in *" $f "*) continue ;; esac
	# shellcheck disable=SC2086  # the flags are words on purpose
	deps=$(cc -MM -std=c17 -D_GNU_SOURCE -Iinclude -Ibuild $pkg_cflags "$f" 2>&1) || {
		layer_hits="$layer_hits
$f: cc -MM failed: $deps"; continue; }
	if printf '%s' "$deps" | tr ' \\' '\n\n' | grep -qx 'include/http.h'; then
		layer_hits="$layer_hits
$f: a domain, store or command file sees http.h"
	fi
done
# shellcheck disable=SC2086
tx_hits=$(grep -nHE '\b(store_begin|store_commit|store_rollback|audit_append)[[:space:]]*\(' $handlers 2>/dev/null \
	| grep -vE "$comments" || true)
if [ -n "$layer_hits$tx_hits" ]; then
	echo "lint: the layers are crossed (handlers parse, call the domain and answer; the domain knows no HTTP):"
	[ -n "$layer_hits" ] && echo "$layer_hits" | sed '/^$/d'
	[ -n "$tx_hits" ] && echo "$tx_hits" | sed 's/$/   <- a handler opens a transaction or writes an audit entry/'
	echo "lint: FAIL"
	exit 1
fi
# cjose only under jwt/jws (#29 item 5): its headers and calls in jwt.c (our
# own keys and signatures) and jws.c alone; everything else verifies through
# jws.h and encodes through b64.h.
# shellcheck disable=SC2046
cjose_hits=$(grep -nHE '#[[:space:]]*include[[:space:]]*<cjose/|\bcjose_[a-z_0-9]+[[:space:]]*\(|\bcjose_[a-z_0-9]+_t\b|\bCJOSE_[A-Z_0-9]+' \
	$(ls server/*.c server/*.h include/*.h | grep -vxE 'server/(jwt|jws)\.c') 2>/dev/null \
	| grep -vE "$comments" || true)
if [ -n "$cjose_hits" ]; then
	echo "lint: cjose outside jwt.c and jws.c (verify through jws.h, encode through b64.h):"
	echo "$cjose_hits"
	echo "lint: FAIL"
	exit 1
fi
# One owner per concept (#29 item 5): base64url lives in b64.c (the only
# copy of its alphabet), wipe_free in buf.c, mono_now in mono.h.  A second
# definition of any of them, anywhere in server/ or include/, fails.
def_re='^[A-Za-z_][^;]*\b(b64u[a-z_]*|b64url[a-z_]*|base64url[a-z_]*|wipe_free|wipe_free_n|mono_now)[[:space:]]*\([^;]*$'
# shellcheck disable=SC2046  # the file lists are words on purpose
own_hits=$( {
	grep -nHE '0123456789-_"' $(ls server/*.c server/*.h include/*.h | grep -vx 'server/b64\.c')
	grep -nHE "$def_re" $(ls server/*.c server/*.h include/*.h |
	    grep -vxE 'server/b64\.c|include/b64\.h|server/buf\.c|include/buf\.h|include/mono\.h')
	grep -nHE "^[A-Za-z_][^;]*\b(wipe_free|wipe_free_n)[[:space:]]*\([^;]*\$" server/b64.c include/b64.h include/mono.h
	grep -nHE "^[A-Za-z_][^;]*\b(b64u[a-z_]*|b64url[a-z_]*|base64url[a-z_]*|mono_now)[[:space:]]*\([^;]*\$" server/buf.c include/buf.h
} 2>/dev/null | grep -vE "$comments" || true)
if [ -n "$own_hits" ]; then
	echo "lint: a second copy of a concept one file owns (base64url: b64.h; wipe_free: buf.h; mono_now: mono.h):"
	echo "$own_hits"
	echo "lint: FAIL"
	exit 1
fi
# No circles of files that include each other's names (#29 item 5;
# scripts/include-cycles.py says how a module and its names are found).  The
# circles not broken yet are named here and come off as they are broken.
cycles=$(python3 scripts/include-cycles.py --known app/client_auth/http/meta/page store/store_pg 2>&1)
if [ $? -ne 0 ]; then
	echo "lint: a circle of files that include each other's names (or a known one gone: update lint.sh):"
	echo "$cycles"
	echo "lint: FAIL"
	exit 1
fi
# docs/reference.md's table of server/ names every file there, and only those (#13: one
# line per file, saying what it owns).
table=$(sed -n '/^### `server\/`, file by file/,/^## /p' docs/reference.md)
readme_hits=""
for f in server/*.c server/*.h; do
	b=$(basename "$f")
	printf '%s' "$table" | grep -E '^\| ' | grep -q "\`$b\`" || readme_hits="$readme_hits $b"
done
for b in $(printf '%s' "$table" | grep -oE '^\| [^|]*' | grep -oE '`[a-z_]+\.[ch]`' | tr -d '`' | sort -u); do
	[ -e "server/$b" ] || readme_hits="$readme_hits (no such file: $b)"
done
if [ -n "$readme_hits" ]; then
	echo "lint: docs/reference.md's table of server/ is out of step with the files:$readme_hits"
	echo "lint: FAIL"
	exit 1
fi
echo "lint: ok (no banned functions in $(ls server/*.c | wc -l) server sources; no snprintf outside buf.c; route properties only in routes.c; handlers over a domain that sees no HTTP)"
