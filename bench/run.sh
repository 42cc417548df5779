#!/usr/bin/env bash
# run.sh -- `make bench`: consentd and the development IdP's software side by side, the proxy
# beside its upstream, the MCP gateway's tools/call beside its upstream MCP server, openssl speed, fsync latency, memory (bench/all.js; docs/BENCHMARKS.md).
# RUNS (3), DURATION (10 s per endpoint), CONNECTIONS (32), FSYNC_N (1000).
set -euo pipefail
cd "$(dirname "$0")/.."
# 1,000 held connections plus wrk's: more descriptors than a default soft limit of 1,024.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec node bench/all.js
