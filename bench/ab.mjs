// ab.mjs -- `make bench-ab A=… B=…`: two consentd binaries side by side, interleaved.
// This machine's speed drifts by up to 2× within minutes, so a before/after comparison
// taken as two separate `make bench` runs says little.  Both binaries run at once, each
// with its own development IdP and an approved consent; wrk (-t2 -c32, D seconds) then
// alternates between them, R rounds of GET /.well-known/jwks.json and POST /token (a
// grant), so each pair of runs shares the same minutes.  Prints every round and the
// medians (req/s and the server's CPU per request, as `make bench` measures it).
// MCP=1 (`make bench-ab MCP=1 …`): instead, each binary behind its own MCP gateway stack
// (bench/bench_mcp.js: [mcp.bench] in front of the upstream without the SDK, alice signed
// in), and the rounds alternate tools/call through consentd at 32 connections and at 1.
// Each consentd started is checked to be the binary asked for (/proc/PID/exe).
// THREADS=a,b (`make bench-ab THREADS=16,4 …`): [server] threads for A and for B (default 0,
// the default of the build), so one binary can be compared with itself at two thread counts.
// Bounded: 4 × R × D seconds of wrk plus start-up; stops what it starts.
import { realpathSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { timed, median } from './measure.js';
import { wrkRunner } from './wrk.js';

const here = dirname(fileURLToPath(import.meta.url));
const bins = process.argv.slice(2).map((b) => realpathSync(b));   // a missing binary fails here
if (bins.length !== 2) {
  console.error('usage: node bench/ab.mjs BINARY_A BINARY_B');
  process.exit(2);
}
const MCP = process.env.MCP === '1';
// Before tests/lib is imported: its default binary is read at import.
process.env.TEST_CONSENTD_BIN = bins[0];
const { benchConfig, approvedConsent } = await import('./bench.js');
const { startMcpBench, mcpScript } = MCP ? await import('./bench_mcp.js') : {};
const { startStack } = await import(join(here, '..', 'tests', 'lib', 'stack.js'));
const R = Math.max(1, Number(process.env.R || 5));
const THREADS = (process.env.THREADS || '').split(',').map((t) => Number(t || 0));
if (THREADS.some((t) => !Number.isInteger(t) || t < 0)) {
  console.error('THREADS=a,b: two thread counts (0: the default)');
  process.exit(2);
}
const D = Math.max(1, Number(process.env.D || 5));

// SECURITY of the measurement: the process answering is the binary named in its row.
function sameBinary(pid, bin) {
  const exe = realpathSync(`/proc/${pid}/exe`);
  if (exe !== bin) throw new Error(`asked for ${bin}, but consentd (pid ${pid}) runs ${exe}`);
}

const stacks = [];
const w = wrkRunner({ threads: 2, connections: 32, duration: D });
const rowsOf = MCP ? ['mcp32', 'mcp1'] : ['jwks', 'token'];
try {
  for (const [i, bin] of bins.entries()) {
    process.env.TEST_CONSENTD_BIN = bin;
    if (MCP) {
      const m = await startMcpBench({ sdk: false });
      stacks.push({ bin, m, pid: m.pid, stop: () => m.stop(), rows: { mcp32: [], mcp1: [] } });
    } else {
      const config = await benchConfig();
      config.server.threads = THREADS[i] || 0;
      const s = await startStack({ config });
      stacks.push({ bin: THREADS[i] ? `${bin} (threads = ${THREADS[i]})` : bin, s, c: await approvedConsent(s), pid: s.c.proc.pid, stop: () => s.stop(), rows: { jwks: [], token: [] } });
    }
    sameBinary(stacks[stacks.length - 1].pid, bin);
  }
  for (let r = 0; r < R; r += 1) {
    for (const st of stacks) {
      if (MCP) {
        await st.m.fresh(2 * D);
        const f = mcpScript(w, st.m.token());
        st.rows.mcp32.push(await timed(w, st.pid, `round ${r + 1} ${st.bin}: tools/call through consentd, 32 connections`,
          st.m.endpoint, f));
        st.rows.mcp1.push(await timed(w, st.pid, `round ${r + 1} ${st.bin}: tools/call through consentd, 1 connection`,
          st.m.endpoint, f, { connections: 1 }));
        continue;
      }
      const form = { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: st.c.auth };
      st.rows.jwks.push(await timed(w, st.pid, `round ${r + 1} ${st.bin}: GET /.well-known/jwks.json`,
        `${st.s.url}/.well-known/jwks.json`));
      st.rows.token.push(await timed(w, st.pid, `round ${r + 1} ${st.bin}: POST /token`, `${st.s.url}/token`,
        w.script({ method: 'POST', body: st.c.tokenBody, headers: form })));
    }
  }
  const m = (xs, k) => median(xs.map((x) => Number(x[k])));
  if (MCP) {
    console.log('\n| binary | tools/call c32 req/s | p50 | CPU/call | tools/call c1 req/s | p50 | p99 | CPU/call |\n| --- | --- | --- | --- | --- | --- | --- | --- |');
  } else {
    console.log('\n| binary | JWKS req/s | JWKS CPU/req | grant req/s | grant CPU/req |\n| --- | --- | --- | --- | --- |');
  }
  for (const st of stacks) {
    const [a, b] = rowsOf.map((k) => st.rows[k]);
    if (MCP) {
      console.log(`| ${st.bin} | ${m(a, 'rps').toFixed(0)} | ${m(a, 'p50ms').toFixed(2)} ms | ${m(a, 'cpuMsPerReq').toFixed(4)} ms `
        + `| ${m(b, 'rps').toFixed(0)} | ${m(b, 'p50ms').toFixed(2)} ms | ${m(b, 'p99ms').toFixed(2)} ms | ${m(b, 'cpuMsPerReq').toFixed(4)} ms |`);
    } else {
      console.log(`| ${st.bin} | ${m(a, 'rps').toFixed(0)} | ${m(a, 'cpuMsPerReq').toFixed(4)} ms `
        + `| ${m(b, 'rps').toFixed(0)} | ${m(b, 'cpuMsPerReq').toFixed(4)} ms |`);
    }
  }
  console.log(`(medians of ${R} interleaved rounds, wrk -t2 -d${D}s)`);
} finally {
  for (const st of stacks) await st.stop();
  w.cleanup();
}
