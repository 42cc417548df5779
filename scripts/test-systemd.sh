#!/usr/bin/env bash
# test-systemd.sh -- the Debian package's unit, run by a real systemd (issue 16, item 7).
# scripts/test-deploy.sh (part of `make check`) checks the unit offline and runs consentd
# by hand with the unit's user and umask, because the machine has no systemd as PID 1.
# This boots one: a Debian 12 root (debootstrap, cached in $SYSTEMD_ROOT) with systemd,
# booted by systemd-nspawn with a private network, the package built from build/consentd
# installed with apt, and inside it `systemctl start consentd`; then, from inside:
#  - the service is active and serves /healthz as the user consentd;
#  - the sandbox is on in the running process: no new privileges, a seccomp filter, no
#    capabilities, a read-only root and /etc, no /home, a private /tmp, the database in
#    StateDirectory;
#  - `consentd backup` writes a consistent copy while it serves;
#  - `systemctl reload` (ExecReload=SIGHUP) keeps it serving, and it says so in the journal;
#  - SIGKILL: Restart=on-failure brings it back, the database intact;
#  - `systemd-analyze security consentd` of the running unit;
#  - `systemctl stop`: status 0, Result=success; started again, the data is still there;
#  - no system call was refused (no "Bad system call", no restart loop).
# Needs root, debootstrap and systemd-nspawn (package systemd-container), and network to
# Debian's archive. Ends with "systemd: N passed, N failed". Run with `make systemd-test`.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
t0=$(date +%s)
CACHE=${SYSTEMD_ROOT:-/var/tmp/consentd-systemd-root}
fail() { echo "test-systemd: $*"; echo "systemd: 0 passed, 1 failed ($(( $(date +%s) - t0 )) s)"; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, systemd-nspawn)"
for c in debootstrap systemd-nspawn dpkg-buildpackage; do
	command -v "$c" >/dev/null || fail "$c is missing (apt-get install debootstrap systemd-container dpkg-dev debhelper)"
done
[ -x build/consentd ] || fail "build/consentd is missing (make build/consentd)"

tmp=$(mktemp -d /var/tmp/consentd-systemd.XXXXXX)
cleanup() { rm -rf --one-file-system "$tmp"; }
trap cleanup EXIT

# --- a Debian 12 root with systemd, made once and kept ------------------------------
if [ ! -x "$CACHE/base/lib/systemd/systemd" ]; then
	echo "== debootstrap bookworm with systemd into $CACHE/base (once)"
	mirror=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list \
		/etc/apt/sources.list.d/*.list 2>/dev/null)
	if [ -z "$mirror" ]; then
		mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null)
	fi
	rm -rf --one-file-system "$CACHE/base.new"; mkdir -p "$CACHE"
	debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,curl,ca-certificates,sqlite3 \
		bookworm "$CACHE/base.new" "${mirror:-http://deb.debian.org/debian}" >"$tmp/debootstrap.log" 2>&1 ||
		{ tail -20 "$tmp/debootstrap.log"; fail "debootstrap failed"; }
	mv "$CACHE/base.new" "$CACHE/base"
fi
R=$tmp/root
echo "== a copy of the root in $R"
cp -a "$CACHE/base" "$R"
cp /etc/resolv.conf "$R/etc/resolv.conf"

# --- the package, built from build/consentd as test-deploy.sh builds it -------------
echo "== dpkg-buildpackage"
src=$tmp/src/consentd
mkdir -p "$src/build"
cp -a Makefile server include migrations templates scripts config man contrib debian "$src/"
tar --format=posix -C build -cf - --exclude=rel/tests consentd rel gen sources.list | tar -C "$src/build" -xf -
export DEB_BUILD_OPTIONS=noautodbgsym
(cd "$src" && dpkg-buildpackage -us -uc -b >"$tmp/build.log" 2>&1) || { tail -20 "$tmp/build.log"; fail "dpkg-buildpackage failed"; }
deb=$(ls "$tmp"/src/consentd_*.deb | head -1)
cp "$deb" "$R/root/consentd.deb"

echo "== apt-get install ./consentd.deb inside the root (no systemd running yet)"
mount --bind /proc "$R/proc"
chroot "$R" /bin/sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -qq /root/consentd.deb' >"$tmp/apt.log" 2>&1; rc=$?
umount "$R/proc"
[ "$rc" -eq 0 ] || { tail -20 "$tmp/apt.log"; fail "apt-get install of the package failed"; }

cat > "$R/etc/consentd/consentd.conf" <<'EOF'
; written by scripts/test-systemd.sh
[server]
listen = 127.0.0.1:8080
public_url = http://127.0.0.1:8080
threads = 2
[oidc]
issuer = http://127.0.0.1:9
client_id = consentd
client_secret = systemd-test-oidc-secret
[gateway]
client_secret = systemd-test-gateway-secret
EOF

# --- what runs inside, once the system is up ------------------------------------------
cat > "$R/root/inside.sh" <<'EOF'
#!/bin/sh
out=/root/systemd-result
: > $out
ok()  { echo "  ok   $*" >> $out; }
bad() { echo "  FAIL $*" >> $out; }
t() { d=$1; shift; if "$@" >/dev/null 2>&1; then ok "$d"; else bad "$d"; fi; }
up() { for _ in $(seq 1 100); do curl -fsS -o /dev/null http://127.0.0.1:8080/healthz 2>/dev/null && return 0; sleep 0.1; done; return 1; }
st() { grep -q "^$2:[[:space:]]*$3\$" /proc/$1/status; }
mnt() { awk -v p="$2" '$5 == p { print $6 }' /proc/$1/mountinfo | tail -1; }

t "systemctl start consentd" systemctl start consentd
t "the unit is active and serves GET /healthz" sh -c 'systemctl is-active -q consentd'
up; t "GET /healthz 200 under systemd" curl -fsS -o /dev/null http://127.0.0.1:8080/healthz
pid=$(systemctl show -P MainPID consentd)
echo "  (MainPID $pid)" >> $out
t "it runs as the user consentd" test "$(stat -c %U /proc/$pid)" = consentd
t "NoNewPrivileges: NoNewPrivs 1" st "$pid" NoNewPrivs 1
t "SystemCallFilter: a seccomp filter (Seccomp 2)" st "$pid" Seccomp 2
t "CapabilityBoundingSet empty: CapEff and CapBnd 0" sh -c "grep -q '^CapEff:[[:space:]]*0\{16\}\$' /proc/$pid/status && grep -q '^CapBnd:[[:space:]]*0\{16\}\$' /proc/$pid/status"
t "ProtectSystem=strict: / is read-only in its namespace" sh -c "mnt() { awk -v p=\"\$1\" '\$5 == p { print \$6 }' /proc/$pid/mountinfo | tail -1; }; mnt / | grep -q '^ro'"
t "StateDirectory: /var/lib/consentd is writable in its namespace" sh -c "awk '\$5 == \"/var/lib/consentd\" { print \$6 }' /proc/$pid/mountinfo | tail -1 | grep -q '^rw'"
t "PrivateTmp: its /tmp is its own mount" sh -c "awk '\$5 == \"/tmp\"' /proc/$pid/mountinfo | grep -q ."
t "ProtectHome: /home is not the host's in its namespace" sh -c "awk '\$5 == \"/home\"' /proc/$pid/mountinfo | grep -q ."
t "the database is in StateDirectory, mode 600, owned by consentd" sh -c '[ "$(stat -c "%U %a" /var/lib/consentd/consentd.db)" = "consentd 600" ]'
t "consentd backup while serving, as consentd" runuser -u consentd -- consentd backup -c /etc/consentd/consentd.conf --to /var/lib/consentd/backup.db
t "the backup passes PRAGMA integrity_check" sh -c 'test "$(sqlite3 /var/lib/consentd/backup.db "PRAGMA integrity_check")" = ok'
t "systemctl reload (ExecReload=SIGHUP)" systemctl reload consentd
sleep 0.5
t "after reload: same process, still active, still serving" sh -c "[ \"\$(systemctl show -P MainPID consentd)\" = $pid ] && systemctl is-active -q consentd && curl -fsS -o /dev/null http://127.0.0.1:8080/healthz"
t "the journal has its reload line" sh -c "journalctl -u consentd --no-pager -o cat | grep -q 'signing keys\|reload\|SIGHUP'"
kill -KILL "$pid"
sleep 3
up
npid=$(systemctl show -P MainPID consentd)
t "SIGKILL: Restart=on-failure starts a new process that serves" sh -c "[ \"$npid\" != 0 ] && [ \"$npid\" != $pid ] && curl -fsS -o /dev/null http://127.0.0.1:8080/healthz"
t "systemd counted the one automatic restart (NRestarts 1)" sh -c '[ "$(systemctl show -P NRestarts consentd)" = 1 ]'
t "after the kill the database passes integrity_check" sh -c 'test "$(sqlite3 /var/lib/consentd/consentd.db "PRAGMA integrity_check")" = ok'
t "after the kill the audit chain verifies" runuser -u consentd -- consentd audit verify -c /etc/consentd/consentd.conf
sec=$(systemd-analyze security consentd --no-pager 2>&1 | tail -1)
echo "  (systemd-analyze security consentd, live: $sec)" >> $out
t "systemd-analyze security of the running unit: exposure at most 2.0" sh -c "echo '$sec' | awk '{ for (i = 1; i <= NF; i++) if (\$i ~ /^[0-9]+\.[0-9]+\$/) { exit !(\$i + 0 <= 2.0) } exit 1 }'"
t "systemctl stop consentd" systemctl stop consentd
t "stopped: status 0, Result=success" sh -c '[ "$(systemctl show -P ExecMainStatus consentd)" = 0 ] && [ "$(systemctl show -P Result consentd)" = success ]'
rows1=$(sqlite3 /var/lib/consentd/consentd.db "SELECT COUNT(*) FROM audit" 2>/dev/null || echo x)
t "started again, it serves" sh -c 'systemctl start consentd && for i in $(seq 1 100); do curl -fsS -o /dev/null http://127.0.0.1:8080/healthz && exit 0; sleep 0.1; done; exit 1'
t "the data survived the restarts (audit entries kept)" sh -c "[ \"$rows1\" != x ] && [ \"\$(sqlite3 /var/lib/consentd/consentd.db 'SELECT COUNT(*) FROM audit')\" -ge \"$rows1\" ]"
t "no system call was refused (no 'Bad system call', no SIGSYS)" sh -c "! journalctl --no-pager -o cat | grep -qi 'bad system call\|SIGSYS\|status=31'"
t "systemd had nothing to say against the unit (no mode warning, no failed reload)" sh -c "! journalctl --no-pager -o cat | grep -q 'mode is different\|Reload failed\|Failed at step'"
journalctl -u consentd --no-pager -o short-monotonic > /root/consentd-journal 2>&1
echo done >> $out.end
systemctl poweroff
EOF
chmod +x "$R/root/inside.sh"
cat > "$R/etc/systemd/system/consentd-test.service" <<'EOF'
[Unit]
Description=scripts/test-systemd.sh inside
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/root/inside.sh
StandardOutput=journal+console
[Install]
WantedBy=multi-user.target
EOF
ln -s /etc/systemd/system/consentd-test.service "$R/etc/systemd/system/multi-user.target.wants/consentd-test.service"

echo "== systemd-nspawn -b (a private network: loopback only)"
timeout 300 systemd-nspawn -q -D "$R" -b --register=no --keep-unit --private-network >"$tmp/boot.log" 2>&1 </dev/null
[ -f "$R/root/systemd-result.end" ] || { tail -40 "$tmp/boot.log"; fail "the test inside did not finish (boot log above)"; }
cat "$R/root/systemd-result"
pass=$(grep -c '^  ok ' "$R/root/systemd-result"); nfail=$(grep -c '^  FAIL ' "$R/root/systemd-result")
[ "$nfail" -eq 0 ] || { echo "-- consentd's journal"; tail -30 "$R/root/consentd-journal"; }
echo "systemd: $pass passed, $nfail failed ($(( $(date +%s) - t0 )) s)"
[ "$nfail" -eq 0 ]
