// Revocation events (flow G) against the real binary: a person revokes on /me,
// consentd pushes a Security Event Token (RFC 8417, RFC 8935) to [gateway]
// events_uri -- a webhook receiver here on 127.0.0.1 that verifies each SET with
// consentd's JWKS (ES256, typ secevent+jwt, issuer, audience) and answers 202.
// With the receiver down the event waits in the outbox, across a restart of
// consentd, and arrives once the receiver is back; every event exactly once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { startStack, waitNodesReady } from '../lib/stack.js';
import { startConsentd } from '../lib/consentd.js';
import { getIdToken } from '../lib/idplogin.js';
import { consentdLogin, req, postForm, revokeOnMe } from '../lib/weblogin.js';
import { gateway } from '../lib/gateway.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';
import { getFreePort } from '../lib/ports.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const EVENT = 'urn:consentd:event:consent-revoked';

// A webhook receiver on port: verifies each SET against consentd's JWKS and
// answers 202 (400 with an RFC 8935 error when it does not verify).
async function startReceiver({ port, consentdUrl }) {
  const jwks = createRemoteJWKSet(new URL(`${consentdUrl}/.well-known/jwks.json`));
  const got = [];           // { header, payload } of every verified SET, in order
  const refused = [];       // why a POST was refused
  const server = createServer((rq, rs) => {
    const chunks = [];
    rq.on('data', (c) => chunks.push(c));
    rq.on('end', async () => {
      const body = Buffer.concat(chunks).toString('utf8');
      try {
        assert.equal(rq.method, 'POST');
        assert.equal(rq.headers['content-type'], 'application/secevent+jwt');
        assert.equal(rq.headers.accept, 'application/json');
        const { payload, protectedHeader } = await jwtVerify(body, jwks, {
          algorithms: ['ES256'], typ: 'secevent+jwt', issuer: consentdUrl, audience: 'agent-gateway',
        });
        got.push({ header: protectedHeader, payload });
        rs.writeHead(202).end();
      } catch (e) {
        refused.push(String(e?.message || e));
        rs.writeHead(400, { 'content-type': 'application/json' })
          .end(JSON.stringify({ err: 'invalid_request', description: 'SET did not verify' }));
      }
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host: '127.0.0.1' }, resolve);
  });
  return {
    got, refused,
    stop: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }),
  };
}

// Rows from the live database of consentd c, either backend (tests/lib/consentd.js).
function sql(c, query) {
  return c.rows(query);
}

// The IdP subject of the person who gave consent cid.
function subjectOf(c, cid) {
  return sql(c, `SELECT u.subject FROM consents k JOIN users u ON u.id = k.user_id WHERE k.id = '${cid}'`)[0].subject;
}

// alice approves coder on notes over HTTP (the gateway asks, she approves in her
// browser session) and then revokes it on /me.  Returns the consent id.
async function approveThenRevoke(s, jar) {
  const gw = gateway({ url: s.url });
  const { id_token: subjectToken } = await getIdToken({
    issuer: s.idp.issuer, ...GATEWAY_APP, user: 'alice', password: 'alice-password',
  });
  const ask = { subjectToken, agentId: 'coder', audience: 'notes', scope: 'read' };
  const first = await gw.exchange(ask);
  assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
  const pageRes = await req(jar, first.body.consent_uri);
  const page = await pageRes.text();
  assert.equal(pageRes.status, 200, page.slice(0, 300));
  const form = postForm(page);
  const fields = { csrf: form.fields.csrf, version: form.fields.version, decision: 'approve', duration: (page.match(/<option value="(\d+)"/) || [])[1] };
  for (const name of Object.keys(form.fields)) if (/^s\d+$/.test(name)) fields[name] = 'on';
  const done = await req(jar, first.body.consent_uri, {
    method: 'POST', body: new URLSearchParams(fields).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: s.url },
  });
  assert.equal(done.status, 200, (await done.text()).slice(0, 300));
  const granted = await gw.exchange(ask);
  assert.equal(granted.status, 200, JSON.stringify(granted.body));
  const cid = JSON.parse(Buffer.from(granted.body.access_token.split('.')[1], 'base64url')).cid;
  assert.ok(cid);

  // The person revokes on /me, through its confirmation page.
  const rv = await revokeOnMe({ url: s.url, jar, cid });
  assert.equal(rv.status, 303, 'revoked');
  assert.equal(sql(s.c, `SELECT revoked_at FROM consents WHERE id = '${cid}'`)[0].revoked_at > 0, true);
  return cid;
}

async function waitFor(what, fn, ms) {
  for (let t = 0; t < ms; t += 200) {
    const v = await fn();
    if (v) return v;
    await sleep(200);
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

// Checks one received SET for consent cid of alice.
function checkSet(ev, { cid, issuer, consentdUrl, subject }) {
  assert.equal(ev.header.typ, 'secevent+jwt');
  assert.equal(ev.header.alg, 'ES256');
  assert.ok(ev.header.kid);
  const p = ev.payload;
  assert.deepEqual(Object.keys(p).sort(), ['aud', 'events', 'iat', 'iss', 'jti', 'sub_id', 'toe']);
  assert.equal(p.exp, undefined, 'a SET has no exp');
  assert.equal(p.iss, consentdUrl);
  assert.equal(p.aud, 'agent-gateway');
  assert.match(p.jti, /^[0-9a-f]{32}$/);
  assert.deepEqual(p.sub_id, { format: 'iss_sub', iss: issuer, sub: subject });
  assert.deepEqual(Object.keys(p.events), [EVENT]);
  const e = p.events[EVENT];
  assert.deepEqual(Object.keys(e).sort(), ['agent_id', 'cid', 'reason', 'resource']);
  assert.equal(e.cid, cid);
  assert.equal(e.agent_id, 'coder');
  assert.equal(e.resource, 'urn:consentd:resource:notes');
  assert.equal(typeof e.reason, 'string');
  assert.ok(p.toe <= p.iat);
}

test('a revocation on /me arrives at the receiver as a verified SET within 10 s, once', async () => {
  const rport = await getFreePort();
  const s = await startStack({
    config: consentConfig({ gateway: { events_uri: `http://127.0.0.1:${rport}/events` } }),
  });
  let rcv;
  try {
    rcv = await startReceiver({ port: rport, consentdUrl: s.url });
    const { jar, final } = await consentdLogin({ url: s.url, user: 'alice', password: 'alice-password' });
    assert.equal(final.status, 303);
    const t0 = Date.now();
    const cid = await approveThenRevoke(s, jar);
    const subject = subjectOf(s.c, cid);
    await waitFor('the SET', () => rcv.got.length >= 1, 10000);
    assert.ok(Date.now() - t0 < 15000);
    assert.deepEqual(rcv.refused, []);
    checkSet(rcv.got[0], { cid, issuer: s.idp.issuer, consentdUrl: s.url, subject });
    // The receiver has the SET before consentd has read its 202 and marked the row.
    const rowOf = () => sql(s.c, `SELECT jti, attempts, delivered_at, last_status FROM events_outbox WHERE consent_id = '${cid}'`);
    await waitFor('the outbox row marked delivered', () => rowOf()[0]?.delivered_at > 0, 5000);
    const row = rowOf();
    assert.equal(row.length, 1);
    assert.equal(row[0].jti, rcv.got[0].payload.jti);
    assert.ok(row[0].delivered_at > 0);
    assert.equal(row[0].last_status, 202);
    assert.equal(sql(s.c, "SELECT count(*) AS n FROM audit WHERE action = 'event.delivered'")[0].n, 1);
    // Nothing more comes.
    await sleep(4500);
    assert.equal(rcv.got.length, 1);
  } finally {
    await rcv?.stop();
    await s.stop();
  }
});

test('receiver down: the event waits in the outbox, survives a restart of consentd, and arrives once when the receiver is back', async () => {
  const rport = await getFreePort();
  const config = consentConfig({ gateway: { events_uri: `http://127.0.0.1:${rport}/events` } });
  const s = await startStack({ config });
  let c2;
  let rcv;
  try {
    const { jar, final } = await consentdLogin({ url: s.url, user: 'alice', password: 'alice-password' });
    assert.equal(final.status, 303);
    const cid = await approveThenRevoke(s, jar);
    // consentd tries, fails and schedules a retry; nothing is delivered.
    const tried = await waitFor('a failed attempt', () => {
      const r = sql(s.c, `SELECT attempts, delivered_at, last_status, last_error FROM events_outbox WHERE consent_id = '${cid}'`);
      return r.length === 1 && r[0].attempts >= 1 ? r[0] : null;
    }, 10000);
    assert.equal(tried.delivered_at, 0);
    assert.equal(tried.last_status, 0);
    assert.match(tried.last_error, /no answer/);

    // Stop consentd (every node), keep its directory; start it again on the same port and database.
    const st = await s.c.stop({ remove: false });
    assert.equal(st.code, 0, s.c.proc.stderr.slice(-2000));
    c2 = await startConsentd({ dir: s.c.dir, port: s.c.port, keepDir: true,
      config: { ...config, oidc: { issuer: s.idp.issuer }, database: s.c.config.database } });
    await waitNodesReady(c2);
    assert.equal(sql(c2, `SELECT delivered_at FROM events_outbox WHERE consent_id = '${cid}'`)[0].delivered_at, 0);

    // The receiver comes back: the event arrives (the retry delay doubles from 5 s).
    rcv = await startReceiver({ port: rport, consentdUrl: c2.url });
    await waitFor('the SET after the restart', () => rcv.got.length >= 1, 30000);
    assert.deepEqual(rcv.refused, []);
    const subject = subjectOf(c2, cid);
    checkSet(rcv.got[0], { cid, issuer: s.idp.issuer, consentdUrl: c2.url, subject });
    await waitFor('the outbox row marked delivered', () => sql(c2,
      `SELECT delivered_at FROM events_outbox WHERE consent_id = '${cid}'`)[0]?.delivered_at > 0, 5000);
    const row = sql(c2, `SELECT jti, attempts, delivered_at FROM events_outbox WHERE consent_id = '${cid}'`);
    assert.equal(row.length, 1);
    assert.equal(row[0].jti, rcv.got[0].payload.jti);
    assert.ok(row[0].attempts >= 2);
    assert.ok(row[0].delivered_at > 0);
    // Exactly once: no second delivery, one jti per revocation.
    await sleep(4500);
    assert.equal(rcv.got.length, 1);
    assert.equal(new Set(rcv.got.map((g) => g.payload.jti)).size, 1);
    assert.equal(sql(c2, 'SELECT count(*) AS n FROM events_outbox')[0].n, 1);
  } finally {
    await rcv?.stop();
    if (c2) {
      const st2 = await c2.stop({ remove: true });
      assert.equal(st2.code, 0, `consentd exit: ${c2.proc.stderr.slice(-2000)}`);
      await s.idp.stop();
    } else {
      await s.stop();
    }
  }
});
