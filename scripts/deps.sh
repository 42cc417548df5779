#!/usr/bin/env bash
# deps.sh -- install what consentd needs, and nothing else.  Idempotent: installs only what
# is missing.  Debian 12 packages and npm only.
#
#   scripts/deps.sh run     what building and `make run` need: a compiler, pkg-config, the
#                           eight -dev libraries, curl, Node.js, and the development IdP's
#                           npm packages (tests/package.json "dependencies")
#   scripts/deps.sh check   the above, plus what `make check` and `make bench` need: clang,
#                           Check, Chromium, wrk, PostgreSQL's server, promtool, nginx's binary,
#                           debhelper ...
#                           and the test tools (tests/package.json "devDependencies")
#
# Neither leaves a system service running or enabled (issue 35): installs run under a
# policy-rc.d that forbids starting services; PostgreSQL is told not to create its default
# cluster; a unit that a package installed here enabled is disabled again (it was not there
# before, so nobody chose it); Prometheus and nginx are not installed at all -- the one test
# that needs `promtool` and the benchmark that needs `nginx` get the binary alone, unpacked
# from Debian's package into build/tools/.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-check}
case $MODE in run|check) ;; *) echo "usage: scripts/deps.sh run|check" >&2; exit 2 ;; esac

# What building and running need.  (The eight libraries: the Makefile's PKGS.)
RUN_PKGS=(build-essential pkg-config
          libmicrohttpd-dev libssl-dev libcjose-dev libcurl4-openssl-dev
          libsqlite3-dev libjansson-dev libinih-dev libpq-dev
          curl ca-certificates
          openssl)   # its CLI: make run's development CA for a client-id document (tests/idp/devcimd.js)
# What testing adds.
CHECK_PKGS=(clang libclang-rt-dev check sqlite3 chromium wrk unicode-data
            debhelper man-db systemd python3   # these four: scripts/test-deploy.sh (README)
            postgresql-common postgresql-15)   # the tests run Debian's server in a throw-away
                                               # cluster (tests/lib/pg.js, scripts/pg-sql-check.py),
                                               # never a packaged one: none is created here
PKGS=("${RUN_PKGS[@]}")
[ "$MODE" = run ] || PKGS+=("${CHECK_PKGS[@]}")

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
missing=()
for p in "${PKGS[@]}"; do installed "$p" || missing+=("$p"); done
# Node: any distribution's node >= 18 will do (playwright-core 1.61 and oidc-provider 8 run on 18).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	missing+=(nodejs npm)
fi

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: $1 and not root; as root: $2" >&2
		exit 1
	fi
}

# wants_links: every "enabled" symlink of systemd's configuration, one a line.
wants_links() {
	find /etc/systemd/system -mindepth 2 -maxdepth 2 -type l \
		\( -path '*.wants/*' -o -path '*.requires/*' \) 2>/dev/null | sort || true
}

# apt_install PKG...: apt-get install with services kept down (see the top of this file).
apt_install() {
	local policy=/usr/sbin/policy-rc.d ours=0 before after link unit owner
	export DEBIAN_FRONTEND=noninteractive
	if [ ! -e "$policy" ]; then
		# 101: "action forbidden by policy" -- invoke-rc.d and deb-systemd-invoke start nothing.
		printf '#!/bin/sh\nexit 101\n' > "$policy"
		chmod 0755 "$policy"
		ours=1
	fi
	# shellcheck disable=SC2064  # the path is fixed now
	[ "$ours" = 0 ] || trap "rm -f '$policy'" EXIT
	before=$(wants_links)
	apt-get update -qq
	# postgresql-common first, told not to create a cluster when the server package
	# configures (Debian's documented switch, /etc/postgresql-common/createcluster.conf).
	if printf '%s\n' "$@" | grep -qx 'postgresql-15' && ! installed postgresql-15; then
		apt-get install -y -qq --no-install-recommends postgresql-common
		local cc=/etc/postgresql-common/createcluster.conf
		if grep -Eq '^[#[:space:]]*create_main_cluster' "$cc" 2>/dev/null; then
			sed -i -E 's/^[#[:space:]]*create_main_cluster.*/create_main_cluster = false/' "$cc"
		else
			echo 'create_main_cluster = false' >> "$cc"
		fi
	fi
	apt-get install -y -qq --no-install-recommends "$@"
	after=$(wants_links)
	# Units the packages just installed enabled: disabled again, unless they belong to
	# systemd itself (installed here only where the machine had no systemd at all).
	while IFS= read -r link; do
		[ -n "$link" ] || continue
		unit=$(basename "$link")
		owner=$(dpkg -S "/lib/systemd/system/$unit" 2>/dev/null | cut -d: -f1 || true)
		case $owner in systemd|systemd-sysv|udev|'') continue ;; esac
		if command -v deb-systemd-helper >/dev/null 2>&1; then
			deb-systemd-helper disable "$unit" >/dev/null 2>&1 || rm -f "$link"
		else
			rm -f "$link"
		fi
		echo "deps: $owner enabled $unit on install; disabled it again (installed for tests, which need no service of it)"
	done < <(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after"))
	if [ "$ours" = 1 ]; then rm -f "$policy"; trap - EXIT; fi
}

if [ "${#missing[@]}" -gt 0 ]; then
	need_root "missing packages" "apt-get install ${missing[*]}"
	echo "deps ($MODE): installing ${missing[*]}"
	apt_install "${missing[@]}"
fi

# unpack_tool PACKAGE PATH: one binary from Debian's PACKAGE, unpacked (dpkg-deb -x) into
# build/tools/ and never installed: no maintainer script runs, so no service, user or
# configuration comes with it.  Its libraries are ones a Debian 12 base already has.
unpack_tool() {
	local pkg=$1 path=$2 tmp
	[ -x "build/tools/${path##*/}" ] && return 0
	need_root "${path##*/} is missing" "make deps"
	tmp=$(mktemp -d)
	( cd "$tmp" && { apt-get download "$pkg" >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get download "$pkg" >/dev/null; }; } )
	dpkg-deb -x "$tmp"/"$pkg"_*.deb "$tmp/x"
	mkdir -p build/tools
	install -m 0755 "$tmp/x/$path" "build/tools/${path##*/}"
	rm -rf "$tmp"
	echo "deps: ${path##*/} unpacked from Debian's $pkg package into build/tools/ (no service)"
}
if [ "$MODE" = check ]; then
	# promtool (tests/integration/metrics.test.js: Prometheus's own parser of the text
	# format), without Prometheus.
	unpack_tool prometheus usr/bin/promtool
	# nginx (make bench, bench/bench_proxy.js: the header-injecting hop issue 34 measures the
	# proxy against, in front of the same upstream in the same run), without its service.
	unpack_tool nginx usr/sbin/nginx
fi

# npm packages from the committed lockfile (tests/package-lock.json): `make run` takes the
# development IdP's ("dependencies"); `make check` everything.
# A tests/node_modules that is a symbolic link is an install shared with another checkout
# (a git worktree's link to the main one): npm ci would empty the directory it points to.
if [ -L tests/node_modules ]; then
	echo "deps: tests/node_modules is a link to $(readlink tests/node_modules): left as it is (no npm ci)"
elif [ -f tests/package.json ]; then
	full=tests/node_modules/.deps-stamp
	runonly=tests/node_modules/.deps-stamp-run
	if [ "$MODE" = check ]; then
		if [ ! -f "$full" ] || [ tests/package-lock.json -nt "$full" ]; then
			echo "deps: npm ci in tests/"
			(cd tests && npm ci --no-audit --no-fund --loglevel=error)
			touch "$full"
		fi
	elif { [ ! -f "$full" ] || [ tests/package-lock.json -nt "$full" ]; } &&
	     { [ ! -f "$runonly" ] || [ tests/package-lock.json -nt "$runonly" ]; }; then
		echo "deps: npm ci --omit=dev in tests/ (the development IdP's packages)"
		(cd tests && npm ci --omit=dev --no-audit --no-fund --loglevel=error)
		touch "$runonly"
	fi
fi
