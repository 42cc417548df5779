#!/usr/bin/env bash
# lint.sh -- fails on what docs/style.md forbids: the banned functions ("Banned
# functions, and why"), snprintf outside buf.c, route properties decided outside
# routes.c, crossed layers, and citations of documents not in the repository.
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
	tests/unit/test_events.c tests/unit/test_form.c tests/unit/test_routes.c tests/unit/test_jws.c tests/unit/test_jwt.c
	tests/unit/test_log.c tests/unit/test_oidc.c tests/unit/test_provider.c tests/unit/test_seal.c
	tests/unit/test_template.c tests/unit/test_ratelimit.c tests/unit/test_metrics.c tests/unit/test_store.c
	tests/unit/test_admin.c tests/unit/test_session.c tests/unit/test_store_authz.c"
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
# kind or auth class is named (router.c reads them, and reply.c shapes an error
# by the kind the router hands it), and no handler calls an
# authentication gate (the router runs the route's, from routes.c's http_gates).
comments='^\S+:[0-9]+:\s*(/?\*|//)'
route_hits=$( {
	grep -nHE '\b(strn?(case)?cmp|strstr)[[:space:]]*\([^;]*"/' $(ls server/*.c | grep -v '^server/routes\.c$')
	grep -nHE '\bROUTE_(PUBLIC|OAUTH|BROWSER|API|AUTH_[A-Z_]+|DEFERRED|GRANT[A-Z_]*|PROBE_[A-Z]+)\b' \
	    $(ls server/*.c | grep -vE '^server/(routes|router|reply|http)\.c$')
	grep -nHE '\bROUTE_(PUBLIC|OAUTH|BROWSER|API|AUTH_[A-Z_]+)\b' server/http.c
	# mcp_token.c is the one exception: ROUTE_AUTH_TOKEN_CLIENT's gate lets an
	# MCP client's request through, and the client is authenticated with its
	# registration (a [client.NAME] or a fetched metadata document) there.
	grep -nHE '^[[:space:]]+.*\b(client_auth_api_gateway|grant_api_gate|admin_api_authenticate|admin_pages_gate|admin_enter|authenticate)[[:space:]]*\(' \
	    /dev/null $(ls server/*.c | grep -vE '^server/(routes|mcp_token)\.c$')
} 2>/dev/null | grep -vE "$comments" || true)
if [ -n "$route_hits" ]; then
	echo "lint: a route property decided outside routes.c (declare it in the route table):"
	echo "$route_hits"
	echo "lint: FAIL"
	exit 1
fi
# Layers (docs/style.md "Layout and layers", #13.10).  Handlers: X_pages.c, X_api.c, meta.c and
# pages.c (what the person's pages share); the gates the router runs are
# handlers too (client_auth_api.c, grant_api.c, dpop_api.c: they read the
# request, call client_auth.c, grant.c, dpop.c, and answer).  The HTTP side:
# http.c, router.c, routes.c, reply.c and page_reply.c (what handlers answer
# with), main.c.
# Every other file is domain,
# store or command: it must not see http.h, not even through a header (the
# compiler's own dependency list says), and only the domain opens a
# transaction or writes an audit entry, never a handler.
handlers=$(ls server/*_pages.c server/*_api.c server/meta.c server/pages.c 2>/dev/null)
http_side="server/http.c server/router.c server/routes.c server/reply.c server/page_reply.c server/main.c"
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
tx_hits=$(grep -nHE '\b(store_begin|store_commit|store_rollback|store_end|audit_append)[[:space:]]*\(' $handlers 2>/dev/null \
	| grep -vE "$comments" || true)
if [ -n "$layer_hits$tx_hits" ]; then
	echo "lint: the layers are crossed (handlers parse, call the domain and answer; the domain knows no HTTP):"
	[ -n "$layer_hits" ] && echo "$layer_hits" | sed '/^$/d'
	[ -n "$tx_hits" ] && echo "$tx_hits" | sed 's/$/   <- a handler opens a transaction or writes an audit entry/'
	echo "lint: FAIL"
	exit 1
fi
# Who may call a route is decided in the table (#29.1): no handler reads a
# session cookie or checks a form's CSRF token through the session helpers
# itself -- a route that needs a person declares the class whose gate does
# (routes.c: ROUTE_AUTH_SESSION, _SESSION_FORM, _SESSION_CALLBACK, _SESSION_OPTIONAL)
# and the handler finds the session in req->auth.
# shellcheck disable=SC2086
session_hits=$(grep -nHE '\b(login_require|page_form_session|session_from_cookie)[[:space:]]*\(' \
	/dev/null $handlers 2>/dev/null | grep -vE "$comments" || true)
if [ -n "$session_hits" ]; then
	echo "lint: a handler reads the session itself (declare the route's session class in routes.c and read req->auth.session):"
	echo "$session_hits"
	echo "lint: FAIL"
	exit 1
fi
# Typed parameters by index (#29.3): every file but the router reads a route's
# parameters as http_arg*(req, ENUM) -- the positions its header declares and
# routes.c fills -- never by name (there is no by-name accessor left).
by_index=$(ls server/*.c | grep -v '^server/router\.c$')
# shellcheck disable=SC2086
param_hits=$(grep -nHE '(form_get[[:space:]]*\([[:space:]]*&[[:space:]]*req->params|\bhttp_param(_int|_family)?[[:space:]]*\()' \
	/dev/null $by_index 2>/dev/null | grep -vE "$comments" || true)
if [ -n "$param_hits" ]; then
	echo "lint: a handler reads a parameter by name (declare its position in the handler's header and read it with http_arg*):"
	echo "$param_hits"
	echo "lint: FAIL"
	exit 1
fi
# The store's two engines behind one seam (#29): which engine a store runs on is known
# in the two engine files alone (store_sqlite.c, store_pg.c), and chosen once, at open,
# by the dispatcher (store.c), which with them is all that includes store_backend.h.
# The dispatcher asks no engine question either (below). Elsewhere: no engine check (->pg, ->lite, store_is_pg, pg_is_url, store_engine_name,
# a backend or dialect named), no SQLite or libpq call, no sqlite3.h or libpq-fe.h.
engine_files='server/store.c server/store_sqlite.c server/store_pg.c server/store_backend.h'
engine_hits=$(for f in server/*.c server/*.h include/*.h; do
	case " $engine_files " in *" $f "*) continue ;; esac
	grep -nHE '(->|\.)(pg|lite)\b|\bstore_is_pg|\bpg_is_url\b|\bstore_engine_name\b|\bstore_backend(_sqlite|_pg)?\b|\bSTORE_DIALECT_|\bsqlite3_[a-z0-9_]+[[:space:]]*\(|\bPQ[a-zA-Z]+[[:space:]]*\(|#[[:space:]]*include[[:space:]]*[<"](sqlite3|libpq-fe|store_backend)\.h[>"]' "$f"
done 2>/dev/null | grep -vE "$comments" | grep -v '^include/store\.h:.*store_engine_name(const struct store' || true)
# The dispatcher itself branches on no engine either: it calls through the table.
engine_hits="$engine_hits$(grep -nHE '(->|\.)(pg|lite)\b|\bsqlite3_[a-z0-9_]+[[:space:]]*\(|\bPQ[a-zA-Z]+[[:space:]]*\(|#[[:space:]]*include[[:space:]]*<(sqlite3|libpq-fe)\.h>|strn?cmp[[:space:]]*\([^;]*->name\b' server/store.c 2>/dev/null | grep -vE "$comments" || true)"
if [ -n "$engine_hits" ]; then
	echo "lint: an engine question outside the store's two engine files (store_sqlite.c, store_pg.c; the dispatcher store.c only picks one at open, by its table): add an operation to store_backend.h instead:"
	echo "$engine_hits"
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
# one left is the store's seam by design: the dispatcher (store.c) calls the
# engines' tables (store_backend.h), whose operations take the store's public
# types (curl's vtls.c and vtls_int.h have the same shape).
cycles=$(python3 scripts/include-cycles.py --known store/store_backend 2>&1)
if [ $? -ne 0 ]; then
	echo "lint: a circle of files that include each other's names (or a known one gone: update lint.sh):"
	echo "$cycles"
	echo "lint: FAIL"
	exit 1
fi
# Who acts (#30): one resolver, agent.c, answers for an agent id (agent_resolve) and
# holds the one RESOURCE:SCOPE rule (agent_may_ask); nothing else looks an [agent.X]
# up with config_agent() (config_base.c defines it).
# shellcheck disable=SC2086
agent_hits=$(grep -nHE '\bconfig_agent[[:space:]]*\(' /dev/null $(ls server/*.c | grep -vE '^server/(agent|config_base)\.c$') \
	2>/dev/null | grep -vE "$comments" || true)
if [ -n "$agent_hits" ]; then
	echo "lint: config_agent() called outside agent.c (resolve the agent with agent_resolve, agent.h):"
	echo "$agent_hits"
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
# Citations (#29.7): every document named in our sources, scripts, tests and docs is a
# file of this repository.  A name with a slash is read from the repository's root; a bare
# name from the root, docs/ or the citing file's directory (a Markdown link).  URLs are
# not citations of ours.  docs/notes/ is left out: its notes review texts outside the
# repository and cite them by their own paths.
# A file that exists under the repository's root (no ../ out of it).
in_repo() { [ -f "$1" ] && case "$(realpath -m "$1")" in "$PWD"/*) true ;; *) false ;; esac; }
cite_hits=$(grep -rnoE --exclude-dir=node_modules --exclude-dir=notes \
	'[A-Za-z0-9_./~:%-]*[A-Za-z0-9_-]\.md\b' \
	server include scripts tests/unit tests/integration Makefile docs 2>/dev/null |
	while IFS=: read -r file line name; do
		case "$name" in *://*) continue ;; esac
		dir=$(dirname "$file")
		case "$name" in
		/* | '~'*) ;;                       # outside the repository, whatever is there
		*/*) for c in "$name" "$dir/$name"; do
			in_repo "$c" && { echo ok; break; }; done | grep -q ok && continue ;;
		*) for c in "$name" "docs/$name" "$dir/$name"; do
			in_repo "$c" && { echo ok; break; }; done | grep -q ok && continue ;;
		esac
		echo "$file:$line: $name"
	done)
if [ -n "$cite_hits" ]; then
	echo "lint: a citation of a document that is not in the repository (name a file that exists):"
	echo "$cite_hits"
	echo "lint: FAIL"
	exit 1
fi
echo "lint: ok (no banned functions in $(ls server/*.c | wc -l) server sources; no snprintf outside buf.c; route properties only in routes.c; handlers over a domain that sees no HTTP; no handler reads a session itself; parameters read by index; the store's engine known only in store_sqlite.c and store_pg.c; agents looked up only in agent.c; every document cited exists)"
