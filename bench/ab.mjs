// ab.mjs -- `make bench-ab A=… B=…`: two consentd binaries side by side, interleaved.
// This machine's speed drifts by up to 2× within minutes, so a before/after comparison
// taken as two separate `make bench` runs says little.  Both binaries run at once, each
// with its own development IdP and an approved consent; wrk (-t2 -c32, D seconds) then
// alternates between them, R rounds of GET /.well-known/jwks.json and POST /token (a
// grant), so each pair of runs shares the same minutes.  Prints every round and the
// medians (req/s, the server's CPU per request, as `make bench` measures it, and what it wrote to
// the disk per request: pages, which do not drift with the machine).
// MCP=1 (`make bench-ab MCP=1 …`): instead, each binary behind its own MCP gateway stack
// (bench/bench_mcp.js: [mcp.bench] in front of the upstream without the SDK, alice signed
// in), and the rounds alternate tools/call through consentd at 32 connections and at 1.
// Each consentd started is checked to be the binary asked for (/proc/PID/exe).
// THREADS=a,b (`make bench-ab THREADS=16,4 …`): [server] threads for A and for B (default 0,
// the default of the build), so one binary can be compared with itself at two thread counts
// (with MCP=1 too).
// ROUTES=jwks,introspect,token (default jwks,token): which rows each round runs; introspect is
// POST /introspect over 10,000 distinct grants issued before the rounds, as `make bench` does.
// IDP=1: oidc-provider (bench/benchidp.mjs, as `make bench` runs it) takes a turn in every
// round too, on the same rows (its GET /jwks, its introspection of 10,000 distinct opaque
// tokens, its ES256 JWT client-credentials token), and the medians end with the ratios of
// each binary to it, in the same minutes.
// CONNECTIONS=n (default 32): wrk's connections (see below).
// Bounded: (2 + IDP) × rows × R × D seconds of wrk plus start-up; stops what it starts.
import { realpathSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { timed, median, issueMany } from './measure.js';
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
const { benchConfig, approvedConsent, DISTINCT } = await import('./bench.js');
const IDP = process.env.IDP === '1';
const { startBenchIdp } = IDP ? await import('./bench_idp.js') : {};
const ROUTES = (process.env.ROUTES || 'jwks,token').split(',');
if (ROUTES.some((r) => !['jwks', 'introspect', 'token'].includes(r))) {
  console.error('ROUTES: a list of jwks, introspect, token');
  process.exit(2);
}
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
// CONNECTIONS=n: wrk's connections for every row but MCP=1's single one (default 32, as
// `make bench`): whether a server is bound by its CPU or by its answers' latency shows as
// the rate at more connections.
const CONNECTIONS = Math.max(1, Number(process.env.CONNECTIONS || 32));
const w = wrkRunner({ threads: 2, connections: CONNECTIONS, duration: D });
const rowsOf = MCP ? ['mcp32', 'mcp1'] : ROUTES;
const names = { jwks: 'GET /.well-known/jwks.json', introspect: `POST /introspect (${DISTINCT} distinct grants)`, token: 'POST /token' };
try {
  for (const [i, bin] of bins.entries()) {
    process.env.TEST_CONSENTD_BIN = bin;
    if (MCP) {
      const m = await startMcpBench({ sdk: false, threads: THREADS[i] || 0 });
      stacks.push({ bin: THREADS[i] ? `${bin} (threads = ${THREADS[i]})` : bin, m, pid: m.pid, stop: () => m.stop(), rows: { mcp32: [], mcp1: [] } });
    } else {
      const config = await benchConfig();
      config.server.threads = THREADS[i] || 0;
      const s = await startStack({ config });
      const st = { bin: THREADS[i] ? `${bin} (threads = ${THREADS[i]})` : bin, s, c: await approvedConsent(s), pid: s.c.proc.pid, stop: () => s.stop(), rows: { jwks: [], introspect: [], token: [] } };
      stacks.push(st);
      const form = { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: st.c.auth };
      const at = (path) => `${s.url}${path}`;
      st.targets = { jwks: [at('/.well-known/jwks.json')], token: [at('/token'), w.script({ method: 'POST', body: st.c.tokenBody, headers: form })] };
      if (ROUTES.includes('introspect')) {
        const file = join(w.dir, `grants${i}.txt`);
        writeFileSync(file, `${(await issueMany(at('/token'), st.c.tokenBody, form, DISTINCT)).join('\n')}\n`);
        st.targets.introspect = [at('/introspect'), w.script({ method: 'POST', headers: form, bodies: { file, prefix: 'token=' } })];
      }
    }
    sameBinary(stacks[stacks.length - 1].pid, bin);
  }
  if (IDP) {
    const idp = await startBenchIdp(w);
    const at = (path) => `${idp.url}${path}`;
    stacks.push({ bin: 'oidc-provider', idp: true, pid: idp.p.pid, stop: () => idp.p.stop(), rows: { jwks: [], introspect: [], token: [] },
      targets: { jwks: [at('/jwks')], introspect: [at('/token/introspection'), w.script({ method: 'POST', headers: idp.form, bodies: { file: idp.file, prefix: 'token=' } })],
        token: [at('/token'), w.script({ method: 'POST', body: idp.cc('https://jwt.bench'), headers: idp.form })] } });
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
      for (const k of ROUTES) {
        st.rows[k].push(await timed(w, st.pid, `round ${r + 1} ${st.bin}: ${names[k]}`, ...st.targets[k]));
      }
    }
  }
  const m = (xs, k) => median(xs.map((x) => Number(x[k])));
  if (MCP) {
    console.log('\n| binary | tools/call c32 req/s | p50 | CPU/call | tools/call c1 req/s | p50 | p99 | CPU/call |\n| --- | --- | --- | --- | --- | --- | --- | --- |');
  } else {
    const head = { jwks: 'JWKS', introspect: `introspection (${DISTINCT} distinct)`, token: 'token' };
    console.log(`\n| binary | ${ROUTES.map((k) => `${head[k]} req/s | ${head[k]} CPU/req | written/req`).join(' | ')} |\n|${' --- |'.repeat(1 + 3 * ROUTES.length)}`);
  }
  const idpSt = stacks.find((st) => st.idp);
  for (const st of stacks) {
    if (!MCP) {
      console.log(`| ${st.bin} | ${ROUTES.map((k) => `${m(st.rows[k], 'rps').toFixed(0)} | ${m(st.rows[k], 'cpuMsPerReq').toFixed(4)} ms | ${m(st.rows[k], 'kbWrittenPerReq').toFixed(1)} KB`).join(' | ')} |`);
      continue;
    }
    const [a, b] = rowsOf.map((k) => st.rows[k]);
    console.log(`| ${st.bin} | ${m(a, 'rps').toFixed(0)} | ${m(a, 'p50ms').toFixed(2)} ms | ${m(a, 'cpuMsPerReq').toFixed(4)} ms `
      + `| ${m(b, 'rps').toFixed(0)} | ${m(b, 'p50ms').toFixed(2)} ms | ${m(b, 'p99ms').toFixed(2)} ms | ${m(b, 'cpuMsPerReq').toFixed(4)} ms |`);
  }
  if (idpSt) {
    for (const st of stacks.filter((x) => !x.idp)) {
      console.log(`${st.bin} / oidc-provider: ${ROUTES.map((k) => `${k} ${(m(st.rows[k], 'rps') / m(idpSt.rows[k], 'rps')).toFixed(2)}×`).join(', ')}`);
    }
  }
  console.log(`(medians of ${R} interleaved rounds, wrk -t2 -d${D}s)`);
} finally {
  for (const st of stacks) await st.stop();
  w.cleanup();
}
