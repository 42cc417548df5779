#!/usr/bin/env bash
# test-deb-clean.sh -- `make deb-clean`: the Debian package built the way a clean builder
# (sbuild, a buildd, a distribution's CI) builds it: in a new minimal Debian 12 root that
# has only what `apt-get build-dep ./` installs from debian/control, from the committed tree
# (git archive HEAD), with `dpkg-buildpackage -us -uc -b`.  scripts/test-deploy.sh (in make
# check) builds the package on this machine, where make deps installed far more than the
# Build-Depends, so it cannot see a missing one (issue 35 item 3: libpq-dev was missing).
#
# Needs root and the network to Debian's archive (the mirror is the one this machine's apt
# uses); installs debootstrap on this machine if it is missing.  About 3-5 minutes.  Leaves
# nothing behind: the root is in a temporary directory, unmounted and removed at the end.
# Ends with "deb-clean: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "  ok   $*"; }
bad() { fail=$((fail + 1)); echo "  FAIL $*"; }
finish() { echo "deb-clean: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }

[ "$(id -u)" -eq 0 ] || { bad "running as root (debootstrap, chroot)"; finish; }
command -v debootstrap >/dev/null ||
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
	{ bad "debootstrap installs"; finish; }
# The mirror this machine's apt reads bookworm from (one-line or deb822 sources).
mirror=$( { for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] && awk '{ sub(/#.*/, ""); gsub(/\[[^]]*\]/, " ") } $1 == "deb" && $3 == "bookworm" { print $2 }' "$f"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && awk 'BEGIN { RS = ""; FS = "\n" }
			{ u = ""; ok = 0; deb = 0
			  for (i = 1; i <= NF; i++) {
				if ($i ~ /^URIs:/) { u = $i; sub(/^URIs:[ \t]*/, "", u); sub(/[ \t].*/, "", u) }
				if ($i ~ /^Suites:/ && $i ~ /[ \t]bookworm([ \t]|$)/) ok = 1
				if ($i ~ /^Types:/ && $i ~ /[ \t]deb([ \t]|$)/) deb = 1 }
			  if (u != "" && ok && deb) print u }' "$f"
	done; } | head -n 1)
[ -n "$mirror" ] || { bad "a Debian mirror in this machine's apt sources"; finish; }

root=$(mktemp -d /var/tmp/consentd-deb-clean.XXXXXX)
cleanup() {
	for m in proc dev/pts dev sys; do umount -l "$root/$m" 2>/dev/null; done
	rm -rf --one-file-system "$root"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== debootstrap --variant=minbase bookworm ($mirror)"
if debootstrap --variant=minbase bookworm "$root" "$mirror" > "$root.log" 2>&1; then
	ok "a minimal Debian 12 root"
else bad "debootstrap"; tail -20 "$root.log"; rm -f "$root.log"; finish; fi
rm -f "$root.log"
mount -t proc proc "$root/proc" && mount --bind /dev "$root/dev" && mount --bind /dev/pts "$root/dev/pts" &&
	mount -t sysfs sys "$root/sys" || { bad "mounts for the chroot"; finish; }
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null
echo "deb $mirror bookworm main" > "$root/etc/apt/sources.list"
mkdir -p "$root/src/consentd"
git archive HEAD | tar -C "$root/src/consentd" -xf - || { bad "git archive HEAD"; finish; }

inroot() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
	DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 bash -c "$1"; }
echo "== apt-get build-dep ./ (only debian/control's Build-Depends)"
if inroot 'apt-get update -qq && cd /src/consentd && apt-get build-dep -y -qq ./' > "$root/bd.log" 2>&1; then
	ok "apt-get build-dep ./"
else bad "apt-get build-dep ./"; tail -20 "$root/bd.log"; finish; fi
echo "== dpkg-buildpackage -us -uc -b"
if inroot 'cd /src/consentd && DEB_BUILD_OPTIONS=noautodbgsym dpkg-buildpackage -us -uc -b' > "$root/build.log" 2>&1; then
	ok "dpkg-buildpackage -us -uc -b from the Build-Depends alone"
else bad "dpkg-buildpackage -us -uc -b"; tail -30 "$root/build.log"; finish; fi
deb=$(ls "$root"/src/consentd_*.deb 2>/dev/null | head -n 1)
if [ -n "$deb" ] && dpkg-deb -c "$deb" | grep >/dev/null '/usr/sbin/consentd$'; then
	ok "the package holds /usr/sbin/consentd ($(basename "$deb"))"
else bad "a .deb with /usr/sbin/consentd"; fi
finish
