#!/usr/bin/env bash
# footprint.sh -- what `make run` (or `make check`) left on the machine (issue 35 items 1-2).
#
#   scripts/footprint.sh snapshot > BEFORE     enabled unit links and running services, now
#   scripts/footprint.sh compare BEFORE [run]  after the command: no unit enabled and no
#                                              service running that was not there before;
#                                              with `run`, also none of the test toolchain
#                                              installed (browser, fuzzer toolchain, database
#                                              server, Prometheus, Check, debhelper)
#
# Meant for a throwaway machine: ../shared/tools/fresh.sh and fresh-systemd.sh (README,
# "Checking the two commands on a new machine").  Ends with "footprint: N passed, N failed".
set -u
enabled() {
	find /etc/systemd/system -mindepth 2 -maxdepth 2 -type l \
		\( -path '*.wants/*' -o -path '*.requires/*' \) -printf '%f\n' 2>/dev/null | sort -u
}
running() {
	if [ -d /run/systemd/system ]; then
		systemctl list-units --type=service --state=running --no-legend --plain 2>/dev/null |
			awk '{ print $1 }' | sort -u
	fi
}
case ${1:-} in
snapshot)
	enabled | sed 's/^/enabled /'
	running | sed 's/^/running /'
	;;
compare)
	before=${2:?usage: footprint.sh compare BEFORE [run]}
	pass=0 fail=0
	ok()  { pass=$((pass + 1)); echo "  ok   $*"; }
	bad() { fail=$((fail + 1)); echo "  FAIL $*"; }
	new_enabled=$(comm -13 <(sed -n 's/^enabled //p' "$before" | sort -u) <(enabled))
	if [ -z "$new_enabled" ]; then ok "no unit enabled that was not before"
	else bad "units enabled since: $(echo $new_enabled)"; fi
	if [ -d /run/systemd/system ]; then
		new_running=$(comm -13 <(sed -n 's/^running //p' "$before" | sort -u) <(running))
		if [ -z "$new_running" ]; then ok "no service running that was not before (systemd is PID 1)"
		else bad "services running since: $(echo $new_running)"; fi
	fi
	if [ "${3:-}" = run ]; then
		for p in chromium clang libclang-rt-14-dev check postgresql-15 postgresql prometheus debhelper wrk; do
			if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
				bad "make run installed $p (a test tool)"
			else ok "make run did not install $p"; fi
		done
		for t in playwright-core axe-core oauth4webapi; do
			if [ -e "tests/node_modules/$t" ]; then bad "make run installed the npm test package $t"
			else ok "make run did not install the npm test package $t"; fi
		done
	fi
	echo "footprint: $pass passed, $fail failed"
	[ "$fail" -eq 0 ]
	;;
*) echo "usage: scripts/footprint.sh snapshot | compare BEFORE [run]" >&2; exit 2 ;;
esac
