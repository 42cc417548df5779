// gateway_rate.mjs -- what `[limits] gateway_rate` buys (issue 34): one consentd per setting in
// RATES (default "0,1000"; 0 = the class off), each flooded by the gateway (wrk -t2 -c32, D s)
// on POST /token and then POST /introspect, while a person's page (GET /login, 10 a second,
// under the address class's 20) is timed beside the flood.  Prints per setting and endpoint:
// answers/s that were 200 and that were 429, consentd's CPU (cores busy), and the page's
// p50 / p99.  Bounded: 2 × D s of wrk per setting plus start-up; stops what it starts.
//   cd tests && RATES=0,1000 D=8 node ../bench/gateway_rate.mjs
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { procCpu, median } from './measure.js';
import { wrkRunner } from './wrk.js';

const here = dirname(fileURLToPath(import.meta.url));
process.env.TEST_CONSENTD_BIN ||= join(here, '..', 'build', 'consentd');
const { benchConfig, approvedConsent } = await import('./bench.js');
const { startStack } = await import(join(here, '..', 'tests', 'lib', 'stack.js'));
const RATES = (process.env.RATES || '0,1000').split(',').map(Number);
const D = Math.max(2, Number(process.env.D || 8));

// GET /login every 100 ms while `busy` runs: the latencies (ms) of the answers.
async function probe(url, busy) {
  const lat = [];
  let stop = false;
  const loop = (async () => {
    while (!stop) {
      const t0 = performance.now();
      const r = await fetch(`${url}/login`, { redirect: 'manual' });
      await r.arrayBuffer();
      if (r.status < 500 && r.status !== 429) lat.push(performance.now() - t0);
      await new Promise((res) => { setTimeout(res, 100); });
    }
  })();
  const out = await busy;
  stop = true;
  await loop;
  lat.sort((a, b) => a - b);
  return { out, n: lat.length, p50: median(lat), p99: lat[Math.min(lat.length - 1, Math.floor(lat.length * 0.99))] };
}

const w = wrkRunner({ threads: 2, connections: 32, duration: D });
const rows = [];
try {
  for (const rate of RATES) {
    const config = await benchConfig();
    config.limits = { gateway_rate: rate };
    const s = await startStack({ config });
    try {
      const c = await approvedConsent(s);
      const form = { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: c.auth };
      const pid = s.c.proc.pid;
      const idle = await probe(s.url, new Promise((r) => { setTimeout(r, 2000); }));
      rows.push({ rate, what: 'no flood', page: idle });
      for (const [what, path, body] of [['POST /token', '/token', c.tokenBody], ['POST /introspect', '/introspect', `token=${c.grant}`]]) {
        await new Promise((r) => { setTimeout(r, 1500); });     // the bucket refills
        const c0 = procCpu(pid);
        const t0 = performance.now();
        const p = await probe(s.url, w.run(`${what} at gateway_rate ${rate}`, `${s.url}${path}`,
          w.script({ method: 'POST', body, headers: form })));
        const secs = (performance.now() - t0) / 1000;
        const r = p.out;
        const refused = Number(r.non2xx);
        rows.push({ rate, what, ok: (r.requests - refused) / D, refused: refused / D, cores: (procCpu(pid) - c0) / secs, page: p });
        console.log(`  gateway_rate ${rate}, ${what}: ${((r.requests - refused) / D).toFixed(0)} 200/s, ${(refused / D).toFixed(0)} 429/s, `
          + `consentd ${((procCpu(pid) - c0) / secs).toFixed(2)} cores; GET /login p50 ${p.p50.toFixed(1)} ms, p99 ${p.p99.toFixed(1)} ms (${p.n})`);
      }
    } finally {
      await s.stop();
    }
  }
  console.log('\n| gateway_rate | flood | 200/s | 429/s | consentd cores | GET /login p50 | p99 |\n|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(`| ${r.rate} | ${r.what} | ${r.ok === undefined ? '' : r.ok.toFixed(0)} | ${r.refused === undefined ? '' : r.refused.toFixed(0)} `
      + `| ${r.cores === undefined ? '' : r.cores.toFixed(2)} | ${r.page.p50.toFixed(1)} ms | ${r.page.p99.toFixed(1)} ms |`);
  }
} finally {
  w.cleanup();
}
