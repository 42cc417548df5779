// The organisation's decision point (issue #32 item 5) against a real policy engine: Cedar
// (@cedar-policy/cedar-wasm) behind an OpenID AuthZEN 1.0 Access Evaluation endpoint
// (tests/lib/authzen-pdp.js), the real IdPs and the real binary.  consentd asks it before a
// person is asked, at flow D's /token with authorization_details and at /proxy:
//   - permit: released without a person, vault.released says approved_by=decision point;
//   - deny (a forbid policy): access_denied "denied by the organisation's decision point",
//     nothing asked, nothing released, nothing sent upstream;
//   - no decision (no Cedar policy applies): the person is asked as before;
//   - a timeout, a PDP that is down, an answer that is not AuthZEN: on_error = deny refuses
//     (fail closed), on_error = ask asks the person;
// and every call is one authzen.evaluated audit entry, without the bearer token.
//
// Stacks: main (on_error = deny, timeout_ms = 2000)   ask (on_error = ask, timeout_ms = 2000)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startVaultStack, signedInJars, PROVIDER_SECRETS, DOWNSTREAM } from '../lib/vaultstack.js';
import { startCedarPdp } from '../lib/authzen-pdp.js';
import { startRecorder } from '../lib/recorder.js';
import { ghproxyClient, ghproxyConfig } from '../lib/proxystack.js';
import { pollExchange } from '../lib/gateway.js';
import { basicAuth } from '../lib/idplogin.js';

const TOKEN = 'pdp-bearer-0123456789abcdef';
const ALLOW = 'github:issues:read github:issues:write ghproxy:issues:read ghproxy:issues:write';
// Cedar: create_issue is permitted on repo "docs", forbidden on repo "secret"; for any other
// repo no policy applies (the person is asked).  /token's parameters are the details'
// ({repo, title}); the proxy's are {path: {owner, repo}, query, body}.
const POLICIES = {
  'docs-open': 'permit(principal, action == Action::"create_issue", resource) when '
    + '{ context.parameters has repo && context.parameters.repo == "docs" };',
  'secret-closed': 'forbid(principal, action == Action::"create_issue", resource) when '
    + '{ context.parameters has repo && context.parameters.repo == "secret" };',
  'proxy-docs-open': 'permit(principal, action == Action::"create_issue", resource == Resource::"ghproxy") when '
    + '{ context.parameters has path && context.parameters.path.repo == "docs" };',
  'proxy-secret-closed': 'forbid(principal, action == Action::"create_issue", resource == Resource::"ghproxy") when '
    + '{ context.parameters has path && context.parameters.path.repo == "secret" };',
};
const DENIED = "denied by the organisation's decision point";

let v; let w; let pdp; let pdp2; let rec;
let alice; let aliceProxy; let bob;
function stackConfig(endpoint, onError) {
  return ({ providerIssuer }) => ({
    consent: { max_pending_per_user: 50 },
    ...ghproxyConfig({ providerIssuer, baseUrl: rec.url }),
    'action.github.create_issue': { description: 'Open an issue', scope: 'issues:write', approval: 'required',
      approval_enforced_by: 'gateway' },  // the gateway holds the released token to the call (#32)
    'agent.coder': { allow: `notes:read notes:write ${ALLOW}` },
    // 2 s: the answers that must arrive in time do on a loaded machine; the slow PDP takes 6.
    authzen: { endpoint, token: TOKEN, timeout_ms: 2000, on_error: onError },
  });
}
before(async () => {
  rec = await startRecorder();
  pdp = await startCedarPdp({ policies: POLICIES, token: TOKEN });
  pdp2 = await startCedarPdp({ policies: POLICIES, token: TOKEN });
  const common = { accessTokenTTL: 60, extraDsClients: (url) => [ghproxyClient(url)] };
  v = await startVaultStack({ ...common, config: stackConfig(pdp.url, 'deny') });
  w = await startVaultStack({ ...common, config: stackConfig(pdp2.url, 'ask') });
  rec.introspectWith({
    introspectionEndpoint: v.dsMeta.introspection_endpoint, clientId: 'resource-server',
    clientSecret: PROVIDER_SECRETS.rs, audience: DOWNSTREAM.resource,
  });
  alice = await connect(v, { user: 'alice', audience: 'github' });
  aliceProxy = await connect(v, { user: 'alice', audience: 'ghproxy' });
  bob = await connect(w, { user: 'bob', audience: 'github' });
});
after(async () => {
  try { await v?.stop(); await w?.stop(); } finally {
    await pdp?.stop(); await pdp2?.stop(); await rec?.stop();
  }
});

// --- helpers ---------------------------------------------------------------------------

const signedIn = signedInJars();
const details = (params) => JSON.stringify([{ type: 'agent_action', action: 'create_issue', parameters: params }]);

// The person connects (user, coder, audience) and the gateway gets a grant.
async function connect(s, { user, audience, scope = 'issues:read issues:write' }) {
  const jar = await signedIn(s.url, user);
  const subjectToken = await s.idToken(user);
  const first = await s.gw.exchange({ subjectToken, audience, scope, agentId: 'coder' });
  assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
  const a = await s.approveHttp({ jar, consentUri: first.body.consent_uri, user });
  assert.equal(a.status, 303, `consent decision: ${a.status}`);
  const callbackUrl = await s.providerLoginHttp({ jar, authorizeUrl: a.location, user });
  const d = await s.deliverCallback({ jar, callbackUrl });
  assert.equal(d.first.status, 303, `callback: ${d.text?.slice(0, 300)}`);
  const g = await pollExchange(s.gw, { subjectToken, audience, scope, agentId: 'coder' });
  assert.equal(g.status, 200, JSON.stringify(g.body));
  const { payload } = await s.gw.verify(g.body.access_token);
  return { grant: g.body.access_token, cid: payload.cid };
}

// The authzen.evaluated entries of consent cid, oldest first: [{ outcome, detail, actor, subject }].
function evaluations(s, cid) {
  const out = s.sql(`SELECT outcome, detail, actor, subject FROM audit WHERE action = 'authzen.evaluated' `
    + `AND consent_id = '${cid}' ORDER BY seq`);
  return out ? out.split('\n').map((l) => { const [outcome, detail, actor, subject] = l.split('|'); return { outcome, detail, actor, subject }; }) : [];
}
const count = (s, where) => Number(s.sql(`SELECT count(*) FROM ${where}`));

function proxy(s, path, { grant, json }) {
  return fetch(`${s.url}/proxy/ghproxy${path}`, {
    method: 'POST',
    headers: { authorization: basicAuth('agent-gateway', 'gateway-dev-secret'), 'consentd-grant': grant, 'content-type': 'application/json' },
    body: JSON.stringify(json),
  }).then(async (r) => ({ status: r.status, body: await r.json().catch(() => null) }));
}


// --- /token with authorization_details ------------------------------------------------

test('/token: the decision point permits, and the token is released without asking the person', async () => {
  const n = pdp.seen.length;
  const params = { repo: 'docs', title: 'Typo', labels: ['a', 'b'] };
  const r = await v.release(alice.grant, 'create_issue', { authorization_details: details(params) });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.ok(r.body.access_token);
  assert.equal(count(v, `approvals WHERE consent_id = '${alice.cid}'`), 0, 'no approval request');
  // What the PDP was asked (AuthZEN 1.0 Access Evaluation request).
  assert.equal(pdp.seen.length, n + 1);
  const q = pdp.seen.at(-1);
  assert.equal(q.authorization, `Bearer ${TOKEN}`);
  assert.equal(q.contentType, 'application/json');
  assert.equal(q.body.subject.type, 'user');
  assert.equal(q.body.subject.properties.issuer, v.idp.issuer);
  assert.deepEqual(q.body.action, { name: 'create_issue', properties: { parameters: params } });
  assert.deepEqual(q.body.resource, { type: 'consentd_resource', id: 'github' });
  assert.equal(q.body.context.agent, 'coder');
  assert.equal(q.body.context.consent_id, alice.cid);
  assert.match(q.body.context.client, /agent-gateway/);
  assert.match(q.body.context.params_digest, /^[A-Za-z0-9_-]{43}$/);
  // One audit entry for the call; the release names the decision point; no token anywhere.
  const e = evaluations(v, alice.cid).at(-1);
  assert.equal(e.outcome, 'permit');
  assert.match(e.detail, /^action=create_issue; digest=[A-Za-z0-9_-]{43}; decision=permit; reason=docs-open; ms=\d+$/);
  assert.equal(e.subject, q.body.subject.id);
  const rel = v.sql(`SELECT detail FROM audit WHERE action = 'vault.released' AND consent_id = '${alice.cid}' ORDER BY seq DESC LIMIT 1`);
  assert.match(rel, /approved_by=decision point/);
  assert.equal(count(v, `audit WHERE detail LIKE '%${TOKEN}%'`), 0, 'the bearer token is never audited');
});

test('/token: the decision point denies (a Cedar forbid policy): access_denied, nobody is asked', async () => {
  const r = await v.release(alice.grant, 'create_issue', { authorization_details: details({ repo: 'secret', title: 'x' }) });
  assert.equal(r.status, 400, JSON.stringify(r.body));
  assert.equal(r.body.error, 'access_denied');
  assert.equal(r.body.error_description, DENIED);
  assert.equal(r.body.access_token, undefined);
  assert.equal(count(v, `approvals WHERE consent_id = '${alice.cid}'`), 0, 'no approval request');
  const e = evaluations(v, alice.cid).at(-1);
  assert.equal(e.outcome, 'deny');
  assert.match(e.detail, /decision=deny; reason=forbidden by secret-closed/);
});

test('/token: no decision (no policy applies): the person is asked as before', async () => {
  const r = await v.release(alice.grant, 'create_issue', { authorization_details: details({ repo: 'web', title: 'ask me' }) });
  assert.equal(r.status, 400, JSON.stringify(r.body));
  assert.equal(r.body.error, 'approval_required');
  assert.ok(r.body.approval_uri);
  assert.equal(evaluations(v, alice.cid).at(-1).outcome, 'ask');
});

test('on_error = deny: a timeout, a PDP that is down and a non-AuthZEN answer all refuse (fail closed)', async () => {
  const params = { repo: 'docs', title: 'would be permitted' };
  try {
    pdp.delayMs = 6000;
    const t0 = Date.now();
    let r = await v.release(alice.grant, 'create_issue', { authorization_details: details(params) });
    const ms = Date.now() - t0;
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.error, 'access_denied');
    assert.equal(r.body.error_description, DENIED);
    assert.ok(ms < 5000, `answered after the 2 s timeout, not the PDP's 6 s (${ms} ms)`);
    let e = evaluations(v, alice.cid).at(-1);
    assert.equal(e.outcome, 'error');
    assert.match(e.detail, /failure=timeout; on_error=deny: denied/);
    pdp.delayMs = 0;

    await pdp.down();
    r = await v.release(alice.grant, 'create_issue', { authorization_details: details(params) });
    assert.equal(r.body.error, 'access_denied', JSON.stringify(r.body));
    assert.equal(r.body.error_description, DENIED);
    e = evaluations(v, alice.cid).at(-1);
    assert.equal(e.outcome, 'error');
    assert.match(e.detail, /failure=unreachable/);
    await pdp.up();

    pdp.answer = '{"decision": "true"}';
    r = await v.release(alice.grant, 'create_issue', { authorization_details: details(params) });
    assert.equal(r.body.error, 'access_denied', JSON.stringify(r.body));
    assert.match(evaluations(v, alice.cid).at(-1).detail, /failure=the answer's decision is missing or not a boolean/);
    pdp.answer = '{"decision": false, "decision": true}';
    r = await v.release(alice.grant, 'create_issue', { authorization_details: details(params) });
    assert.equal(r.body.error, 'access_denied', JSON.stringify(r.body));
    assert.match(evaluations(v, alice.cid).at(-1).detail, /failure=the answer is not JSON \(or has a duplicate key\)/);
  } finally {
    pdp.delayMs = 0;
    pdp.answer = null;
    await pdp.up().catch(() => {});
  }
  assert.equal(count(v, `approvals WHERE consent_id = '${alice.cid}' AND parameters LIKE '%would be permitted%'`), 0,
    'the person was never asked');
  // Back up: the same call is permitted.
  const ok = await v.release(alice.grant, 'create_issue', { authorization_details: details(params) });
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
});

test('on_error = ask: a timeout or a PDP that is down falls back to asking the person', async () => {
  try {
    pdp2.delayMs = 6000;
    let r = await w.release(bob.grant, 'create_issue', { authorization_details: details({ repo: 'docs', title: 'slow' }) });
    assert.equal(r.body?.error, 'approval_required', JSON.stringify(r.body));
    let e = evaluations(w, bob.cid).at(-1);
    assert.equal(e.outcome, 'error');
    assert.match(e.detail, /failure=timeout; on_error=ask: the person is asked/);
    pdp2.delayMs = 0;
    await pdp2.down();
    r = await w.release(bob.grant, 'create_issue', { authorization_details: details({ repo: 'docs', title: 'down' }) });
    assert.equal(r.body?.error, 'approval_required', JSON.stringify(r.body));
    e = evaluations(w, bob.cid).at(-1);
    assert.match(e.detail, /failure=unreachable .*on_error=ask/);
  } finally {
    pdp2.delayMs = 0;
    await pdp2.up().catch(() => {});
  }
  // A deny is a deny whatever on_error says.
  const d = await w.release(bob.grant, 'create_issue', { authorization_details: details({ repo: 'secret', title: 'x' }) });
  assert.equal(d.body?.error_description, DENIED, JSON.stringify(d.body));
});

// --- /proxy ------------------------------------------------------------------------------

test('/proxy: permit forwards without asking, deny is a 403 that never reaches the upstream', async () => {
  const n0 = rec.seen.length;
  const ok = await proxy(v, '/repos/acme/docs/issues', { grant: aliceProxy.grant, json: { title: 'permitted' } });
  assert.equal(ok.status, 201, JSON.stringify(ok.body));   // the recorder's answer to a POST
  assert.equal(rec.seen.length, n0 + 1, 'forwarded once');
  const q = pdp.seen.at(-1).body;
  assert.deepEqual(q.action.properties.parameters.path, { owner: 'acme', repo: 'docs' });
  assert.equal(q.resource.id, 'ghproxy');
  assert.equal(evaluations(v, aliceProxy.cid).at(-1).outcome, 'permit');

  const no = await proxy(v, '/repos/acme/secret/issues', { grant: aliceProxy.grant, json: { title: 'forbidden' } });
  assert.equal(no.status, 403, JSON.stringify(no.body));
  assert.equal(no.body.error, 'access_denied');
  assert.equal(no.body.error_description, DENIED);
  assert.equal(rec.seen.length, n0 + 1, 'nothing upstream');
  assert.equal(evaluations(v, aliceProxy.cid).at(-1).outcome, 'deny');

  const ask = await proxy(v, '/repos/acme/web/issues', { grant: aliceProxy.grant, json: { title: 'ask' } });
  assert.equal(ask.status, 403, JSON.stringify(ask.body));
  assert.equal(ask.body.error, 'approval_required');
  assert.equal(rec.seen.length, n0 + 1, 'nothing upstream');
});
