// bench.js -- measures consentd on loopback with wrk: the real release binary,
// the development IdP, a consent approved over HTTP, then wrk against
//   GET /.well-known/jwks.json, GET /healthz,
//   POST /token (a grant for a live consent: subject-token check + ES256 sign + a DB write),
//   POST /introspect (ES256 verify + DB reads).
// Bounded in time (DURATION seconds per endpoint) and stops everything it starts.
// Usage: node bench/bench.js [DURATION] [CONNECTIONS]  (make bench runs it)
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
process.env.TEST_CONSENTD_BIN ||= join(here, '..', 'build', 'consentd');
const lib = (f) => import(join(here, '..', 'tests', 'lib', f));
const { startStack } = await lib('stack.js');
const { getIdToken, basicAuth } = await lib('idplogin.js');
const { gateway } = await lib('gateway.js');
const { consentdLogin, req, postForm } = await lib('weblogin.js');
const { consentConfig, GATEWAY_APP } = await lib('fixtures.js');
const { wrkRunner } = await import(join(here, 'wrk.js'));

const DURATION = Number(process.argv[2] || 10);
const CONNS = Number(process.argv[3] || 16);
// [limits] gateway_rate off: the bench measures consentd, not its rate limit.
const s = await startStack({ config: { ...consentConfig(), server: { log: '/dev/null', threads: 2 },
  limits: { gateway_rate: 0 } } });
const w = wrkRunner({ threads: 2, connections: CONNS, duration: DURATION });
try {
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

  const auth = basicAuth('agent-gateway', 'gateway-dev-secret');
  const tokenBody = new URLSearchParams({
    grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange', subject_token: idToken,
    subject_token_type: 'urn:ietf:params:oauth:token-type:id_token', audience: 'notes', scope: 'read', agent_id: 'coder',
  }).toString();
  const introBody = new URLSearchParams({ token: grant.body.access_token }).toString();
  const lua = (body) => w.script({
    method: 'POST', body,
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: auth },
  });
  const cases = [
    ['GET /.well-known/jwks.json', ['/.well-known/jwks.json']],
    ['GET /healthz', ['/healthz']],
    ['POST /token (grant issued)', ['/token', lua(tokenBody)]],
    ['POST /introspect (active grant)', ['/introspect', lua(introBody)]],
  ];
  const rows = [];
  for (const [name, [path, script]] of cases) {
    const r = await w.run(name, `${s.url}${path}`, script);
    rows.push(r);
    console.log(`${name}: ${r.rps} req/s, p50 ${r.p50}, p99 ${r.p99}, non-2xx ${r.non2xx}`);
  }
  console.log(`\n${w.table(rows)}`);
  console.log(`\n(${CONNS} connections, 2 wrk threads, ${DURATION} s each, consentd threads = 2, loopback, ${new Date().toISOString()})`);
} finally {
  await s.stop();
  w.cleanup();
}
