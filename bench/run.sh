#!/usr/bin/env bash
# run.sh -- `make bench`: wrk against the release binary on loopback (bench/bench.js, then
# proxy mode: bench/bench_proxy.js).
set -euo pipefail
cd "$(dirname "$0")/.."
node bench/bench.js "${DURATION:-10}" "${CONNECTIONS:-16}"
echo
exec node bench/bench_proxy.js "${DURATION:-10}" "${CONNECTIONS:-16}"
