#!/usr/bin/env bash
# test-deploy.sh -- the deployment, tested for real on this machine (issue 16, item 7):
#  - the man pages render without a warning and document every section and key of
#    config/consentd.conf.example and of the key lists in server/config_read.c;
#  - `make install` honours PREFIX and DESTDIR, installs build/consentd as it is, with
#    sane modes, and keeps an existing /etc/consentd/consentd.conf;
#  - the systemd unit: `systemd-analyze security --offline=yes` (exposure score) and
#    `systemd-analyze verify` of the unit the package installs;
#  - the Debian package: built with dpkg-buildpackage from a copy of the tree, installed
#    with `dpkg -i` (user, files, modes, master key), consentd started as its user
#    (healthz, SIGHUP, SIGTERM), upgraded to a second version (configuration, key and
#    database kept), removed, then purged (user, /etc/consentd, /var/lib/consentd gone).
# Needs root and no consentd package or user on the machine; undoes what it did, even
# when a check fails or it is interrupted.  Ends with "deploy: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
t0=$(date +%s)
pass=0; fail=0
ok()  { pass=$((pass + 1)); echo "  ok   $*"; }
bad() { fail=$((fail + 1)); echo "  FAIL $*"; }
check() {   # check DESCRIPTION COMMAND...: passes when the command succeeds
	local what=$1; shift
	if "$@"; then ok "$what"; else bad "$what"; fi
}
finish() {
	echo "deploy: $pass passed, $fail failed ($(( $(date +%s) - t0 )) s)"
	[ "$fail" -eq 0 ]
	exit
}
quiet() { "$@" >/dev/null 2>&1; }
mode_of()  { stat -c '%a' "$1" 2>/dev/null; }
owner_of() { stat -c '%U:%G' "$1" 2>/dev/null; }
has_mode() { [ "$(mode_of "$1")" = "$2" ]; }
has_owner() { [ "$(owner_of "$1")" = "$2" ]; }

# --- preconditions -----------------------------------------------------------
if [ "$(id -u)" -ne 0 ]; then
	echo "test-deploy: needs root (dpkg -i, a system user)"; bad "running as root"; finish
fi
# One at a time on this machine (two checkouts' `make check` at once would share dpkg,
# the user and /etc/consentd).
exec 9>/tmp/consentd-test-deploy.lock
flock -w 300 9 || { bad "the lock /tmp/consentd-test-deploy.lock within 300 s"; finish; }

if dpkg-query -W -f='${Status}' consentd 2>/dev/null | grep -q 'installed\|config-files\|unpacked'; then
	echo "test-deploy: a consentd package is on this machine; not touching it"
	bad "no consentd package installed before the test"; finish
fi
for p in /etc/consentd /var/lib/consentd; do
	if [ -e "$p" ]; then
		echo "test-deploy: $p exists; not touching it"; bad "no $p before the test"; finish
	fi
done
if getent passwd consentd >/dev/null || getent group consentd >/dev/null; then
	echo "test-deploy: a user or group consentd exists; not touching it"
	bad "no user consentd before the test"; finish
fi
for c in dpkg-buildpackage dh groff man systemd-analyze setpriv curl python3; do
	command -v "$c" >/dev/null || { bad "$c is installed (scripts/deps.sh)"; finish; }
done

tmp=$(mktemp -d /tmp/consentd-deploy.XXXXXX)
installed=0 server_pid=
cleanup() {
	if [ -n "$server_pid" ]; then kill -KILL "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
	if [ "$installed" = 1 ]; then
		dpkg --purge consentd >/dev/null 2>&1 || true
		# What a failed purge may have left (none of it existed before the test).
		rm -rf /etc/consentd /var/lib/consentd
		getent passwd consentd >/dev/null && userdel consentd
		getent group consentd >/dev/null && groupdel consentd
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- man pages ---------------------------------------------------------------
echo "== man pages"
for page in man/consentd.8 man/consentd.conf.5; do
	out=$(groff -man -ww -z "$page" 2>&1)
	check "$page: groff -man -ww -z says nothing" test -z "$out"
	[ -n "$out" ] && echo "$out"
	out=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
	check "$page: man --warnings -l says nothing" test -z "$out"
	[ -n "$out" ] && echo "$out"
done
# Every (section, key) of the example and of config_read.c's key lists is a tag (.TP/.TQ
# line) under its "SECTION [...]" heading of consentd.conf.5.
keys_out=$(python3 - config/consentd.conf.example server/config_read.c man/consentd.conf.5 <<'EOF'
import re, sys
example, config_c, page = sys.argv[1:4]
def kind(sec):   # [agent.coder] -> agent, [scope.notes.read] -> scope
    return sec.split('.', 1)[0]
want = set()
sec = None
for line in open(example):
    m = re.match(r'\s*\[([^\]]+)\]', line)
    if m:
        sec = kind(m.group(1)); want.add((sec, None)); continue
    m = re.match(r'\s*;?\s*([a-z_][a-z0-9_]*)\s*=', line)
    if m and sec is not None:
        want.add((sec, m.group(1)))
src = open(config_c).read()
lists = dict(re.findall(r'static const char \*const keys_(\w+)\[\] = \{([^}]*)\}', src))
if not lists:
    print('no key lists found in server/config_read.c'); sys.exit(1)
alias = {'mcp_endpoint': 'mcp'}   # keys_mcp_endpoint: [mcp.NAME], under "SECTION [mcp.NAME]"
for name, body in lists.items():
    name = alias.get(name, name)
    want.add((name, None))
    for k in re.findall(r'"([a-z_0-9]+)"', body):
        want.add((name, k))
have = set()
sec = None
lines = open(page).read().splitlines()
for i, line in enumerate(lines):
    clean = line.replace('\\%', '').replace('\\-', '-')
    clean = re.sub(r'\\f[BIRP]', '', clean)
    m = re.match(r'\.SH "SECTION \[([a-z]+)', clean)
    if m:
        sec = m.group(1); have.add((sec, None)); continue
    if sec and i > 0 and lines[i - 1] in ('.TP', '.TQ'):
        m = re.match(r'\.B\s+([a-z_][a-z0-9_]*)\s*$', clean)
        if m:
            have.add((sec, m.group(1)))
missing = sorted(want - have, key=lambda x: (x[0], x[1] or ''))
for s, k in missing:
    print('consentd.conf.5 lacks ' + ('[%s] %s' % (s, k) if k else 'the section [%s]' % s))
print('%d sections and keys checked' % len(want))
sys.exit(1 if missing else 0)
EOF
)
rc=$?
echo "$keys_out" | sed 's/^/    /'
check "consentd.conf.5 documents every section and key (example and config_read.c)" test "$rc" -eq 0
# Every command of the usage text is in consentd.8.
for cmd in keygen "keys rotate" "keys list" "keys revoke" "admin token create" "admin token list" \
	"admin token revoke" "admin consents list" "admin consents revoke" "admin revoke-user" \
	"admin revoke-agent" "admin revoke-resource" "audit verify" "audit export" "vault rekey" \
	backup config-keys; do
	if ! MANWIDTH=200 man -l man/consentd.8 2>/dev/null | grep -q "consentd $cmd"; then
		bad "consentd.8 documents consentd $cmd"; fi
done
ok "consentd.8 names every command of the usage text"

# --- make install --------------------------------------------------------------
echo "== make install"
make -s build/consentd || { bad "make build/consentd"; finish; }
before=$(stat -c %Y build/consentd)
dest=$tmp/destdir
check "make install DESTDIR=... PREFIX=/usr" make -s install DESTDIR="$dest" PREFIX=/usr
check "make install rebuilt nothing" test "$(stat -c %Y build/consentd)" = "$before"
check "usr/sbin/consentd is build/consentd, mode 755" \
	sh -c "cmp -s build/consentd '$dest/usr/sbin/consentd' && [ \$(stat -c %a '$dest/usr/sbin/consentd') = 755 ]"
for f in usr/share/man/man8/consentd.8 usr/share/man/man5/consentd.conf.5 \
	usr/share/doc/consentd/consentd.conf.example usr/lib/systemd/system/consentd.service; do
	check "$f, mode 644" has_mode "$dest/$f" 644
done
check "etc/consentd/consentd.conf, mode 640" has_mode "$dest/etc/consentd/consentd.conf" 640
check "the unit starts /usr/sbin/consentd" \
	grep -qx 'ExecStart=/usr/sbin/consentd -c /etc/consentd/consentd.conf' "$dest/usr/lib/systemd/system/consentd.service"
check "the installed binary runs (--version)" sh -c "'$dest/usr/sbin/consentd' --version | grep -q '^consentd [0-9]'"
check "no file is group- or world-writable" test -z "$(find "$dest" -perm /022 ! -type l)"
echo '; edited' >> "$dest/etc/consentd/consentd.conf"
chmod 0750 "$dest/etc/consentd"
make -s install DESTDIR="$dest" PREFIX=/usr >/dev/null
check "a second make install keeps an edited consentd.conf" grep -qx '; edited' "$dest/etc/consentd/consentd.conf"
check "a second make install keeps /etc/consentd's mode" has_mode "$dest/etc/consentd" 750
check "make install DESTDIR=... (default PREFIX)" make -s install DESTDIR="$tmp/local"
check "default PREFIX is /usr/local" test -x "$tmp/local/usr/local/sbin/consentd"
check "the /usr/local unit starts /usr/local/sbin/consentd" \
	grep -q '^ExecStart=/usr/local/sbin/consentd ' "$tmp/local/usr/local/lib/systemd/system/consentd.service"

# --- the systemd unit ----------------------------------------------------------
echo "== systemd unit"
sec=$(systemd-analyze security --offline=yes contrib/systemd/consentd.service 2>&1)
score=$(printf '%s\n' "$sec" | sed -nE 's/.*Overall exposure level for consentd.service: ([0-9.]+).*/\1/p')
echo "    exposure score: ${score:-?}"
check "systemd-analyze security --offline=yes: exposure at most 2.0 (${score:-none})" \
	python3 -c "import sys; sys.exit(0 if '$score' and float('$score') <= 2.0 else 1)"
for k in NoNewPrivileges=yes ProtectSystem=strict PrivateTmp=yes ProtectHome=yes \
	'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX' SystemCallFilter=@system-service \
	MemoryDenyWriteExecute=yes LockPersonality=yes StateDirectory=consentd \
	ConfigurationDirectory=consentd User=consentd 'ExecReload=/bin/kill -HUP $MAINPID'; do
	grep -qxF "$k" contrib/systemd/consentd.service || bad "the unit has $k"
done
ok "the unit has every setting issue 16 names"

# --- the Debian package: build two versions -------------------------------------
echo "== Build-Depends"
# A clean builder installs Build-Depends and nothing else (apt-get build-dep ./), so each
# library the Makefile's pkg-config gate asks for (PKGS) must come from a package named
# there; `make deb-clean` (scripts/test-deb-clean.sh) does that build in a new Debian 12 root.
build_deps=$(sed -n '/^Build-Depends:/,/^[A-Z][A-Za-z-]*:/p' debian/control | sed '$d' |
	sed 's/^Build-Depends://' | tr ',' '\n' | sed -E 's/\(.*\)//; s/\[.*\]//; s/^[[:space:]]+//; s/[[:space:]]+$//' | grep -v '^$')
for m in $(sed -nE 's/^PKGS[[:space:]]*=[[:space:]]*//p' Makefile); do
	pc=$(pkg-config --path "$m" 2>/dev/null)
	pkg=$(dpkg -S "$(readlink -f "$pc")" 2>/dev/null | head -n 1 | cut -d: -f1)
	if [ -n "$pkg" ] && printf '%s\n' "$build_deps" | grep -qx "$pkg"; then
		ok "Build-Depends has $pkg (pkg-config $m)"
	else bad "Build-Depends has the package of pkg-config $m (${pkg:-not found})"; fi
done
check "dpkg-checkbuilddeps: the Build-Depends are met here" quiet dpkg-checkbuilddeps debian/control

echo "== dpkg-buildpackage"
src=$tmp/src/consentd
mkdir -p "$src/build"
cp -a Makefile server include migrations templates scripts config man contrib debian "$src/"
# build/consentd and what make checks it against, with their times: nothing is rebuilt.
# (The POSIX format keeps the times to the nanosecond: ustar's whole seconds would make
# an object built in the same second as its source look older than it.)
tar --format=posix -C build -cf - --exclude=rel/tests consentd rel gen sources.list | tar -C "$src/build" -xf -
export DEB_BUILD_OPTIONS=noautodbgsym   # no -dbgsym package: faster, and not tested here
if (cd "$src" && dpkg-buildpackage -us -uc -b >"$tmp/build1.log" 2>&1); then ok "dpkg-buildpackage -us -uc -b"
else bad "dpkg-buildpackage -us -uc -b"; tail -20 "$tmp/build1.log"; finish; fi
v1=$(cd "$src" && dpkg-parsechangelog -S Version)
deb1=$(ls "$tmp"/src/consentd_"$v1"_*.deb)
check "the package holds build/consentd's binary (make rebuilt nothing)" \
	grep -q "'build/consentd' is up to date" "$tmp/build1.log"
v2="$v1+deploytest1"
{ printf 'consentd (%s) unstable; urgency=medium\n\n  * A second version, to test the upgrade.\n\n -- %s  %s\n\n' \
	"$v2" "$(cd "$src" && dpkg-parsechangelog -S Maintainer)" "$(date -R)"; cat "$src/debian/changelog"; } \
	> "$tmp/changelog" && mv "$tmp/changelog" "$src/debian/changelog"
if (cd "$src" && dpkg-buildpackage -us -uc -b >"$tmp/build2.log" 2>&1); then ok "dpkg-buildpackage of a second version ($v2)"
else bad "dpkg-buildpackage of a second version"; tail -20 "$tmp/build2.log"; finish; fi
deb2=$(ls "$tmp"/src/consentd_"$v2"_*.deb)

# --- install ---------------------------------------------------------------------
echo "== dpkg -i $v1 (no systemd running: $( [ -d /run/systemd/system ] && echo no || echo yes ))"
installed=1
if dpkg -i "$deb1" </dev/null >"$tmp/install1.log" 2>&1; then ok "dpkg -i $(basename "$deb1")"
else bad "dpkg -i"; cat "$tmp/install1.log"; finish; fi
IFS=: read -r _ _ c_uid _ _ c_home c_shell < <(getent passwd consentd)
check "user consentd: a system user, no login shell, home /var/lib/consentd" \
	test "${c_uid:-1000}" -lt 1000 -a "${c_home:-}" = /var/lib/consentd -a "${c_shell:-}" = /usr/sbin/nologin
check "group consentd" quiet getent group consentd
check "/usr/sbin/consentd runs: consentd --version" sh -c '/usr/sbin/consentd --version | grep -qx "consentd [0-9.]*"'
check "/lib/systemd/system/consentd.service" test -f /lib/systemd/system/consentd.service
check "the man pages: man -w consentd, consentd.conf" sh -c 'man -w 8 consentd >/dev/null && man -w 5 consentd.conf >/dev/null'
check "/etc/consentd: root:consentd 750" sh -c 'has() { [ "$(stat -c "%U:%G %a" "$1")" = "$2" ]; }; has /etc/consentd "root:consentd 750"'
check "/etc/consentd/consentd.conf: root:consentd 640, a conffile" \
	sh -c '[ "$(stat -c "%U:%G %a" /etc/consentd/consentd.conf)" = "root:consentd 640" ] &&
		dpkg-query -W -f="\${Conffiles}" consentd | grep -q /etc/consentd/consentd.conf'
check "/etc/consentd/master.key: consentd:consentd 600, 32 bytes" \
	sh -c '[ "$(stat -c "%U:%G %a %s" /etc/consentd/master.key)" = "consentd:consentd 600 32" ]'
check "/var/lib/consentd: consentd:consentd 700" \
	sh -c '[ "$(stat -c "%U:%G %a" /var/lib/consentd)" = "consentd:consentd 700" ]'
check "the unit is not enabled (the configuration needs editing first)" \
	test ! -e /etc/systemd/system/multi-user.target.wants/consentd.service
out=$(systemd-analyze verify /lib/systemd/system/consentd.service 2>&1); rc=$?
[ -n "$out" ] && echo "$out"
check "systemd-analyze verify /lib/systemd/system/consentd.service: clean" test "$rc" -eq 0 -a -z "$out"

# consentd as its user, with the packaged layout: a loopback configuration.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > /etc/consentd/consentd.conf <<EOF
; written by scripts/test-deploy.sh
[server]
listen = 127.0.0.1:$port
public_url = http://127.0.0.1:$port
threads = 2
[oidc]
issuer = http://127.0.0.1:9
client_id = consentd
client_secret = deploy-test-oidc-secret
[gateway]
client_secret = deploy-test-gateway-secret
EOF
as_consentd() { env -i PATH=/usr/sbin:/usr/bin:/bin setpriv --reuid=consentd --regid=consentd --init-groups -- "$@"; }
check "consentd -n as user consentd: configuration OK" \
	quiet as_consentd /usr/sbin/consentd -n -c /etc/consentd/consentd.conf
# As the unit runs it: its user, UMask=0077, a clean environment.  The subshell
# execs, so $! is consentd's own pid.
(umask 077; exec env -i PATH=/usr/sbin:/usr/bin:/bin setpriv --reuid=consentd --regid=consentd \
	--init-groups -- /usr/sbin/consentd -c /etc/consentd/consentd.conf >"$tmp/server.log" 2>&1 9>&-) &
server_pid=$!
up=0
for _ in $(seq 1 100); do
	curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null && { up=1; break; }
	kill -0 "$server_pid" 2>/dev/null || break
	sleep 0.1
done
check "consentd serves as user consentd (GET /healthz 200)" test "$up" = 1
check "its database /var/lib/consentd/consentd.db belongs to consentd, mode 600" \
	sh -c '[ "$(stat -c "%U %a" /var/lib/consentd/consentd.db)" = "consentd 600" ]'
kill -HUP "$server_pid" 2>/dev/null; sleep 0.3
check "SIGHUP (ExecReload) keeps it serving" curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz"
# What docs/deploy.md says to watch and how to back up, as it says it.
check "GET /readyz: 503 with its checks (no IdP here)" \
	sh -c "curl -sS -w '%{http_code}' http://127.0.0.1:$port/readyz | grep -q '\"identity_provider\":false.*503\$'"
check "GET /metrics with the gateway's credentials: consentd_audit_head_behind 0" \
	sh -c "curl -fsS -u agent-gateway:deploy-test-gateway-secret http://127.0.0.1:$port/metrics | grep -qx 'consentd_audit_head_behind 0'"
check "backup while serving: runuser -u consentd -- sqlite3 DB .backup" \
	quiet runuser -u consentd -- sqlite3 /var/lib/consentd/consentd.db ".backup /var/lib/consentd/backup.db"
check "the copy passes PRAGMA integrity_check" \
	sh -c 'test "$(runuser -u consentd -- sqlite3 /var/lib/consentd/backup.db "PRAGMA integrity_check")" = ok'
check "the copy's audit chain verifies (consentd audit verify)" \
	quiet runuser -u consentd -- env CONSENTD_DATABASE_PATH=/var/lib/consentd/backup.db \
	consentd audit verify -c /etc/consentd/consentd.conf
kill -TERM "$server_pid" 2>/dev/null
wait "$server_pid"; rc=$?; server_pid=
check "SIGTERM stops it with status 0" test "$rc" -eq 0
[ "$up" = 1 ] || tail -5 "$tmp/server.log"
# The master-key rotation of docs/deploy.md, with the server stopped.
check "master key rotation: keygen, chown, vault rekey as consentd" sh -c '
	consentd keygen /etc/consentd/master.key.new >/dev/null &&
	chown consentd:consentd /etc/consentd/master.key.new &&
	runuser -u consentd -- consentd vault rekey -c /etc/consentd/consentd.conf \
		--new-key-file /etc/consentd/master.key.new >/dev/null 2>&1 &&
	mv /etc/consentd/master.key.new /etc/consentd/master.key &&
	runuser -u consentd -- consentd audit verify -c /etc/consentd/consentd.conf >/dev/null 2>&1'

# --- upgrade -----------------------------------------------------------------------
echo "== dpkg -i $v2 (upgrade)"
conf_sum=$(sha256sum < /etc/consentd/consentd.conf); key_sum=$(sha256sum < /etc/consentd/master.key)
uid1=$(id -u consentd)
if dpkg -i "$deb2" </dev/null >"$tmp/install2.log" 2>&1; then ok "dpkg -i $(basename "$deb2") (upgrade)"
else bad "dpkg -i (upgrade)"; cat "$tmp/install2.log"; fi
check "now version $v2" test "$(dpkg-query -W -f='${Version}' consentd)" = "$v2"
check "the edited consentd.conf is kept" test "$(sha256sum < /etc/consentd/consentd.conf)" = "$conf_sum"
check "its mode root:consentd 640 is kept" sh -c '[ "$(stat -c "%U:%G %a" /etc/consentd/consentd.conf)" = "root:consentd 640" ]'
check "the master key is kept" test "$(sha256sum < /etc/consentd/master.key)" = "$key_sum"
check "the database is kept" test -f /var/lib/consentd/consentd.db
check "the user is kept (same uid)" test "$(id -u consentd)" = "$uid1"

# --- remove, then purge ----------------------------------------------------------
echo "== dpkg -r, dpkg --purge"
check "dpkg -r consentd" sh -c 'dpkg -r consentd >/dev/null 2>&1'
check "after remove: binary and unit gone" test ! -e /usr/sbin/consentd -a ! -e /lib/systemd/system/consentd.service
check "after remove: configuration, key, database and user kept" \
	sh -c 'test -f /etc/consentd/consentd.conf && test -f /etc/consentd/master.key &&
		test -f /var/lib/consentd/consentd.db && getent passwd consentd >/dev/null'
check "dpkg --purge consentd" sh -c 'dpkg --purge consentd >/dev/null 2>&1'
check "after purge: /etc/consentd gone" test ! -e /etc/consentd
check "after purge: /var/lib/consentd gone" test ! -e /var/lib/consentd
check "after purge: user and group consentd gone" sh -c '! getent passwd consentd >/dev/null && ! getent group consentd >/dev/null'
check "after purge: dpkg knows no consentd" sh -c '! dpkg-query -W -f="\${Status}" consentd 2>/dev/null | grep -q "installed\|config-files"'
installed=0
finish
