// bench.js -- consentd's side of `make bench` (bench/all.js): the real release binary, the
// development IdP, a consent approved over HTTP, then wrk against
//   GET /.well-known/jwks.json, GET /healthz,
//   POST /token (a grant for a live consent: subject-token check + ES256 sign + a DB write),
//     at the peak, then at about half the peak (its p99),
//   POST /introspect (ES256 verify + DB reads): one grant repeated, and 10,000 distinct grants
//     (issued by token exchange before the run) cycled through;
// and its memory: VmRSS idle after start, with 1,000 keep-alive connections held open, and
// VmHWM (the peak) at the end; the disk's fsync latency in the database's directory.
// Bounded in time (DURATION seconds per endpoint) and stops everything it starts.
// Alone: node bench/bench.js [DURATION] [CONNECTIONS]
import { writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  timed, procMem, holdConnections, issueMany, atFractionOfPeak, fsyncLatency,
} from './measure.js';
import { wrkRunner } from './wrk.js';

const here = dirname(fileURLToPath(import.meta.url));
process.env.TEST_CONSENTD_BIN ||= join(here, '..', 'build', 'consentd');
const lib = (f) => import(join(here, '..', 'tests', 'lib', f));

export const DISTINCT = 10000;
export const HELD = 1000;

// A consent approved over HTTP (as the tests do): -> { idToken, grant, tokenBody, auth }
export async function approvedConsent(s) {
  const { getIdToken, basicAuth } = await lib('idplogin.js');
  const { gateway } = await lib('gateway.js');
  const { consentdLogin, req, postForm } = await lib('weblogin.js');
  const { GATEWAY_APP } = await lib('fixtures.js');
  const gw = gateway({ url: s.url });
  const idToken = (await getIdToken({ issuer: s.idp.issuer, ...GATEWAY_APP, user: 'alice', password: 'alice-password' })).id_token;
  const ask = { subjectToken: idToken, audience: 'notes', scope: 'read', agentId: 'coder' };
  const first = await gw.exchange(ask);
  const { jar } = await consentdLogin({ url: s.url, user: 'alice', password: 'alice-password' });
  const page = await (await req(jar, first.body.consent_uri)).text();
  const form = postForm(page);
  const dur = page.match(/<option value="(\d+)"/)[1];
  const post = await req(jar, new URL(form.action, s.url).href, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: s.url },
    body: new URLSearchParams({ ...form.fields, decision: 'approve', duration: dur }).toString(),
  });
  if (post.status !== 200) throw new Error(`approval failed: ${post.status}`);
  await new Promise((r) => { setTimeout(r, 1100); });
  const grant = await gw.exchange(ask);
  if (grant.status !== 200) throw new Error(`no grant: ${JSON.stringify(grant.body)}`);
  const tokenBody = new URLSearchParams({
    grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange', subject_token: idToken,
    subject_token_type: 'urn:ietf:params:oauth:token-type:id_token', audience: 'notes', scope: 'read', agent_id: 'coder',
  }).toString();
  return { idToken, grant: grant.body.access_token, tokenBody, auth: basicAuth('agent-gateway', 'gateway-dev-secret') };
}

// consentd's bench config: [limits] gateway_rate off (the bench measures consentd, not its
// rate limit); per_ip_connections above the 1,000 held connections (all come from 127.0.0.1);
// threads = 0, the default (eight workers per core).
export async function benchConfig(extra = {}) {
  const { consentConfig } = await lib('fixtures.js');
  return { ...consentConfig(), server: { log: '/dev/null', threads: 0, per_ip_connections: HELD + 100 },
    limits: { gateway_rate: 0 }, ...extra };
}

export async function measureConsentd({ duration = 10, connections = 32, fsyncN = 1000 } = {}) {
  const { startStack } = await lib('stack.js');
  const s = await startStack({ config: await benchConfig() });
  const w = wrkRunner({ threads: 2, connections, duration });
  const pid = s.c.proc.pid;
  const out = { rows: {}, mem: {} };
  try {
    await new Promise((r) => { setTimeout(r, 500); });
    out.mem.idleMB = procMem(pid).rssMB;
    const held = await holdConnections(s.url, HELD);
    await new Promise((r) => { setTimeout(r, 200); });
    out.mem.heldMB = procMem(pid).rssMB;
    out.mem.held = held.opened;
    held.close();
    console.log(`  consentd RSS: ${out.mem.idleMB.toFixed(1)} MB idle, ${out.mem.heldMB.toFixed(1)} MB with ${held.opened} keep-alive connections`);

    const c = await approvedConsent(s);
    const form = { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: c.auth };
    const lua = (body) => w.script({ method: 'POST', body, headers: form });

    // 10,000 distinct grants; a few introspected by hand first (all must be active).
    const grants = await issueMany(`${s.url}/token`, c.tokenBody, form, DISTINCT);
    const grantsFile = join(w.dir, 'grants.txt');
    writeFileSync(grantsFile, `${grants.join('\n')}\n`);
    for (const g of [c.grant, grants[0], grants[DISTINCT - 1]]) {
      const j = await (await fetch(`${s.url}/introspect`, { method: 'POST', headers: form, body: `token=${g}` })).json();
      if (j.active !== true) throw new Error(`introspect: ${JSON.stringify(j)}`);
    }

    out.rows.jwks = await timed(w, pid, 'GET /.well-known/jwks.json', `${s.url}/.well-known/jwks.json`);
    out.rows.healthz = await timed(w, pid, 'GET /healthz', `${s.url}/healthz`);
    out.rows.token = await timed(w, pid, 'POST /token (grant issued)', `${s.url}/token`, lua(c.tokenBody));
    out.rows.intro = await timed(w, pid, 'POST /introspect (one grant, repeated)', `${s.url}/introspect`, lua(`token=${c.grant}`));
    out.rows.intro10k = await timed(w, pid, `POST /introspect (${DISTINCT} distinct grants)`, `${s.url}/introspect`,
      w.script({ method: 'POST', headers: form, bodies: { file: grantsFile, prefix: 'token=' } }));
    out.rows.tokenHalf = await atFractionOfPeak(w, pid, 'POST /token at half the peak', `${s.url}/token`,
      { method: 'POST', body: c.tokenBody, headers: form }, Number(out.rows.token.rps));
    out.mem.peakMB = procMem(pid).hwmMB;
    out.fsync = await fsyncLatency(s.c.dir, fsyncN);
    console.log(`  fsync (4 KiB + fdatasync, ${out.fsync.n}x in ${s.c.dir}): median ${out.fsync.medianUs} µs, p99 ${out.fsync.p99Us} µs`);
    return out;
  } finally {
    await s.stop();
    w.cleanup();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const r = await measureConsentd({ duration: Number(process.argv[2] || 10), connections: Number(process.argv[3] || 32) });
  console.log(JSON.stringify({ ...r, rows: Object.fromEntries(Object.entries(r.rows).map(([k, v]) => [k, { ...v, out: undefined }])) }, null, 1));
}
