#!/usr/bin/env bash
# deps.sh -- install what consentd needs to build, run and test, and nothing else.
# Idempotent: installs only what is missing.  Debian 12 packages and npm only.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential pkg-config clang libclang-rt-dev
      libmicrohttpd-dev libssl-dev libcjose-dev libcurl4-openssl-dev
      libsqlite3-dev sqlite3 libjansson-dev libinih-dev check
      curl ca-certificates chromium wrk unicode-data
      debhelper man-db systemd python3    # these four: scripts/test-deploy.sh (README)
      prometheus                          # promtool check metrics: tests/integration/metrics.test.js
      postgresql libpq-dev)               # the PostgreSQL backend builds against libpq; its tests run
                                          # Debian's server in a throw-away cluster (tests/lib/pg.js,
                                          # scripts/pg-sql-check.py), never the packaged 15/main

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Node: any distribution's node >= 18 will do (playwright-core 1.64 and oidc-provider 8 run on 18).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	missing+=(nodejs npm)
fi
if [ "${#missing[@]}" -gt 0 ]; then
	echo "deps: installing ${missing[*]}"
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: missing packages and not root; install them: apt-get install ${missing[*]}" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Test tools from the committed lockfile (tests/package-lock.json).
# A tests/node_modules that is a symbolic link is an install shared with another checkout
# (a git worktree's link to the main one): npm ci would empty the directory it points to.
if [ -L tests/node_modules ]; then
	echo "deps: tests/node_modules is a link to $(readlink tests/node_modules): left as it is (no npm ci)"
elif [ -f tests/package.json ]; then
	stamp=tests/node_modules/.deps-stamp
	if [ ! -f "$stamp" ] || [ tests/package-lock.json -nt "$stamp" ]; then
		echo "deps: npm ci in tests/"
		(cd tests && npm ci --no-audit --no-fund --loglevel=error)
		touch "$stamp"
	fi
fi
