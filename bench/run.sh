#!/usr/bin/env bash
# run.sh -- `make bench`: wrk against the release binary on loopback (bench/bench.js).
set -euo pipefail
cd "$(dirname "$0")/.."
exec node bench/bench.js "${DURATION:-10}" "${CONNECTIONS:-16}"
