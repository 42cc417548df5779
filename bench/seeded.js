// seeded.js -- `make bench-seeded`: the cost of data size on the grant path.  One consentd
// database, approved over HTTP as in bench/bench.js, copied twice: A gets 1,000 seeded
// consents and 10,000 audit entries, B 1,000,000 consents and 10,000,000 audit entries
// (build/bench_seed: bulk inserts in one transaction, the audit entries linked into the
// chain, checked with `consentd audit verify`).  Then POST /token (the token exchange for
// alice's live consent) with wrk against A and B in turn, RUNS times, each consentd started
// fresh on its copy; the medians and B's rate as a share of A's (the target: ≥ 90 %).
// Bounded in time; stops everything it starts (by pid); removes the copies.
//   RUNS=3 DURATION=10 CONNECTIONS=32 SEED_CONSENTS=1000000 SEED_AUDIT=10000000 node bench/seeded.js
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, statSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { timed, median } from './measure.js';
import { wrkRunner } from './wrk.js';
import { approvedConsent, benchConfig } from './bench.js';

const here = dirname(fileURLToPath(import.meta.url));
const lib = (f) => import(join(here, '..', 'tests', 'lib', f));
const { startIdp, DEFAULT_CLIENTS } = await lib('idp.js');
const { startConsentd, consentdBin } = await lib('consentd.js');
const { getFreePort } = await lib('ports.js');
const { waitReady } = await lib('stack.js');

const RUNS = Math.max(1, Number(process.env.RUNS || 3));
const DURATION = Math.max(1, Number(process.env.DURATION || 10));
const CONNS = Math.max(1, Number(process.env.CONNECTIONS || 32));
const BIG_C = Number(process.env.SEED_CONSENTS || 1000000);
const BIG_A = Number(process.env.SEED_AUDIT || 10000000);
const SMALL_C = 1000;
const SMALL_A = 10000;

const limitS = 3600 + RUNS * 2 * (DURATION + 60);
setTimeout(() => { console.error(`bench-seeded: not done after ${limitS} s; stopping`); process.exit(3); }, limitS * 1000).unref();

function run(cmd, args) {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let so = '';
    let se = '';
    p.stdout.on('data', (c) => { so += c; });
    p.stderr.on('data', (c) => { se += c; });
    p.on('error', reject);
    p.on('close', (code) => {
      const secs = (performance.now() - t) / 1000;
      if (code !== 0) reject(new Error(`${cmd} ${args.join(' ')}: exit ${code}\n${so}${se}`));
      else resolve({ out: so.trim(), err: se.trim(), secs });
    });
  });
}
const dbBytes = (dir) => ['consentd.db', 'consentd.db-wal'].map((f) => join(dir, f))
  .filter(existsSync).reduce((n, f) => n + statSync(f).size, 0);

const port = await getFreePort();
const url = `http://127.0.0.1:${port}`;
const clients = DEFAULT_CLIENTS.map((x) => (x.client_id === 'consentd'
  ? { ...x, redirect_uris: [`${url}/callback`], post_logout_redirect_uris: [`${url}/`] } : x));
const idp = await startIdp({ clients });
const config = await benchConfig({ oidc: { issuer: idp.issuer } });
const copies = [];
let c;
try {
  // The consent, approved over HTTP on a database of its own.
  c = await startConsentd({ port, config, keepDir: true });
  await waitReady(url);
  const consent = await approvedConsent({ url, idp });
  await c.stop({ remove: false });
  const base = c.dir;
  c = null;

  const variants = [['A', SMALL_C, SMALL_A], ['B', BIG_C, BIG_A]].map(([name, nc, na]) => {
    const dir = mkdtempSync(join(tmpdir(), `consentd-seeded-${name}-`));
    copies.push(dir);
    cpSync(base, dir, { recursive: true });
    const ini = join(dir, 'config.ini');                 // its paths name the copy
    writeFileSync(ini, readFileSync(ini, 'utf8').split(base).join(dir));
    return { name, nc, na, dir, rows: [] };
  });
  rmSync(base, { recursive: true, force: true });
  for (const v of variants) {
    console.log(`# seeding ${v.name}: ${v.nc} consents, ${v.na} audit entries`);
    const s = await run(join(here, '..', 'build', 'bench_seed'),
      [join(v.dir, 'consentd.db'), join(v.dir, 'master.key'), idp.issuer, String(v.nc), String(v.na)]);
    v.counts = JSON.parse(s.out);
    v.seedSecs = s.secs;
    const vf = await run(consentdBin, ['audit', 'verify', '-c', join(v.dir, 'config.ini')]);
    const last = vf.out.split('\n').pop();
    console.log(`  consentd audit verify: ${last}`);
    v.verify = `${/ intact /.test(last) ? 'intact' : last}, ${vf.secs.toFixed(1)} s`;
    v.bytes = dbBytes(v.dir);
    console.log(`  ${JSON.stringify(v.counts)} in ${s.secs.toFixed(1)} s; ${(v.bytes / 1048576).toFixed(0)} MB; audit verify: ${v.verify}`);
  }

  const form = { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: consent.auth };
  for (let i = 1; i <= RUNS; i += 1) {
    for (const v of variants) {
      c = await startConsentd({ port, dir: v.dir, config, keepDir: true });
      await waitReady(url);
      const w = wrkRunner({ threads: 2, connections: CONNS, duration: DURATION });
      try {
        console.log(`# run ${i} of ${RUNS}: ${v.name}`);
        v.rows.push(await timed(w, c.proc.pid, `POST /token (${v.name})`, `${url}/token`,
          w.script({ method: 'POST', body: consent.tokenBody, headers: form })));
      } finally {
        w.cleanup();
        const st = await c.stop({ remove: false });
        c = null;
        if (st.code !== 0) throw new Error(`consentd exit ${st.code}`);
      }
    }
  }

  const m = (v, f) => median(v.rows.map(f));
  const [A, B] = variants;
  const fmt = (x) => Math.round(x).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ' ');
  const out = ['', `## \`make bench-seeded\` — ${new Date().toISOString().slice(0, 10)}`, '',
    `wrk -t2 -c${CONNS}, ${DURATION} s per run, the variants in turn, median of ${RUNS}; POST /token = the token exchange for one live consent.`, '',
    '| database | consents | audit entries | size | seeding | `audit verify` | POST /token req/s | p99 | CPU/req |',
    '|---|---|---|---|---|---|---|---|---|'];
  for (const v of variants) {
    out.push(`| ${v.name} | ${fmt(v.counts.consents)} | ${fmt(v.counts.audit)} | ${(v.bytes / 1048576).toFixed(0)} MB | `
      + `${v.seedSecs.toFixed(1)} s | ${v.verify} | ${fmt(m(v, (r) => Number(r.rps)))} | ${m(v, (r) => r.p99ms).toFixed(1)} ms | `
      + `${m(v, (r) => r.cpuMsPerReq).toFixed(3)} ms |`);
  }
  const share = m(B, (r) => Number(r.rps)) / m(A, (r) => Number(r.rps));
  out.push('', `B / A: ${(100 * share).toFixed(0)} % (target ≥ 90 %: ${share >= 0.9 ? 'met' : '**not met**'})`);
  console.log(out.join('\n'));
} finally {
  await c?.stop({ remove: false });
  await idp.stop();
  for (const d of copies) rmSync(d, { recursive: true, force: true });
}
