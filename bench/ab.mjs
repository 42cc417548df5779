// ab.mjs -- `make bench-ab A=… B=…`: two consentd binaries side by side, interleaved.
// This machine's speed drifts by up to 2× within minutes, so a before/after comparison
// taken as two separate `make bench` runs says little.  Both binaries run at once, each
// with its own development IdP and an approved consent; wrk (-t2 -c32, D seconds) then
// alternates between them, R rounds of GET /.well-known/jwks.json and POST /token (a
// grant), so each pair of runs shares the same minutes.  Prints every round and the
// medians (req/s and the server's CPU per request, as `make bench` measures it).
// Bounded: 4 × R × D seconds of wrk plus start-up; stops what it starts.
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { timed, median } from './measure.js';
import { wrkRunner } from './wrk.js';
import { benchConfig, approvedConsent } from './bench.js';

const here = dirname(fileURLToPath(import.meta.url));
const { startStack } = await import(join(here, '..', 'tests', 'lib', 'stack.js'));
const bins = process.argv.slice(2);
if (bins.length !== 2) {
  console.error('usage: node bench/ab.mjs BINARY_A BINARY_B');
  process.exit(2);
}
const R = Math.max(1, Number(process.env.R || 5));
const D = Math.max(1, Number(process.env.D || 5));
const stacks = [];
const w = wrkRunner({ threads: 2, connections: 32, duration: D });
try {
  for (const bin of bins) {
    process.env.TEST_CONSENTD_BIN = bin;
    const s = await startStack({ config: await benchConfig() });
    stacks.push({ bin, s, c: await approvedConsent(s), rows: { jwks: [], token: [] } });
  }
  for (let r = 0; r < R; r += 1) {
    for (const st of stacks) {
      const form = { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: st.c.auth };
      const pid = st.s.c.proc.pid;
      st.rows.jwks.push(await timed(w, pid, `round ${r + 1} ${st.bin}: GET /.well-known/jwks.json`,
        `${st.s.url}/.well-known/jwks.json`));
      st.rows.token.push(await timed(w, pid, `round ${r + 1} ${st.bin}: POST /token`, `${st.s.url}/token`,
        w.script({ method: 'POST', body: st.c.tokenBody, headers: form })));
    }
  }
  console.log(`\n| binary | JWKS req/s | JWKS CPU/req | grant req/s | grant CPU/req |\n| --- | --- | --- | --- | --- |`);
  for (const st of stacks) {
    const m = (xs, k) => median(xs.map((x) => Number(x[k])));
    console.log(`| ${st.bin} | ${m(st.rows.jwks, 'rps').toFixed(0)} | ${m(st.rows.jwks, 'cpuMsPerReq').toFixed(4)} ms `
      + `| ${m(st.rows.token, 'rps').toFixed(0)} | ${m(st.rows.token, 'cpuMsPerReq').toFixed(4)} ms |`);
  }
  console.log(`(medians of ${R} interleaved rounds, wrk -t2 -c32 -d${D}s)`);
} finally {
  for (const { s } of stacks) await s.stop();
  w.cleanup();
}
