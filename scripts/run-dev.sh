#!/usr/bin/env bash
# run-dev.sh -- what `make run` does after installing and building: starts, on 127.0.0.1 only,
#   - the development IdP people sign in with          (IDP_PORT, default 9090),
#   - a second one playing a downstream provider       (PROVIDER_PORT, 9091), "GitHub (development)",
#   - a small upstream API behind that provider         (API_PORT, 9092, tests/idp/devapi.js),
#   - a development MCP server behind that provider     (MCP_PORT, 9093, tests/idp/devmcp.js):
#     an issue tracker's tools, served through consentd's MCP gateway at /mcp/tracker,
#   - an https host of the MCP SDK example client's     (CIMD_PORT, 9094, tests/idp/devcimd.js),
#     client-id document (its development CA in DEV_DIR/cimd/),
#   - consentd                                          (PORT, 8080),
# with a development config, master key and database in DEV_DIR (default .dev/), and prints
# the URLs. The binary is CONSENTD_BIN (default build/consentd); NODE the node to use. Relative
# paths are relative to the repository.
#
# .dev/consentd.conf is written once. It starts with a `; run-dev.sh sha256: ...` line over
# the rest of the file: while the file is exactly as this script generated it, each start
# rewrites it (new ports, a newer version of this script); once you edit it, it is yours and
# is kept ("using your .dev/consentd.conf"): delete it to get a fresh one. A file from the
# older run-dev.sh (no checksum line, rewritten at every start) counts as generated when it
# is still exactly what that version wrote for these ports. The IdPs' files (idp.json,
# provider.json) are rewritten at every start.
#
# Ctrl-C (SIGINT) or SIGTERM stops every process started here, by pid, and exits 0.
#
#   scripts/run-dev.sh [--prepare]   --prepare: write DEV_DIR's files as above and exit without
#                                    starting anything (e.g. to edit the config before a start)
set -euo pipefail
PREPARE=0
case ${1:-} in
	--prepare) PREPARE=1 ;;
	'') ;;
	*) echo "usage: scripts/run-dev.sh [--prepare]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
ROOT=$PWD
PORT=${PORT:-8080}
IDP_PORT=${IDP_PORT:-9090}
PROVIDER_PORT=${PROVIDER_PORT:-9091}
API_PORT=${API_PORT:-9092}
MCP_PORT=${MCP_PORT:-9093}
CIMD_PORT=${CIMD_PORT:-9094}
NODE=${NODE:-node}
BIN=${CONSENTD_BIN:-./build/consentd}
DEV=${DEV_DIR:-.dev}
for v in PORT IDP_PORT PROVIDER_PORT API_PORT MCP_PORT CIMD_PORT; do
	[[ ${!v} =~ ^[1-9][0-9]{0,4}$ ]] || { echo "run: $v must be a port number, not '${!v}'" >&2; exit 2; }
done
[ "$PREPARE" = 1 ] || [ -x "$BIN" ] || { echo "run: $BIN is missing: build it first (make run does)" >&2; exit 2; }
mkdir -p "$DEV"
chmod 700 "$DEV"
DEV=$(cd "$DEV" && pwd)
SHOW=${DEV#"$ROOT"/}   # the dev directory as printed: relative when inside the repository
CONF=$DEV/consentd.conf
LOGIN_IDP=http://127.0.0.1:$IDP_PORT
PROVIDER=http://127.0.0.1:$PROVIDER_PORT
API=http://127.0.0.1:$API_PORT
MCP_UPSTREAM=http://127.0.0.1:$MCP_PORT/mcp
CIMD=https://127.0.0.1:$CIMD_PORT
URL=http://127.0.0.1:$PORT

if [ ! -s "$DEV/master.key" ]; then
	( umask 077; head -c 32 /dev/urandom > "$DEV/master.key" )
	echo "run: created a development master key in $SHOW/master.key"
fi
chmod 600 "$DEV/master.key"

# The login IdP: consentd signs people in there; gateway-app is the gateway's own client.
cat > "$DEV/idp.json" <<JSON
{
  "clients": [
    { "client_id": "consentd", "client_secret": "consentd-dev-secret",
      "redirect_uris": ["$URL/callback"],
      "post_logout_redirect_uris": ["$URL/"],
      "grant_types": ["authorization_code"], "response_types": ["code"],
      "token_endpoint_auth_method": "client_secret_basic",
      "id_token_signed_response_alg": "ES256", "require_auth_time": true },
    { "client_id": "gateway-app", "client_secret": "gateway-app-dev-secret",
      "redirect_uris": ["http://127.0.0.1:43999/gateway-callback"],
      "grant_types": ["authorization_code"], "response_types": ["code"],
      "token_endpoint_auth_method": "client_secret_basic",
      "id_token_signed_response_alg": "RS256" }
  ]
}
JSON

# The downstream provider (flow D): the same users; consentd is its client three times (one
# redirect URI per resource: github, ghproxy, tracker); resource-server introspects for the
# API and the MCP server. Its access tokens are
# opaque, for the API ($API), 10 minutes; refresh tokens rotate; a new provider grant per
# authorization, so two consents never share tokens. Own cookie names: a browser keeps
# 127.0.0.1's cookies for every port together.
cat > "$DEV/provider.json" <<JSON
{
  "title": "GitHub (development)",
  "cookiePrefix": "_provider",
  "reuseGrant": false,
  "clients": [
    { "client_id": "consentd-github", "client_secret": "consentd-github-dev-secret",
      "redirect_uris": ["$URL/oauth/callback/github"],
      "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
      "token_endpoint_auth_method": "client_secret_basic" },
    { "client_id": "consentd-ghproxy", "client_secret": "consentd-ghproxy-dev-secret",
      "redirect_uris": ["$URL/oauth/callback/ghproxy"],
      "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
      "token_endpoint_auth_method": "client_secret_basic" },
    { "client_id": "consentd-tracker", "client_secret": "consentd-tracker-dev-secret",
      "redirect_uris": ["$URL/oauth/callback/tracker"],
      "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
      "token_endpoint_auth_method": "client_secret_basic" },
    { "client_id": "resource-server", "client_secret": "resource-server-dev-secret",
      "grant_types": [], "response_types": [], "redirect_uris": [],
      "token_endpoint_auth_method": "client_secret_basic" }
  ],
  "downstream": { "resource": "$API", "scopes": ["repo", "issues:read", "issues:write"],
                  "accessTokenTTL": 600 }
}
JSON

# The configuration as this version generates it (without its checksum line).
generated_conf() {
	cat <<INI
; generated by \`make run\` (scripts/run-dev.sh) for development on 127.0.0.1 -- do not deploy.
; Yours to edit: once changed, run-dev.sh keeps this file (delete it to regenerate).
[server]
listen = 127.0.0.1:$PORT
public_url = $URL
threads = 0
log = stderr
; a development setup (placeholders and 127.0.0.1 allowed); approval is shown only where
; consentd enforces it: on [resource.ghproxy] and [resource.tracker], whose tokens stay here
development = true

[database]
path = $DEV/consentd.db

[keys]
master_key_file = $DEV/master.key

[oidc]
issuer = $LOGIN_IDP
client_id = consentd
client_secret = consentd-dev-secret
; groups: the IdP's admin user is in consent-admins, which opens /admin
scopes = openid profile email groups

[gateway]
id = agent-gateway
client_secret = gateway-dev-secret
subject_audiences = gateway-app

[consent]
interval = 2

;; MCP clients sign in here (docs/mcp.md): the notes behind an MCP endpoint, and a
;; native client registered for any loopback port; client-id URLs are accepted too
[mcp.notes]
resource = notes

;; consentd in front of an MCP server (docs/mcp.md, "Deployment"): the development MCP
;; server's issue tracker at $URL/mcp/tracker. Its tools map to
;; [action.tracker.TOOL] below; it receives the provider's token from the vault, never the
;; MCP client's
[mcp.tracker]
resource = tracker
upstream = $MCP_UPSTREAM

[client.local-mcp]
name = A local MCP client (development)
redirect_uris = http://127.0.0.1/callback http://localhost/callback

;; client-id URLs from this machine: the MCP SDK example client's document, served over
;; https by tests/idp/devcimd.js with a development CA trusted for these fetches only
[mcp]
cimd_allow_loopback = true
cimd_ca_file = $DEV/cimd/ca.pem

[agent.coder]
name = Coding assistant
description = Reads and writes your notes, reads and opens issues
allow = notes:read notes:write github:issues:read github:issues:write ghproxy:issues:read ghproxy:issues:write
offline = true

; a resource without a provider: consent and grants only
[resource.notes]
name = Team notes
max_consent = 2592000

[scope.notes.read]
description = Read your notes

[scope.notes.write]
description = Create and edit notes

; a resource at a downstream provider: its tokens wait in the vault and are released
; to the gateway per action
[resource.github]
name = GitHub (development)
max_consent = 2592000
provider_issuer = $PROVIDER
provider_client_id = consentd-github
provider_client_secret = consentd-github-dev-secret
token_release = gateway

[scope.github.issues:read]
description = Read issues
provider = repo issues:read

[scope.github.issues:write]
description = Open and edit issues
provider = repo issues:write

[action.github.list_issues]
description = List issues
scope = issues:read
approval = none

; no approval here: the token goes to the gateway, which could reuse it for any call
; (consentd -n refuses approval = required on such a resource unless approval_enforced_by
; = gateway says the gateway holds each token to its call); see ghproxy below for approval
[action.github.create_issue]
description = Open an issue
scope = issues:write
approval = none

; the same provider in proxy mode: the gateway never holds its token; consentd calls the
; API at base_url on the routes below and enforces each approval on the request itself
[resource.ghproxy]
name = GitHub (development, via consentd's proxy)
max_consent = 2592000
provider_issuer = $PROVIDER
provider_client_id = consentd-ghproxy
provider_client_secret = consentd-ghproxy-dev-secret
token_release = never
base_url = $API

[scope.ghproxy.issues:read]
description = Read issues
provider = repo issues:read

[scope.ghproxy.issues:write]
description = Open and edit issues
provider = repo issues:write

[action.ghproxy.list_issues]
description = List issues
scope = issues:read
approval = none
route = GET /repos/{owner}/{repo}/issues

[action.ghproxy.create_issue]
description = Open an issue
scope = issues:write
approval = required
route = POST /repos/{owner}/{repo}/issues

; the provider's own MCP server (tests/idp/devmcp.js) behind [mcp.tracker]: it takes the
; provider's tokens, which never leave consentd (token_release = never)
[resource.tracker]
name = Issue tracker (development MCP server)
max_consent = 2592000
provider_issuer = $PROVIDER
provider_client_id = consentd-tracker
provider_client_secret = consentd-tracker-dev-secret
; the token stays inside consentd: no base_url, so consentd's proxy serves nothing of it;
; the MCP gateway ([mcp.tracker] below) is its only way in
token_release = never

[scope.tracker.issues:read]
description = Read issues
provider = issues:read

[scope.tracker.issues:write]
description = Open and close issues
provider = issues:write

[action.tracker.list_issues]
description = List the tracker's issues
scope = issues:read
approval = none

[action.tracker.create_issue]
description = Open an issue in the tracker
scope = issues:write
approval = required

[action.tracker.close_issue]
description = Close an issue in the tracker
scope = issues:write
approval = required
INI
}

# What the run-dev.sh before checksums wrote at every start (it knew only .dev/), to recognise
# its files.
v1_conf() {
	cat <<INI
; generated by \`make run\` (scripts/run-dev.sh) for development on 127.0.0.1 -- do not deploy
[server]
listen = 127.0.0.1:$PORT
public_url = http://127.0.0.1:$PORT
threads = 0
log = stderr

[database]
path = $DEV/consentd.db

[keys]
master_key_file = $DEV/master.key

[oidc]
issuer = http://127.0.0.1:$IDP_PORT
client_id = consentd
client_secret = consentd-dev-secret

[gateway]
id = agent-gateway
client_secret = gateway-dev-secret
subject_audiences = gateway-app

[consent]
interval = 2

[resource.notes]
name = Team notes
max_consent = 2592000

[scope.notes.read]
description = Read your notes

[scope.notes.write]
description = Create and edit notes

[agent.coder]
name = Coding assistant
description = Reads and writes your notes
allow = notes:read notes:write
offline = true
INI
}

MARK='; run-dev.sh sha256: '
sha() { sha256sum | cut -d' ' -f1; }
# generated: the file is as some version of this script wrote it (checksum line intact and
# matching the rest; or byte for byte the old version's file).
is_generated() {
	local f=$1 first sum
	first=$(head -n 1 "$f")
	if [[ $first == "$MARK"* ]]; then
		sum=${first#"$MARK"}
		[ "$(tail -n +2 "$f" | sha)" = "$sum" ]
		return
	fi
	[ "$(sha < "$f")" = "$(v1_conf | sha)" ]
}
write_conf() {
	local tmp=$CONF.tmp.$$
	{ printf '%s%s\n' "$MARK" "$(generated_conf | sha)"; generated_conf; } > "$tmp"
	chmod 600 "$tmp"
	mv -f "$tmp" "$CONF"
}
if [ ! -s "$CONF" ]; then
	write_conf
	echo "run: wrote a development config: $SHOW/consentd.conf"
elif is_generated "$CONF"; then
	before=$(sha < "$CONF")
	write_conf
	[ "$(sha < "$CONF")" = "$before" ] ||
		echo "run: regenerated $SHOW/consentd.conf (it was as generated, unchanged by you)"
else
	echo "run: using your $SHOW/consentd.conf (delete it to regenerate)"
	grep -Eq "^listen[[:space:]]*=[[:space:]]*127\.0\.0\.1:${PORT}[[:space:]]*(;.*)?\$" "$CONF" ||
		echo "run: note: it does not say 'listen = 127.0.0.1:$PORT'; the IdP sends people back to $URL"
	grep -Eq '^\[mcp\.tracker\][[:space:]]*$' "$CONF" ||
		echo "run: note: it has no [mcp.tracker] (the development MCP server behind consentd, issue #31): delete it to get one"
fi

[ "$PREPARE" = 0 ] || exit 0

# ---- ports -------------------------------------------------------------------------------
# Each port must be free on 127.0.0.1 before anything starts. A port that something else holds
# (Debian's prometheus.service listens on *:9090, for example) is named with the variable that
# changes it and, where /proc shows it, the process and the systemd unit that hold it.
# holder PORT: "NAME (pid PID[, UNIT])" of a process listening on PORT on a wildcard or
# loopback address, from /proc/net/tcp{,6} (state 0A) and /proc/*/fd; empty when none is seen.
holder() {
	local port hex inodes inode fd pid unit
	port=$1
	hex=$(printf '%04X' "$port")
	# local address is field 2 ("0100007F:2382" or 32 hex digits ":2382"); st is field 4.
	inodes=$(awk -v h="$hex" 'FNR > 1 && $4 == "0A" {
		split($2, a, ":"); if (a[2] != h) next
		ip = a[1]
		if (ip ~ /^0+$/ || ip == "0100007F" || ip == "00000000000000000000000001000000" ||
		    ip == "0000000000000000FFFF00000100007F") print $10 }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u)
	[ -n "$inodes" ] || return 0
	for inode in $inodes; do
		fd=$(find /proc/[0-9]*/fd -maxdepth 1 -lname "socket:\[$inode\]" -print -quit 2>/dev/null)
		if [ -n "$fd" ]; then
			pid=${fd#/proc/}; pid=${pid%%/*}
			unit=$(sed -nE 's|^0::.*/([^/]+\.service)$|\1|p' "/proc/$pid/cgroup" 2>/dev/null | head -n 1)
			echo "$(cat "/proc/$pid/comm" 2>/dev/null || echo '?') (pid $pid${unit:+, systemd unit $unit})"
			return 0
		fi
	done
	echo "a process this user cannot see"
}
# port_free PORT: can something listen on 127.0.0.1:PORT now? (bash's /dev/tcp connects: a
# refused connection and no listener in /proc mean free.)
taken=0
for v in PORT IDP_PORT PROVIDER_PORT API_PORT MCP_PORT CIMD_PORT; do
	case $v in
		PORT) what="consentd" ;;
		IDP_PORT) what="the development IdP" ;;
		PROVIDER_PORT) what="the development provider" ;;
		API_PORT) what="the development API" ;;
		MCP_PORT) what="the development MCP server" ;;
		CIMD_PORT) what="the MCP SDK example client's client-id document" ;;
	esac
	who=$(holder "${!v}")
	if [ -z "$who" ] && (exec 3<>"/dev/tcp/127.0.0.1/${!v}") 2>/dev/null; then
		who="a process (it accepts connections; /proc does not show which)"
	fi
	if [ -n "$who" ]; then
		echo "run: port ${!v} on 127.0.0.1 (for $what, $v) is in use by $who." >&2
		echo "run:   stop it, or choose another port: $v=<port> make run" >&2
		taken=1
	fi
done
[ "$taken" = 0 ] || exit 1

# ---- processes ---------------------------------------------------------------------------
pids=() names=()
stopped=0
stop_all() {   # stop_all [grace]: grace: first give them 2 s to stop by themselves
	[ "$stopped" = 0 ] || return 0
	stopped=1
	local i p k left n=0
	[ -z "${1:-}" ] || n=20
	# A Ctrl-C in a terminal reaches every process here at once: give them a moment to stop by
	# themselves, so that consentd does not get a second signal (which cuts its drain short).
	for ((k = 0; k < n; k++)); do
		left=0
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && left=1; done
		[ "$left" = 0 ] && break
		sleep 0.1
	done
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null || true; done
	for _ in $(seq 150); do
		left=0
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && left=1; done
		[ "$left" = 0 ] && break
		sleep 0.1
	done
	for i in "${!pids[@]}"; do
		if kill -0 "${pids[i]}" 2>/dev/null; then
			echo "run: ${names[i]} did not stop; killing it"
			kill -KILL "${pids[i]}" 2>/dev/null || true
		fi
	done
	wait 2>/dev/null || true
}
# shellcheck disable=SC2317  # (run by the trap below)
on_signal() {
	trap '' INT TERM
	echo
	echo "run: stopping"
	stop_all grace
	echo "run: stopped"
	exit 0
}
trap on_signal INT TERM
trap stop_all EXIT

# launch NAME LOG CMD...: a node server that prints "READY URL" on stdout when it listens;
# ready I: wait until the I-th one launched did (they start side by side: each takes seconds).
launch() {
	local name=$1 log=$2
	shift 2
	"$@" < /dev/null > "$log" 2>&1 &
	pids+=($!) names+=("$name") logs+=("$log")
}
ready() {
	local i=$1
	for _ in $(seq 300); do
		grep -q '^READY ' "${logs[i]}" 2>/dev/null && return 0
		if ! kill -0 "${pids[i]}" 2>/dev/null; then
			echo "run: ${names[i]} did not start (${logs[i]}):" >&2; cat "${logs[i]}" >&2; exit 1
		fi
		sleep 0.1
	done
	echo "run: ${names[i]} was not ready after 30 s (${logs[i]}):" >&2; cat "${logs[i]}" >&2; exit 1
}
logs=()
launch "the development IdP" "$DEV/idp.log" \
	"$NODE" tests/idp/devidp.js --port "$IDP_PORT" --config "$DEV/idp.json"
launch "the development provider" "$DEV/provider.log" \
	"$NODE" tests/idp/devidp.js --port "$PROVIDER_PORT" --config "$DEV/provider.json"
launch "the development API" "$DEV/api.log" \
	"$NODE" tests/idp/devapi.js --port "$API_PORT" --provider "$PROVIDER" \
	--client resource-server --secret resource-server-dev-secret --audience "$API"
# The MCP server plays the provider's own: it takes the provider's tokens for its API ($API,
# the provider's one downstream resource), as a provider's MCP server takes its API tokens.
launch "the development MCP server" "$DEV/mcp.log" \
	"$NODE" tests/idp/devmcp.js --port "$MCP_PORT" --provider "$PROVIDER" \
	--client resource-server --secret resource-server-dev-secret --audience "$API"
launch "the client-id document host" "$DEV/cimd.log" \
	"$NODE" tests/idp/devcimd.js --port "$CIMD_PORT" --dir "$DEV/cimd"
ready 0; ready 1; ready 2; ready 3; ready 4

"$BIN" -n -c "$CONF"
"$BIN" -c "$CONF" < /dev/null &
pids+=($!) names+=(consentd)
cpid=$!
up=0
for _ in $(seq 150); do
	curl -fsS "$URL/readyz" >/dev/null 2>&1 && { up=1; break; }
	kill -0 "$cpid" 2>/dev/null || { echo "run: consentd did not start" >&2; exit 1; }
	sleep 0.1
done
[ "$up" = 1 ] || echo "run: note: $URL/readyz does not answer 200 yet (see consentd's lines above)"
cat <<MSG

  consentd is running:     $URL/              (your consents: $URL/me)
  admin pages:             $URL/admin         (sign in as admin)
  its signing keys:        $URL/.well-known/jwks.json
  MCP sign-in:             $URL/mcp/notes  (OAuth for MCP clients: client_id local-mcp,
                           or a client-id URL)
  MCP gateway:             $URL/mcp/tracker  the development MCP server's issue tracker
                           behind consentd: list_issues runs at once, create_issue and
                           close_issue wait for you to approve each call (link in the answer)
  development IdP:         $LOGIN_IDP/  users alice, bob, carol, admin;
                           password: <name>-password
  development provider:    $PROVIDER/  "GitHub (development)", the same users
  development API:         $API/  behind the provider (log: $SHOW/api.log)
  development MCP server:  $MCP_UPSTREAM  behind the provider; only consentd calls it
                           (log: $SHOW/mcp.log)
  config, key, database:   $SHOW/

  Connect an MCP client to $URL/mcp/tracker (sign in as alice, password alice-password):
    the MCP SDK's example client, from this checkout (then: list, and
    call create_issue {"title": "Crash", "body": "Steps"}):
      $NODE tests/node_modules/@modelcontextprotocol/sdk/dist/esm/examples/client/simpleOAuthClient.js $URL/mcp/tracker $CIMD/sdk-example-client.json
    Claude Code:
      claude mcp add --transport http --client-id local-mcp --callback-port 33418 tracker $URL/mcp/tracker
    VS Code, .vscode/mcp.json (client id local-mcp if it asks for one):
      { "servers": { "tracker": { "type": "http", "url": "$URL/mcp/tracker" } } }
  Press Ctrl-C to stop everything.

MSG

# Until a signal, or until one of them ends by itself: then stop the rest, and exit 0 when it
# ended cleanly (it was told to stop: a SIGINT this shell could not trap, e.g. when started
# in the background by a script, still reaches them), 1 when it failed.
set +e
wait -n -p gone
rc=$?
set -e
[ "$stopped" = 0 ] || exit 0
who=$gone
for i in "${!pids[@]}"; do [ "${pids[i]}" != "$gone" ] || who=${names[i]}; done
if [ "$rc" = 0 ]; then echo "run: $who stopped; stopping the others"
else echo "run: $who ended with status $rc; stopping the others" >&2; fi
stop_all grace
[ "$rc" = 0 ] && exit 0
exit 1
