// bench_idp.js -- oidc-provider's side of `make bench` (bench/all.js): bench/benchidp.mjs (the
// development IdP's software, oidc-provider 8, with client_credentials and resource
// indicators) in its own process, then wrk with the same settings as consentd's side:
//   GET /jwks;
//   POST /token client_credentials, resource https://jwt.bench (an ES256 JWT access token);
//   POST /token/introspection: one opaque token repeated, and 10,000 distinct opaque tokens
//     (oidc-provider introspects only the tokens it stores; its JWT access tokens answer
//     {"active": false}, so its introspection is measured with its opaque ones);
// its memory: VmRSS idle after start and VmHWM (the peak) at the end.
// Bounded in time and stops the IdP it starts (by pid).
// Alone: node bench/bench_idp.js [DURATION] [CONNECTIONS]
import { writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { timed, procMem, issueMany } from './measure.js';
import { wrkRunner } from './wrk.js';
import { DISTINCT } from './bench.js';

const here = dirname(fileURLToPath(import.meta.url));
const { startProcess } = await import(join(here, '..', 'tests', 'lib', 'proc.js'));

// The IdP started, its 10,000 opaque tokens issued and three of them checked; for
// measureIdp and `make bench-ab IDP=1` (bench/ab.mjs): -> { p, url, form, cc, one, file }.
// The caller stops p.
export async function startBenchIdp(w) {
  const p = await startProcess(process.execPath, [join(here, 'benchidp.mjs')], {
    name: 'benchidp', ready: /^READY (http:\/\/\S+)$/,
  });
  try {
    return { p, ...await idpTargets(p.readyMatch[1], w) };
  } catch (err) {
    await p.stop();
    throw err;
  }
}

async function idpTargets(url, w) {
  const form = {
    'Content-Type': 'application/x-www-form-urlencoded',
    Authorization: `Basic ${Buffer.from('bench-rs:bench-rs-secret').toString('base64')}`,
  };
  const cc = (resource) => `grant_type=client_credentials&scope=read&resource=${encodeURIComponent(resource)}`;
  const opaque = await issueMany(`${url}/token`, cc('https://opaque.bench'), form, DISTINCT + 1);
  const one = opaque.pop();
  const file = join(w.dir, 'opaque.txt');
  writeFileSync(file, `${opaque.join('\n')}\n`);
  for (const t of [one, opaque[0], opaque[DISTINCT - 1]]) {
    const j = await (await fetch(`${url}/token/introspection`, { method: 'POST', headers: form, body: `token=${t}` })).json();
    if (j.active !== true) throw new Error(`idp introspection: ${JSON.stringify(j)}`);
  }
  return { url, form, cc, one, file };
}

export async function measureIdp({ duration = 10, connections = 32 } = {}) {
  const p = await startProcess(process.execPath, [join(here, 'benchidp.mjs')], {
    name: 'benchidp', ready: /^READY (http:\/\/\S+)$/,
  });
  const url = p.readyMatch[1];
  const w = wrkRunner({ threads: 2, connections, duration });
  const out = { rows: {}, mem: {} };
  try {
    await new Promise((r) => { setTimeout(r, 500); });
    out.mem.idleMB = procMem(p.pid).rssMB;
    const form = {
      'Content-Type': 'application/x-www-form-urlencoded',
      Authorization: `Basic ${Buffer.from('bench-rs:bench-rs-secret').toString('base64')}`,
    };
    const cc = (resource) => `grant_type=client_credentials&scope=read&resource=${encodeURIComponent(resource)}`;
    const jwt = await issueMany(`${url}/token`, cc('https://jwt.bench'), form, 1, 1);
    if (!/^eyJ[\w-]+\.[\w-]+\.[\w-]+$/.test(jwt[0])) throw new Error(`not a JWT: ${jwt[0]}`);
    const header = JSON.parse(Buffer.from(jwt[0].split('.')[0], 'base64url'));
    if (header.alg !== 'ES256') throw new Error(`JWT alg ${header.alg}`);
    const { one, file } = await idpTargets(url, w);
    const lua = (body) => w.script({ method: 'POST', body, headers: form });
    out.rows.jwks = await timed(w, p.pid, 'IdP GET /jwks', `${url}/jwks`);
    out.rows.token = await timed(w, p.pid, 'IdP POST /token (client_credentials, ES256 JWT)', `${url}/token`, lua(cc('https://jwt.bench')));
    out.rows.intro = await timed(w, p.pid, 'IdP POST /token/introspection (one token, repeated)', `${url}/token/introspection`, lua(`token=${one}`));
    out.rows.intro10k = await timed(w, p.pid, `IdP POST /token/introspection (${DISTINCT} distinct tokens)`, `${url}/token/introspection`,
      w.script({ method: 'POST', headers: form, bodies: { file, prefix: 'token=' } }));
    out.mem.peakMB = procMem(p.pid).hwmMB;
    console.log(`  IdP RSS: ${out.mem.idleMB.toFixed(1)} MB idle, peak ${out.mem.peakMB.toFixed(1)} MB`);
    return out;
  } finally {
    await p.stop();
    w.cleanup();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const r = await measureIdp({ duration: Number(process.argv[2] || 10), connections: Number(process.argv[3] || 32) });
  console.log(JSON.stringify(r.mem));
}
