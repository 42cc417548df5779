// Bulk revocation of a person through the admin API (POST /admin/api/revocations) with
// everything a person can have live at once, against the real binary, the real login IdP,
// the downstream IdP as the provider ("GitHub") and the downstream API:
//   - alice: an offline consent on notes (agent butler, no provider) with a grant and a
//     refresh token; a github consent (agent coder) with a vault connection and a released
//     provider token; a pending approval of an approval-required github action on it;
//   - bob: a live consent that must stay untouched.
// The webhook receiver ([gateway] events_uri, a real HTTP listener on 127.0.0.1 that
// verifies each SET with consentd's JWKS) is DOWN while alice is revoked.  Then: every
// grant and refresh token inactive, the release refused, the approval cancelled, the vault
// row gone and the provider's refresh token revoked (its access token dead too), bob's
// grant alive.  consentd is restarted on the same directory, the receiver comes up, and
// exactly one verified SET per revoked consent arrives, once.  Repeating the bulk revoke
// revokes 0 and sends nothing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { spawnSync } from 'node:child_process';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { startVaultStack, signedInJars } from '../lib/vaultstack.js';
import { startConsentd, consentdBin } from '../lib/consentd.js';
import { waitNodesReady } from '../lib/stack.js';
import { getFreePort } from '../lib/ports.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const EVENT = 'urn:consentd:event:consent-revoked';

const details = (params, action = 'create_issue') => JSON.stringify([{ type: 'agent_action', action, parameters: params }]);

// A webhook receiver on port: verifies each SET against consentd's JWKS and answers 202
// (400 with an RFC 8935 error when it does not verify).
async function startReceiver({ port, consentdUrl }) {
  const jwks = createRemoteJWKSet(new URL(`${consentdUrl}/.well-known/jwks.json`));
  const got = [];
  const refused = [];
  const server = createServer((rq, rs) => {
    const chunks = [];
    rq.on('data', (c) => chunks.push(c));
    rq.on('end', async () => {
      const body = Buffer.concat(chunks).toString('utf8');
      try {
        assert.equal(rq.method, 'POST');
        assert.equal(rq.headers['content-type'], 'application/secevent+jwt');
        const { payload, protectedHeader } = await jwtVerify(body, jwks, {
          algorithms: ['ES256'], typ: 'secevent+jwt', issuer: consentdUrl, audience: 'agent-gateway',
        });
        got.push({ header: protectedHeader, payload, at: Date.now() });
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

async function waitFor(what, fn, ms) {
  for (const t0 = Date.now(); Date.now() - t0 < ms;) {
    const x = await fn();
    if (x) return x;
    await sleep(200);
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

let v; let rport; let config; let c2; let rcv; let admin;
const signedIn = signedInJars();

before(async () => {
  rport = await getFreePort();
  v = await startVaultStack({
    accessTokenTTL: 60,
    config: {
      gateway: { events_uri: `http://127.0.0.1:${rport}/events` },
      'action.github.create_issue': { description: 'Open an issue', scope: 'issues:write', approval: 'required',
    approval_enforced_by: 'gateway' },  // the gateway holds the released token to the call (#32)
    },
  });
  // The whole configuration consentd was started with (to start it again the same way).
  config = v.c.config;
  const r = spawnSync(consentdBin, ['admin', 'token', 'create', '--name', 'ops', '-c', v.c.cfgPath], {
    encoding: 'utf8', env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1' },
  });
  assert.equal(r.status, 0, r.stderr);
  admin = r.stdout.trim();
  assert.match(admin, /^[A-Za-z0-9_-]{43}$/);
});

after(async () => {
  await rcv?.stop();
  if (c2) {
    const st2 = await c2.stop({ remove: false });
    await v.stop(); // the first process has exited already; removes the directory and the rest
    assert.equal(st2.code, 0, `restarted consentd exit: ${c2.proc.stderr.slice(-3000)}`);
  } else {
    await v?.stop();
  }
});

const jarOf = (user) => signedIn(v.url, user);

// A consent decided on consentd's own page (no provider to visit): 200, "Permission given".
function decidedHere(a) {
  assert.equal(a.status, 200, `consent decision: ${a.status} ${a.text.slice(0, 300)}`);
  assert.match(a.text, /Permission given/);
}

// The person approves (and connects at the provider where the resource has one); the
// gateway then gets the grant.  -> { grant, refresh, cid, body }
async function connect({ user, agent, audience, scope, offline = false }) {
  const jar = await jarOf(user);
  const subjectToken = await v.idToken(user);
  const ask = { subjectToken, audience, scope, agentId: agent };
  const g = await v.consentAndGrant({ jar, user, ask, offline, approved: decidedHere });
  const { payload } = await v.gw.verify(g.body.access_token);
  assert.ok(payload.cid);
  return { grant: g.body.access_token, refresh: g.body.refresh_token, cid: payload.cid, body: g.body };
}

async function adminApi(method, path, body) {
  const res = await fetch(`${v.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body: json, text };
}

const revocationsFor = (dsGrant) => v.dsLog().filter((e) => e.what === 'REVOKE' && e.grant === dsGrant);

let notes; let gh; let bob; let released; let dsGrant; let approvalId;

test('alice: an offline notes consent, a github vault consent with a released token, a pending approval; bob: a live consent', async () => {
  notes = await connect({ user: 'alice', agent: 'butler', audience: 'notes', scope: 'read write', offline: true });
  assert.ok(notes.refresh, 'the offline consent gives a refresh token');
  gh = await connect({ user: 'alice', agent: 'coder', audience: 'github', scope: 'issues:read issues:write' });
  assert.notEqual(gh.cid, notes.cid);
  bob = await connect({ user: 'bob', agent: 'coder', audience: 'notes', scope: 'read' });

  // The vault connection and a released provider token that works downstream.
  assert.equal(v.sql(`SELECT count(*) FROM vault_records WHERE consent_id = '${gh.cid}'`), '1');
  const r = await v.release(gh.grant, 'list_issues');
  assert.equal(r.status, 200, r.text);
  released = r.body.access_token;
  assert.ok(released);
  const di = await v.dsIntrospect(released);
  assert.equal(di.active, true);
  dsGrant = di.grant_id;
  assert.ok(dsGrant, 'the provider names its grant');
  assert.equal((await v.callApi(released)).status, 200);

  // A pending approval of an approval-required action on the github consent.
  const ap = await v.release(gh.grant, 'create_issue', { authorization_details: details({ repo: 'acme/widgets', title: 'x' }) });
  assert.equal(ap.status, 400, ap.text);
  assert.equal(ap.body?.error, 'approval_required', ap.text);
  approvalId = ap.body.approval_request_id;
  assert.equal(v.sql(`SELECT status || '|' || consent_id FROM approvals WHERE id = '${approvalId}'`), `pending|${gh.cid}`);

  for (const t of [notes.grant, notes.refresh, gh.grant, bob.grant]) {
    assert.equal((await v.gw.introspect(t)).body?.active, true);
  }
  assert.equal(v.sql('SELECT count(*) FROM events_outbox'), '0', 'no event yet');
});

test('receiver down: bulk revoke of alice -> everything inactive, approval cancelled, provider revocation observed; bob untouched', async () => {
  assert.ok(gh && notes && bob, 'the previous test set up the grants');
  const r = await adminApi('POST', '/admin/api/revocations', { user: 'alice', reason: 'offboarding' });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.body, { revoked: 2 }, "alice's two live consents");

  // consentd's own tokens.
  for (const [label, t] of [['notes grant', notes.grant], ['notes refresh token', notes.refresh], ['github grant', gh.grant]]) {
    assert.deepEqual((await v.gw.introspect(t)).body, { active: false }, label);
  }
  const rf = await v.gw.refresh(notes.refresh);
  assert.equal(rf.status, 400, rf.text);
  assert.equal(rf.body?.error, 'invalid_grant');
  // The downstream exchange is refused.
  const rel = await v.release(gh.grant, 'list_issues');
  assert.ok(rel.status >= 400 && rel.status < 500, `release after revocation: ${rel.status} ${rel.text}`);
  assert.equal(rel.body?.access_token, undefined);
  assert.equal(typeof rel.body?.error, 'string');
  // The pending approval is cancelled.
  assert.equal(v.sql(`SELECT status FROM approvals WHERE id = '${approvalId}'`), 'cancelled');
  // The vault row is gone; the provider sees the refresh token revoked; its access token dies.
  assert.equal(v.sql(`SELECT count(*) FROM vault_records WHERE consent_id = '${gh.cid}'`), '0');
  const seen = await v.waitFor(() => revocationsFor(dsGrant).find((e) => e.kind === 'RefreshToken' && e.status === 200), 15000);
  assert.ok(seen, `the provider saw the refresh token revoked: ${JSON.stringify(v.dsLog())}`);
  assert.equal(seen.client_id, 'consentd-github');
  assert.deepEqual(await v.dsIntrospect(released), { active: false }, 'the released access token is dead at the provider');
  assert.equal((await v.callApi(released)).status, 401);
  // bob is untouched.
  assert.equal((await v.gw.introspect(bob.grant)).body?.active, true, "bob's grant lives on");
  assert.equal(v.sql(`SELECT revoked_at FROM consents WHERE id = '${bob.cid}'`), '0');

  // One event per revoked consent waits; the receiver is down, so the attempt failed.
  const rows = await waitFor('failed attempts for both events', () => {
    const out = v.sql(`SELECT consent_id || '|' || attempts || '|' || delivered_at FROM events_outbox ORDER BY consent_id`)
      .split('\n').filter(Boolean).map((l) => l.split('|'));
    return out.length === 2 && out.every(([, att]) => Number(att) >= 1) ? out : null;
  }, 10000);
  assert.deepEqual(rows.map(([cid]) => cid).sort(), [notes.cid, gh.cid].sort());
  assert.ok(rows.every(([, , delivered]) => delivered === '0'), 'nothing delivered');
});

test('consentd restarted on the same directory, receiver back: one verified SET per revoked consent, exactly once', async () => {
  assert.ok(approvalId, 'the previous tests ran');
  const st = await v.c.stop({ remove: false });
  assert.equal(st.code, 0, `consentd exit: ${v.c.proc.stderr.slice(-3000)}`);
  c2 = await startConsentd({ dir: v.c.dir, port: v.c.port, keepDir: true, config });
  await waitNodesReady(c2);
  assert.equal(c2.url, v.url);
  assert.equal(v.sql('SELECT count(*) FROM events_outbox WHERE delivered_at = 0'), '2', 'both events still wait');
  // Still revoked after the restart.
  assert.deepEqual((await v.gw.introspect(notes.refresh)).body, { active: false });

  // The retry schedule (5 s, doubling) decides when the next attempt comes.
  const nextAt = Number(v.sql('SELECT max(next_attempt_at) FROM events_outbox WHERE delivered_at = 0'));
  const untilNext = Math.max(0, nextAt * 1000 - Date.now());
  const budget = Math.max(20000, untilNext + 5000);
  const t0 = Date.now();
  rcv = await startReceiver({ port: rport, consentdUrl: v.url });
  await waitFor('two SETs', () => rcv.got.length >= 2, budget);
  const took = Date.now() - t0;
  // eslint-disable-next-line no-console
  console.log(`# events arrived ${took} ms after the receiver came up (next attempt was due in ${untilNext} ms)`);
  assert.deepEqual(rcv.refused, []);

  const byCid = new Map(rcv.got.map((g) => [g.payload.events?.[EVENT]?.cid, g]));
  assert.deepEqual([...byCid.keys()].sort(), [notes.cid, gh.cid].sort(), 'one SET per revoked consent');
  for (const [cid, agent, resource] of [[notes.cid, 'butler', 'notes'], [gh.cid, 'coder', 'github']]) {
    const { header, payload: p } = byCid.get(cid);
    assert.equal(header.alg, 'ES256');
    assert.equal(header.typ, 'secevent+jwt');
    assert.ok(header.kid);
    assert.equal(p.iss, v.url);
    assert.equal(p.aud, 'agent-gateway');
    assert.match(p.jti, /^[0-9a-f]{32}$/);
    assert.equal(p.exp, undefined, 'a SET has no exp');
    assert.deepEqual(p.sub_id, { format: 'iss_sub', iss: v.idp.issuer, sub: 'alice' });
    assert.deepEqual(Object.keys(p.events), [EVENT]);
    const e = p.events[EVENT];
    assert.equal(e.cid, cid);
    assert.equal(e.agent_id, agent);
    assert.equal(e.resource, `urn:consentd:resource:${resource}`);
    assert.equal(typeof e.reason, 'string');
    assert.ok(p.toe <= p.iat);
  }
  assert.equal(new Set(rcv.got.map((g) => g.payload.jti)).size, 2, 'distinct jti');
  const stored = v.sql('SELECT jti FROM events_outbox WHERE delivered_at > 0 ORDER BY jti').split('\n');
  assert.deepEqual(stored, rcv.got.map((g) => g.payload.jti).sort());

  // No duplicate.
  await sleep(6000);
  assert.equal(rcv.got.length, 2, 'no second delivery');
  assert.equal(v.sql('SELECT count(*) FROM events_outbox'), '2');
});

test('repeating the bulk revoke revokes 0 and sends no new event', async () => {
  assert.ok(rcv, 'the receiver is up');
  const r = await adminApi('POST', '/admin/api/revocations', { user: 'alice', reason: 'offboarding' });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.body, { revoked: 0 });
  await sleep(6000);
  assert.equal(rcv.got.length, 2, 'no new event');
  assert.equal(v.sql('SELECT count(*) FROM events_outbox'), '2', 'no new outbox entry');
  assert.deepEqual(rcv.refused, []);
  assert.equal((await v.gw.introspect(bob.grant)).body?.active, true, "bob's grant still lives");
});
